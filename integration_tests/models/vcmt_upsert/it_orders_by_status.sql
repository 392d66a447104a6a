{#- A downstream aggregate read with sign arithmetic: exact without FINAL. -#}
{{ config(materialized='view') }}

select
    status,
    sum(sign) as orders,
    sum(amount * sign) as amount
from {{ ref('it_fct_orders') }}
group by status
having sum(sign) > 0
