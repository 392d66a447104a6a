{#- A downstream model reading the current rows (FINAL on the table, then sign = 1). -#}
{{ config(materialized='view') }}

select
    tenant_id,
    order_id,
    status,
    amount
from {{ vcmt.current_rows(ref('it_fct_orders')) }}
