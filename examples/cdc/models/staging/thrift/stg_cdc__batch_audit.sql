{{ config(materialized='view') }}

{#-
    One row per topic and batch: lines landed, staged and quarantined. Staging never drops a line, so
    `unaccounted` is 0 everywhere once every landed batch has been staged; a positive value means a
    batch waits for `dbt run` or lines were lost, a negative one that staged data outlived its raw files.
-#}

with counted as (
    select
        topic,
        _batch_id,
        1 as events_in,
        0 as staged,
        0 as quarantined
    from {{ ref('stg_cdc__envelopes') }}
    union all
    select
        'orders' as topic,
        _batch_id,
        0 as events_in,
        1 as staged,
        0 as quarantined
    from {{ ref('stg_cdc__order_changes') }}
    union all
    select
        'customers' as topic,
        _batch_id,
        0 as events_in,
        1 as staged,
        0 as quarantined
    from {{ ref('stg_cdc__customer_changes') }}
    union all
    select
        topic,
        _batch_id,
        0 as events_in,
        0 as staged,
        1 as quarantined
    from {{ ref('stg_cdc__quarantine') }}
)

select
    topic,
    _batch_id,
    concat(topic, '/', _batch_id) as batch_key,
    sum(events_in) as events_in,
    sum(staged) as staged,
    sum(quarantined) as quarantined,
    sum(events_in) - sum(staged) - sum(quarantined) as unaccounted
from counted
group by topic, _batch_id
