{{ projected_orders_config(deduplicate_merge_projection_mode='ignore') }}

{{ select_orders_from('orders_rows') }}
