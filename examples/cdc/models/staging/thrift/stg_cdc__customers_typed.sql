{{ config(materialized='ephemeral') }}

{#-
    Customers lines with typed columns, and for a line that cannot be staged the reason why
    (NULL when the line is valid). Updates are partial: a column the update did not change is NULL,
    and the mart's merge policies (coalesce, greatest) keep the stored value.
-#}

{{ cdc_typed_lines(
    ref('stg_cdc__envelopes'),
    topic='customers',
    key=['customer_id'],
    columns={'customer_id': 'bigint', 'name': 'string', 'email': 'string', 'tier': 'string', 'lifetime_value': 'double'},
) }}
