{#- Late and amended batches of a staged dataset, for a `vcmt_upsert` model
    whose `watermark` is `_batch_id` (called by `vcmt.lake_source()`).

    A watermark reads each batch once: a batch folder that lands after a later
    batch was loaded, or a file added to a batch already loaded, would never
    be read. So each run lists the dataset's committed files per batch (a file
    listing, no file is opened), compares the batches at or below the
    watermark with what was listed when they were loaded, and fails naming
    every batch that is new or changed since; then it records the listing of
    the batches above the watermark, the ones this run loads. The record is
    `<model>__lake_batches` (docs/staging.md, "Late and amended batches").
-#}
{% macro _check_lake_batches(dataset, listing_source) %}
  {%- if not execute or config.get('watermark') != '_batch_id' or config.get('materialized') != 'vcmt_upsert' -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set record = vcmt._lake_record(this, 'lake_batches') -%}
  {%- set ds = vcmt._sql_string(dataset) -%}
  {#- The batch from the path, not the hive column: a lake with no file yet lists nothing (and the model's read
      says so), whatever the server's hive partitioning. A sum of the names' hashes, not a XOR: two topics' folders
      of one batch hold files of the same name. -#}
  {%- set listing = "select toInt64OrNull(extract(_path, '/_batch_id=([^/]+)/')) as batch, count() as files, "
                    ~ 'sum(sipHash64(_file)) as names from ' ~ listing_source ~ ' group by batch having batch is '
                    ~ 'not null' -%}
  {%- set recorded_before = vcmt._relation_exists(record) -%}
  {%- if not recorded_before -%}
    {%- do run_query('create table if not exists ' ~ record
                     ~ ' (dataset String, batch Int64, files UInt64, names UInt64, recorded_at DateTime64(6))'
                     ~ ' engine = ReplacingMergeTree(recorded_at) order by (dataset, batch)') -%}
  {%- endif -%}
  {#- The watermark this run reads above (vcmt.watermark()); none on a first run or a full refresh, which read
      every batch. -#}
  {%- set objs = vcmt.objects(this.incorporate(type='table'), config.get('sharding_key')) -%}
  {%- set watermark = none -%}
  {%- if vcmt.is_incremental() and vcmt._relation_exists(objs.loads) -%}
    {%- set watermark = vcmt._recorded_watermark(objs) -%}
  {%- endif -%}
  {%- set known = recorded_before and run_query('select count() from ' ~ record ~ ' where dataset = '
      ~ ds).columns[0].values()[0] | int > 0 -%}
  {#- Without a record of this dataset yet (a model loaded before this check existed), the listing becomes
      the record: nothing to compare with. -#}
  {%- if watermark is not none and known -%}
    {%- set compare -%}
      select batch, countIf(src = 0) = 0 as late
      from (
        select batch, files, names, 1 as src from ({{ listing }}) where batch <= toInt64({{ watermark }})
        union all
        select batch, files, names, 0 as src from {{ record }} final
        where dataset = {{ ds }} and batch <= toInt64({{ watermark }})
      )
      group by batch
      having countIf(src = 1) = 1 and (late or uniqExact(files, names) > 1)
      order by batch
      {{ vcmt._read_settings() }}
    {%- endset -%}
    {%- set rows = run_query(compare).rows -%}
    {%- if rows | length > 0 -%}
      {%- set late = rows | selectattr(1) | map(attribute=0) | map('string') | list -%}
      {%- set amended = rows | rejectattr(1) | map(attribute=0) | map('string') | list -%}
      {%- set problems = [] -%}
      {%- if late -%}
        {%- do problems.append(('batch ' if late | length == 1 else 'batches ') ~ (late[:20] | join(', '))
                               ~ (' and ' ~ (late | length - 20) ~ ' more' if late | length > 20 else '')
                               ~ ' landed after batch ' ~ watermark ~ ' was loaded') -%}
      {%- endif -%}
      {%- if amended -%}
        {%- set one = amended | length == 1 -%}
        {%- do problems.append(('batch ' if one else 'batches ') ~ (amended[:20] | join(', '))
                               ~ (' and ' ~ (amended | length - 20) ~ ' more' if amended | length > 20 else '')
                               ~ (' has files that were not there (or are gone) since it was loaded' if one
                                  else ' have files that were not there (or are gone) since they were loaded')) -%}
      {%- endif -%}
      {{ exceptions.raise_compiler_error("vcmt.lake_source('" ~ dataset ~ "') in model `" ~ this.identifier ~ "`: "
          ~ (problems | join('; ')) ~ ". The `_batch_id` watermark reads each batch once, so their lines are not in "
          ~ "the model. "
          ~ "Load every batch again with `dbt run -s " ~ this.identifier ~ " --full-refresh` (a batch restaged "
          ~ "with the "
          ~ "same lines changes nothing). To keep this from recurring, land and stage batches in `_batch_id` order and "
          ~ "never add files to a staged batch (docs/staging.md, \"Late and amended batches\").") }}
    {%- endif -%}
  {%- endif -%}
  {%- set above = ' where batch > toInt64(' ~ watermark ~ ')' if watermark is not none and known else '' -%}
  {%- do run_query('insert into ' ~ record ~ ' (dataset, batch, files, names, recorded_at) select ' ~ ds
                   ~ ', batch, files, names, now64(6) from (' ~ listing ~ ')' ~ above ~ ' ' ~ vcmt._read_settings()) -%}
{% endmacro %}
