{{ cdc_staging_config(partition_by=['_batch_id']) }}

{{ cdc_valid_changes(
    ref('stg_cdc__orders_typed'),
    columns=['tenant_id', 'order_id', 'customer_id', 'status', 'amount', 'note', 'created_at'],
) }}
