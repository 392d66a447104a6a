-- The change feed's incremental totals and the online aggregate equal the totals read by sign arithmetic:
-- every status where one of the three differs.
select
    v.status,
    t.orders as feed_orders,
    o.online_orders,
    v.orders as sign_orders
from {{ ref('it_orders_by_status') }} as v
full outer join (select status, orders, amount from {{ ref('it_status_totals') }} where orders > 0) as t
    on v.status = t.status
full outer join (
    select
        status,
        sum(orders) as online_orders,
        sum(amount) as online_amount
    from {{ ref('it_status_online') }}
    group by status
    having sum(orders) > 0
) as o on v.status = o.status
where
    not (t.orders = v.orders and o.online_orders = v.orders)
    or abs(t.amount - v.amount) > 0.000001
    or abs(o.online_amount - v.amount) > 0.000001
