{{ select_orders_from('orders_rows') }}
