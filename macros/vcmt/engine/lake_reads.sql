{#- What a mart reads of the lake (macros/lake/, docs/staging.md, "The staged
    lake and the marts"): listings of a staged dataset (no file is opened)
    and the mart's record of the files its loads claimed. Each read is one
    query returning plain values; what to do with them is decided by the
    macros in macros/lake/, which run no query. -#}


{#- The layout of `dataset`'s folder, from its two listings: {direct_files, direct_paths: up to 10 of the
    files directly in it, partition_files, bad_batch_folders: up to 10 `_batch_id=<N>` folders whose N is
    not a batch id (`_batch_id_ok_sql`), with their paths}. The names come as rows (an array's text is the
    driver's). -#}
{% macro _lake_layout(dataset, format) %}
  {%- set batch = "extract(_path, '.*/_batch_id=([^/]*)/')" -%}
  {%- set layout -%}
    select kind, files, name from (
      select 'direct' as kind, count() as files, arraySort(groupArray(10)(_path)) as names
      from {{ vcmt._lake_table_function(dataset, format, 'One', '*') }}
      union all
      select 'partitioned', count(), arraySort(groupUniqArrayIf(10)(extract(_path, '(.*/_batch_id=[^/]*)/'),
                                               {{ batch }} != '' and not {{ vcmt._batch_id_ok_sql(batch) }}))
      from {{ vcmt._lake_table_function(dataset, format, 'One') }}
    ) left array join names as name
    {{ vcmt._read_settings() }}
  {%- endset -%}
  {%- set found = {'direct_files': 0, 'direct_paths': [], 'partition_files': 0, 'bad_batch_folders': []} -%}
  {%- for row in run_query(layout).rows -%}
    {%- set direct = row[0] == 'direct' -%}
    {%- do found.update({'direct_files' if direct else 'partition_files': row[1] | int}) -%}
    {%- if row[2] -%}{%- do found['direct_paths' if direct else 'bad_batch_folders'].append(row[2]) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}


{#- The files of `spec`'s dataset loaded by the model `model` (a relation)
    that are not listed now as they were loaded: one row each, (path,
    listed: whether it is still in the lake, size then, size now, time then,
    time now, same time: whether its time is the one recorded, read in any
    time zone for a record that kept it as text). Times shown in UTC. -#}
{% macro _lake_loaded_changes(model, spec) %}
  {%- set changes -%}
    select loaded.path, listed.path != '' as listed,
           {{ vcmt._lake_recorded_size_sql('loaded.fingerprint') }} as size_then,
           ifNull(listed.file_size, 0) as size_now,
           {{ vcmt._lake_recorded_time_text_sql('loaded.fingerprint') }} as time_then,
           ifNull(formatDateTime(listed.file_time, '%F %T UTC', 'UTC'), 'unknown') as time_now,
           {{ vcmt._lake_same_time_sql('loaded.fingerprint', 'listed.file_time') }} as same_time
    from ({{ vcmt._lake_loaded_files_sql(model, spec.dataset) }}) as loaded
    left join ({{ vcmt._lake_files_listing_sql(spec) }}) as listed on listed.path = loaded.path
    where not (listed and {{ vcmt._lake_same_file_sql('loaded.fingerprint', 'listed.file_size', 'listed.file_time') }})
    order by loaded.path {{ vcmt._lake_read_settings() }}
  {%- endset -%}
  {{ return(run_query(changes).rows | list) }}
{% endmacro %}


{#- Up to 10 folders of `spec`'s dataset in which a file not loaded by the
    model `model` now sits beside a file a load of the model read that is no
    longer listed (its batch restaged under new names, whether the old files
    went in this run or an earlier one), or in which a file the model read
    is back after it was found gone. -#}
{% macro _lake_replayed_folders(model, spec) %}
  {%- set listing = 'select path from (' ~ vcmt._lake_files_listing_sql(spec) ~ ')' -%}
  {%- set ever_loaded = 'select path from ' ~ vcmt._on_every_node(vcmt._lake_files_record(model)) ~ ' where dataset = '
      ~ vcmt._sql_string(spec.dataset) ~ " and path != '' and invocation_id global in ("
      ~ vcmt._lake_loads_sql(model) ~ ')' -%}
  {%- set replayed -%}
    select distinct extract(path, '^(.*)/') as folder
    from ({{ listing }})
    where path not in (select path from ({{ vcmt._lake_loaded_files_sql(model, spec.dataset) }}))
      and (path in ({{ ever_loaded }})
           or folder in (select extract(path, '^(.*)/') from ({{ ever_loaded }}) where path not in ({{ listing }})))
    order by folder limit 10 {{ vcmt._lake_read_settings() }}
  {%- endset -%}
  {{ return(run_query(replayed).rows | map(attribute=0) | list) }}
{% endmacro %}


{#- What the model `model` (a relation) recorded of `dataset`, on every node: {loads: the loads it
    recorded, new_files_loads: those that read `dataset` with new_files=true, text_records: its loaded files
    whose fingerprint keeps the time as text}. -#}
{% macro _lake_record_summary(model, dataset) %}
  {%- set loads = vcmt._lake_loads_sql(model) -%}
  {%- set summary -%}
    select (select count() from ({{ loads }})),
           (select count() from {{ vcmt._on_every_node(vcmt._lake_files_record(model)) }}
            where dataset = {{ vcmt._sql_string(dataset) }} and path = '' and invocation_id global in ({{ loads }})),
           (select countIf({{ vcmt._lake_fingerprint_is_text_sql('fingerprint') }})
            from ({{ vcmt._lake_loaded_files_sql(model, dataset) }}))
    {{ vcmt._lake_read_settings() }}
  {%- endset -%}
  {%- set row = run_query(summary).rows[0] -%}
  {{ return({'loads': row[0] | int, 'new_files_loads': row[1] | int, 'text_records': row[2] | int}) }}
{% endmacro %}


{#- How many files of `dataset` this invocation claimed, in `record`. -#}
{% macro _lake_claimed_files(record, dataset) %}
  {{ return(run_query('select count() from ' ~ record ~ ' where dataset = ' ~ vcmt._sql_string(dataset)
                      ~ " and path != '' and fingerprint != " ~ vcmt._sql_string(vcmt._lake_gone())
                      ~ ' and invocation_id = ' ~ vcmt._sql_string(invocation_id)).rows[0][0] | int) }}
{% endmacro %}
