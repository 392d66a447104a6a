{#- Each committed file of a staged dataset read once: `vcmt.lake_source(dataset, new_files=true)`
    in a `vcmt_upsert` model (docs/staging.md, "Reading each file once").

    The record is `<model>__lake_files`: one row per file a load claimed,
    with the file's fingerprint as the listing gives it (size and
    modification time as a Unix time: the same in every time zone; no file
    opened) and the dbt invocation of the load.
    A file is *loaded* when the invocation that claimed it has a row in the
    model's `<model>__loads`: the load's own record, written after its last
    INSERT, is its commit. So a load that fails, is killed, or is fenced out
    by a load that took its lock over has claimed nothing, and the next run
    claims those files again.

    Under the model's lock, before the first read (`_claim_lake_files`,
    called by the materialization), each run reads what the lake and the
    record hold (engine/lake_reads.sql), decides (`_lake_claim_plan`), then:
    1. fails, naming them, if a loaded file now has another size or time (it
       was rewritten in place: its new lines would never be read), or, under
       delete_mode='unconditional', if a batch folder was staged again;
    2. claims every listed file that is not loaded, whatever its batch: late
       batches, files added to a loaded batch, files that landed during the
       previous run; on a first run or a full refresh every listed file.
    The model's SELECT then reads exactly the files this invocation claimed,
    at the fingerprint it claimed them with (the `_path` filter lets
    ClickHouse open no other file).

    On a cluster (a model created ON CLUSTER, sharded or not) the record is
    created on every node, like `<model>__loads`; a load writes its claim on
    the node dbt connects to, and "loaded" reads both through every replica
    (`_on_every_node`), so a run through another node neither reads a loaded
    file again nor misses one. -#}


