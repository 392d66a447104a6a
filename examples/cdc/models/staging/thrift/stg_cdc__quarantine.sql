{#-
    Partitioned by topic as well as batch: topics land independently, and overwriting batch N of one
    topic must not wipe batch N of the other. A batch with no malformed line leaves no partition, so it
    is read again on the next run and again yields nothing.
-#}
{{ cdc_staging_config(partition_by=['topic', '_batch_id']) }}

{%- set new_batches = cdc_new_batches_filter(this) %}

{%- for typed in ['stg_cdc__orders_typed', 'stg_cdc__customers_typed'] %}
    select
        reason,
        raw_payload,
        source_file,
        topic,
        _batch_id
    from {{ ref(typed) }}
    where
        reason is not null
        and {{ new_batches }}
    {%- if not loop.last %}
        union all
    {%- endif %}
{%- endfor %}
