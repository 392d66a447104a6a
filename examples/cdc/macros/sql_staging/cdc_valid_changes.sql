{#- The valid change events of a typed model (`reason is null`) in the
    batches the model being built has not staged yet (see
    `cdc_new_batches_filter`): the given columns, then the change-event
    columns the VersionedCollapsingMergeTree mart reads: `_version`
    (`source.lsn`), `sign` (-1 for a delete, +1 otherwise), `_op`,
    `_source_ts` and `_batch_id`. `_batch_id` comes last because it is the partition column,
    and Spark's insert overwrite takes partition columns at the end.

      {{ cdc_valid_changes(ref('stg_cdc__customers_typed'), columns=['customer_id', 'name']) }}
-#}
{% macro cdc_valid_changes(typed, columns) %}
select
    {%- for column in columns %}
    {{ column }},
    {%- endfor %}
    _version,
    cast(case when op = 'd' then -1 else 1 end as tinyint) as sign,
    op as _op,
    source_ts as _source_ts,
    _batch_id
from {{ typed }}
where
    reason is null
    and {{ cdc_new_batches_filter(this) }}
{% endmacro %}