{#- The record of `model` (a relation): which files its loads claimed. -#}
{% macro _lake_files_record(model) %}
  {{ return(vcmt._lake_record(model, 'lake_files')) }}
{% endmacro %}


{#- A file's fingerprint, from the listing's size and modification time (`size`, `time`: SQL of its `_size`
    and `_time`): the size and the Unix time, which read the same in every session's time zone. -#}
{% macro _lake_fingerprint_sql(size='_size', time='_time') %}
  {{ return("concat(toString(ifNull(" ~ size ~ ", 0)), ' bytes, Unix time ', ifNull(toString(toUnixTimestamp(" ~ time
            ~ ")), 'unknown'))") }}
{% endmacro %}


{#- A recorded fingerprint `fp` (SQL) of the earlier kind, with the time as text in the time zone of the
    session that wrote it (`<size> bytes, modified <YYYY-MM-DD hh:mm:ss>`, or `modified at an unknown time`),
    which no record names. The next run writes each such record again as `_lake_fingerprint_sql` says, for a
    file it finds unchanged (docs/staging.md, "Reading each file once"). -#}
{% macro _lake_fingerprint_is_text_sql(fp) %}
  {{ return("position(" ~ fp ~ ", ' bytes, modified ') > 0") }}
{% endmacro %}


{#- The size in the recorded fingerprint `fp` (SQL), of either kind. -#}
{% macro _lake_recorded_size_sql(fp) %}
  {{ return("toUInt64OrZero(extract(" ~ fp ~ ", '^([0-9]+) bytes'))") }}
{% endmacro %}


{#- The time in the recorded fingerprint `fp` (SQL), as an error message shows it: in UTC, or as recorded
    for a time kept as text. -#}
{% macro _lake_recorded_time_text_sql(fp) %}
  {%- set unix = "extract(" ~ fp ~ ", ' bytes, Unix time ([0-9]+)$')" -%}
  {{ return("multiIf(" ~ unix ~ " != '', formatDateTime(toDateTime64(toInt64(" ~ unix ~ "), 0, 'UTC'), '%F %T UTC'), "
            ~ vcmt._lake_fingerprint_is_text_sql(fp) ~ " and " ~ fp ~ " not like '%at an unknown time', concat(extract("
            ~ fp ~ ", ' bytes, modified (.*)$'), ' (in the time zone of the load that recorded it)'), 'unknown')") }}
{% endmacro %}


{#- Whether the listed modification time `time` (SQL of a Nullable(DateTime)) is the one in the recorded
    fingerprint `fp` (SQL). For a time kept as text in an unknown zone: when it reads so in some zone, i.e.
    the text read as UTC is `time` shifted by a whole UTC offset (quarter hours, -12 h to +14 h). -#}
{% macro _lake_same_time_sql(fp, time) %}
  {%- set shift = "(toUnixTimestamp64Second(toDateTime64OrNull(extract(" ~ fp ~ ", ' bytes, modified (.*)$'), 0, "
                  ~ "'UTC')) - toUnixTimestamp(" ~ time ~ "))" -%}
  {{ return("if(" ~ vcmt._lake_fingerprint_is_text_sql(fp) ~ ", if(" ~ time ~ " is null, " ~ fp
            ~ " like '%at an unknown time', ifNull(" ~ shift ~ " % 900 = 0 and " ~ shift
            ~ " between -43200 and 50400, 0)), " ~ fp ~ " = " ~ vcmt._lake_fingerprint_sql(
              vcmt._lake_recorded_size_sql(fp), time) ~ ")") }}
{% endmacro %}


{#- Whether the recorded fingerprint `fp` (SQL) is the listed file's (`size`, `time`: SQL of its `_size`
    and `_time`): the same size, and the same time (`_lake_same_time_sql`). -#}
{% macro _lake_same_file_sql(fp, size, time) %}
  {{ return(vcmt._lake_recorded_size_sql(fp) ~ " = ifNull(" ~ size ~ ", 0) and "
            ~ vcmt._lake_same_time_sql(fp, time)) }}
{% endmacro %}


{#- The marker `lake_source` leaves in a model's SQL for each dataset read with
    `new_files=true`: the claim finds it there. JSON with `*` escaped, so the
    comment cannot end inside it. -#}
{% macro _lake_files_marker(spec) %}
  {{ return('/* vcmt_lake_files ' ~ (tojson(spec) | replace('*', '\\u002a')) ~ ' */') }}
{% endmacro %}

{% macro _lake_files_specs(sql) %}
  {%- set specs = [] -%}
  {%- for found in modules.re.findall('/\\* vcmt_lake_files (\\{[^*]*\\}) \\*/', sql) -%}
    {%- set spec = fromjson(found) -%}
    {%- if spec not in specs -%}{%- do specs.append(spec) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(specs) }}
{% endmacro %}


{#- The files of `spec`'s dataset as listed now: (path, fingerprint, file_size, file_time: the listing's
    `_size` and `_time`). -#}
{% macro _lake_files_listing_sql(spec) %}
  {{ return('select _path as path, ' ~ vcmt._lake_fingerprint_sql() ~ ' as fingerprint, _size as file_size, '
            ~ '_time as file_time from ' ~ vcmt._lake_table_function(spec.dataset, spec.format, 'One', spec.files)) }}
{% endmacro %}


{#- The files of `dataset` the model has loaded: (path, fingerprint, loaded_by: the invocation), the latest
    claim of each path by a load the model recorded. -#}
{% macro _lake_loaded_files_sql(model, dataset) %}
  {{ return('select path, argMax(fingerprint, claimed_at) as fingerprint, argMax(invocation_id, claimed_at) as '
            ~ 'loaded_by from '
            ~ vcmt._on_every_node(vcmt._lake_files_record(model)) ~ ' where dataset = '
            ~ vcmt._sql_string(dataset) ~ " and path != '' and invocation_id global in ("
            ~ vcmt._lake_loads_sql(model) ~ ") group by path having fingerprint != "
            ~ vcmt._sql_string(vcmt._lake_gone()) ) }}
{% endmacro %}


{#- The settings of a statement that reads what is loaded: the pinned ones, and on a cluster no node skipped
    (a node that is down fails the run; skipped, its loads' files would be read again). -#}
{% macro _lake_read_settings(holder_of=none) %}
  {%- set settings = vcmt._pinned_query_settings() -%}
  {%- do settings.update({'skip_unavailable_shards': 0}) -%}
  {%- do settings.update(vcmt._holder_settings(holder_of)) -%}
  {{ return(vcmt._settings_clause(settings)) }}
{% endmacro %}


{#- The invocations the model `model` (a relation) recorded as loads, on every node. -#}
{% macro _lake_loads_sql(model) %}
  {{ return('select invocation_id from ' ~ vcmt._on_every_node(vcmt.objects(model).loads)) }}
{% endmacro %}


{#- The fingerprint a load records for a loaded file it found gone: from then on the file is neither loaded
    nor reported again (one that comes back is read again). -#}
{% macro _lake_gone() %}{{ return('gone') }}
{% endmacro %}


{#- What `vcmt.lake_source(dataset, new_files=true)` returns: a subquery over the dataset's files. In a run,
    the files this invocation claimed (`_claim_lake_files` claims them before the first read); in `dbt show`
    and `compile`, the files a run would claim now. -#}
{% macro _lake_new_files_source(dataset, format, files) %}
  {%- set table_function = vcmt._lake_table_function(dataset, format, format, files) -%}
  {%- if not execute -%}{{ return(table_function) }}{%- endif -%}
  {%- set mart = this.incorporate(type='table') -%}
  {%- set where = "vcmt.lake_source('" ~ dataset ~ "', new_files=true) in model `" ~ this.identifier ~ "`" -%}
  {%- if config.get('materialized') != 'vcmt_upsert' -%}
    {%- do exceptions.raise_compiler_error(where ~ ": new_files=true is for vcmt_upsert models, whose loads record "
          ~ "the files they read; this model is materialized as " ~ config.get('materialized') ~ ". Read the dataset "
          ~ "whole with vcmt.lake_source('" ~ dataset ~ "').") -%}
  {%- endif -%}
  {%- if config.get('watermark') == '_batch_id' -%}
    {%- do exceptions.raise_compiler_error(where ~ ": the model also sets watermark='_batch_id'. new_files=true "
          ~ "reads every file not loaded yet, late batches included, which a `where _batch_id > vcmt.watermark()` "
          ~ "filter would drop again. Remove the `watermark` config and that filter (docs/staging.md, \"Reading "
          ~ "each file once\").") -%}
  {%- endif -%}
  {%- set spec = {'dataset': dataset, 'format': format, 'files': files} -%}
  {%- set record = vcmt._lake_files_record(mart) -%}
  {%- set ds = vcmt._sql_string(dataset) -%}
  {#- In a Replicated database each replica would keep a record of its own that no read joins (the model's
      tables are not created ON CLUSTER there, so nothing reads every replica). -#}
  {%- if vcmt._lock_cluster(vcmt._node_target(model)) is not none and not on_cluster_clause(mart) | trim -%}
    {%- do exceptions.raise_compiler_error(where ~ ": new_files=true is not supported in a database with the "
          ~ "Replicated engine (each replica would keep its own record of the files it loaded, and a run through "
          ~ "another replica would read them again). Use watermark='_batch_id' with vcmt.lake_source('" ~ dataset
          ~ "') there (docs/staging.md, \"Late and amended batches\").") -%}
  {%- endif -%}
  {%- if flags.WHICH in ('run', 'build', 'retry') -%}
    {#- ON CLUSTER only when missing on a node: with a node down, DDL on the cluster waits for it. -#}
    {%- if not vcmt._exists_on_every_node(record) -%}
      {%- do run_query(vcmt._create_lake_files_sql(record)) -%}
    {%- endif -%}
    {%- set claimed = 'select path, fingerprint from ' ~ record ~ ' where dataset = ' ~ ds ~ ' and invocation_id = '
                      ~ vcmt._sql_string(invocation_id) -%}
    {{ return('(' ~ vcmt._lake_files_marker(spec) ~ ' select * from ' ~ table_function ~ ' where _path in (select path '
        ~ 'from ('
              ~ claimed ~ ')) and (_path, ' ~ vcmt._lake_fingerprint_sql() ~ ') in (' ~ claimed ~ '))') }}
  {%- endif -%}
  {%- if not vcmt._relation_exists(record) or not vcmt._relation_exists(vcmt.objects(mart).loads) -%}
    {{ return(table_function) }}
  {%- endif -%}
  {{ return('(select * from ' ~ table_function ~ ' where _path not in (select path from ('
            ~ vcmt._lake_loaded_files_sql(mart, dataset) ~ ')))') }}
{% endmacro %}


{% macro _create_lake_files_sql(record) %}
  {{ return('create table if not exists ' ~ record ~ ' ' ~ on_cluster_clause(record)
            ~ ' (dataset String, path String, fingerprint String, invocation_id String, claimed_at DateTime64(6))'
            ~ ' engine = MergeTree order by (dataset, path, claimed_at)') }}
{% endmacro %}


{#- Claim, for this invocation's load of `objs`' model, the files of every dataset its SQL reads with
    `new_files=true`: every file on a `rebuild` (first run, full refresh), else every file not loaded yet,
    once `_lake_claim_plan` found nothing to refuse. The caller holds the model's lock; the claim is fenced
    by it like every write. Logs, per dataset, how many files the load reads. -#}
{% macro _claim_lake_files(cfg, objs, sql, rebuild) %}
  {#- The model's public name (`m`, not a sharded model's `m_local`), as `lake_source` names the record. -#}
  {%- set model = vcmt._model_relation(vcmt._public_relation(objs)) -%}
  {%- for spec in vcmt._lake_files_specs(sql) -%}
    {%- set record = vcmt._lake_files_record(model) -%}
    {%- set where = "vcmt.lake_source('" ~ spec.dataset ~ "', new_files=true) in model `" ~ model.identifier ~ "`" -%}
    {%- set plan = {'gone': 0, 'upgrade': false} -%}
    {%- if not rebuild and vcmt._relation_exists(objs.loads) -%}
      {%- set unconditional = cfg.delete_mode == 'unconditional' -%}
      {%- set plan = vcmt._lake_claim_plan(where, model.identifier, cfg.delete_mode,
                                           vcmt._lake_loaded_changes(model, spec),
                                           vcmt._lake_replayed_folders(model, spec) if unconditional else [],
                                           vcmt._lake_record_summary(model, spec.dataset)) -%}
      {%- if plan.refusal -%}{%- do exceptions.raise_compiler_error(plan.refusal) -%}{%- endif -%}
      {%- if plan.switched -%}{{ log(plan.switched, info=true) }}{%- endif -%}
    {%- endif -%}
    {%- do vcmt._insert_lake_claim(objs, model, spec, rebuild, plan) -%}
    {%- set files = vcmt._lake_claimed_files(record, spec.dataset) -%}
    {{ log(where ~ ': ' ~ vcmt._count(files, 'file') ~ ' to read' ~ (' (every file: a first run or a full refresh)'
        if rebuild else ', not loaded before') ~ ('; ' ~ vcmt._count(plan.gone, 'loaded file') ~ ' no longer in the '
        ~ 'lake, kept in the model' if plan.gone > 0 else ''), info=true) }}
  {%- endfor -%}
{% endmacro %}


{#- What a run that is not a rebuild does with `spec`'s files, from what it read (engine/lake_reads.sql):
    `changes` (_lake_loaded_changes), `replayed` (_lake_replayed_folders, read under unconditional
    deletes only), `record` (_lake_record_summary). Returns {refusal: the error, or none; gone: how many
    loaded files are no longer listed; upgrade: whether fingerprints kept as text are written again;
    switched: the log line of a model switched from a watermark, or none}. Runs no query. -#}
{% macro _lake_claim_plan(where, model_name, delete_mode, changes, replayed, record) %}
  {%- set changed = changes | selectattr(1) | list -%}
  {%- set plan = {'refusal': none, 'gone': changes | length - changed | length,
                  'upgrade': record.text_records > 0, 'switched': none} -%}
  {%- set reload = 'Reload every file with `dbt run -s ' ~ model_name ~ ' --full-refresh` (it reads the files the '
                   ~ 'lake holds now: the lines of files pruned since are not read again)' -%}
  {#- A loaded file listed with another size or time was rewritten in place: its new lines would never be
      read. One that is gone (pruned by retention, or its batch restaged under new names) is not an error:
      its lines are in the model, and the claim records it gone. -#}
  {%- if changed -%}
    {%- set shown = [] -%}
    {%- for row in changed[:10] -%}
      {%- set what = [] -%}
      {%- if row[2] != row[3] -%}{%- do what.append('size ' ~ row[2] ~ ' -> ' ~ row[3] ~ ' bytes') -%}{%- endif -%}
      {%- if not row[6] -%}{%- do what.append('modified ' ~ row[4] ~ ' -> ' ~ row[5]) -%}{%- endif -%}
      {%- do shown.append(row[0] ~ ' (' ~ what | join(', ') ~ ')') -%}
    {%- endfor -%}
    {%- do plan.update({'refusal': where ~ ": " ~ changed | length ~ " file(s) changed after this model loaded them: "
          ~ (shown | join('; ')) ~ (' and ' ~ (changed | length - 10) ~ ' more' if changed | length > 10 else '')
          ~ ". A staged file is never rewritten in place by Spark (it writes new files), so something rewrote it; "
          ~ "its new lines would never be read, and the lines it had are in the model. Nothing was loaded. "
          ~ reload ~ " (docs/staging.md, \"Reading each file once\")."}) -%}
  {#- A file to read beside a loaded file that is gone, or a loaded file back, carries lines read before, which
      a delete under delete_mode='unconditional' does not survive (docs/design.md, "Replay"). -#}
  {%- elif delete_mode == 'unconditional' and replayed -%}
    {%- do plan.update({'refusal': where ~ ": batch folder(s) " ~ replayed | join(', ') ~ " were staged again (files "
          ~ "not loaded yet beside loaded files that are gone, in this run or an earlier one, or a loaded file back "
          ~ "after it was gone): reading them would read their earlier lines again, and under "
          ~ "delete_mode='unconditional' a delete read again removes its row again (docs/design.md, \"Replay\"). "
          ~ "Nothing was loaded. " ~ reload ~ "."}) -%}
  {#- Each claim records a row with an empty path: the dataset was read with new_files=true by that load. A
      model loaded before without it (a watermark) reads every file once more now. -#}
  {%- elif record.loads > 0 and record.new_files_loads == 0 -%}
    {%- if delete_mode == 'unconditional' -%}
      {%- do plan.update({'refusal': where ~ ": the model was loaded before without new_files=true, so this run "
            ~ "would read every file of the dataset once more, and under delete_mode='unconditional' a delete read "
            ~ "again removes its row again (docs/design.md, \"Replay\"). Nothing was loaded. Switch with `dbt run -s "
            ~ model_name ~ " --full-refresh`."}) -%}
    {%- else -%}
      {%- do plan.update({'switched': where ~ ': the model was loaded before without new_files=true: every file of '
            ~ 'the dataset is read once more, which changes nothing already applied under versioned deletes'}) -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(plan) }}
{% endmacro %}


{#- The claim of this invocation's load of `objs`' model (`model`: its public relation) on `spec`'s files,
    fenced by the model's lock: every listed file on a `rebuild`, else every one not loaded; as `plan`
    (_lake_claim_plan) says, the loaded files gone (recorded gone, so that they are counted once) and the
    loaded files whose fingerprint kept the time as text, written again as the listing gives it now (under
    the invocation that loaded them: still loaded, not read again); and a row with an empty path (the
    dataset was read with new_files=true). -#}
{% macro _insert_lake_claim(objs, model, spec, rebuild, plan) %}
  {%- set listing = vcmt._lake_files_listing_sql(spec) -%}
  {%- set loaded = vcmt._lake_loaded_files_sql(model, spec.dataset) -%}
  {%- set this_load = vcmt._sql_string(invocation_id) -%}
  {%- call statement('vcmt_claim_lake_files') -%}
    insert into {{ vcmt._lake_files_record(model) }} (dataset, path, fingerprint, invocation_id, claimed_at)
    select {{ vcmt._sql_string(spec.dataset) }}, path, fingerprint, invocation_id, now64(6)
    from (select path, fingerprint, {{ this_load }} as invocation_id from ({{ listing }})
          {%- if not rebuild %} where path not in (select path from ({{ loaded }})){% endif %}
          {%- if plan.gone > 0 %}
          union all select path, {{ vcmt._sql_string(vcmt._lake_gone()) }}, {{ this_load }} from ({{ loaded }})
          where path not in (select path from ({{ listing }}))
          {%- endif %}
          {%- if plan.upgrade %}
          union all select loaded.path, listed.fingerprint, loaded.loaded_by
          from ({{ loaded }}) as loaded join ({{ listing }}) as listed on listed.path = loaded.path
          where {{ vcmt._lake_fingerprint_is_text_sql('loaded.fingerprint') }}
            and {{ vcmt._lake_same_file_sql('loaded.fingerprint', 'listed.file_size', 'listed.file_time') }}
          {%- endif %}
          union all select '', '', {{ this_load }})
    where {{ vcmt._fenced(objs.target) }}
    {{ vcmt._lake_read_settings(holder_of=objs.target) }}
  {%- endcall -%}
{% endmacro %}
