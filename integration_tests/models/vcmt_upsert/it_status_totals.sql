{#- Totals per status from it_fct_orders' change feed (README, "Downstream models"). -#}
{{ config(materialized='incremental', unique_key='status') }}

select
    status,
    sum(orders) as orders,
    sum(amount) as amount,
    max(_vcmt_load) as _vcmt_load
from (
    select
        status,
        sign as orders,
        amount * sign as amount,
        _vcmt_load
    from {{ vcmt.changes(ref('it_fct_orders')) }}
    {% if is_incremental() %}
        union all
        select
            status,
            orders,
            amount,
            _vcmt_load
        from {{ this }} as kept
        where kept.status in (select changed.status from {{ vcmt.changes(ref('it_fct_orders')) }} as changed)
    {% endif %}
)
group by status
