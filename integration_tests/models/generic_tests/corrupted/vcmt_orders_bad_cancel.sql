{{ select_orders_from('orders_rows') }}
union all
{{ select_orders_from('orders_corruptions') }}
where fixture = 'bad_cancel'
