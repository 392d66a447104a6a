{{ config(materialized='ephemeral') }}

{#-
    Orders lines with typed columns, and for a line that cannot be staged the reason why
    (NULL when the line is valid). Types are the ClickHouse mart's: Int32 and Int64 keys,
    Float64 amount, and created_at, sent as epoch milliseconds, as a timestamp.
-#}

{{ cdc_typed_lines(
    ref('stg_cdc__envelopes'),
    topic='orders',
    key=['tenant_id', 'order_id'],
    columns={
        'tenant_id': 'int', 'order_id': 'bigint', 'customer_id': 'bigint', 'status': 'string', 'amount': 'double',
        'note': 'string', 'created_at': 'timestamp_millis',
    },
) }}
