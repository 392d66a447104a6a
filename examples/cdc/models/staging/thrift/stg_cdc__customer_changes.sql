{{ cdc_staging_config(partition_by=['_batch_id']) }}

{{ cdc_valid_changes(
    ref('stg_cdc__customers_typed'),
    columns=['customer_id', 'name', 'email', 'tier', 'lifetime_value'],
) }}
