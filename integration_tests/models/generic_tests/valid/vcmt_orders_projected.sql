{{ projected_orders_config(deduplicate_merge_projection_mode='rebuild') }}

{{ select_orders_from('orders_rows') }}
