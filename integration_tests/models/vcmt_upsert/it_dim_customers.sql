{{ config(
    materialized='vcmt_upsert',
    unique_key='customer_id',
    merge={
        'email': 'coalesce',
        'tier': 'coalesce',
        'lifetime_value': 'greatest',
        'visits': 'sum',
        'first_seen': 'keep',
        'score': '{old} * 2 + {new}',
    },
) }}

select
    customer_id,
    email,
    tier,
    lifetime_value,
    visits,
    first_seen,
    score,
    _version,
    sign
from {{ ref('it_customer_events') }}
