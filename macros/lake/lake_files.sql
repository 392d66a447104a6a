{#- Each committed file of a staged dataset read once: `vcmt.lake_source(dataset, new_files=true)`
    in a `vcmt_upsert` model (docs/staging.md, "Reading each file once").

    The record is `<model>__lake_files`: one row per file a load claimed,
    with the file's fingerprint as the listing gives it (size and
    modification time, no file opened) and the dbt invocation of the load.
    A file is *loaded* when the invocation that claimed it has a row in the
    model's `<model>__loads`: the load's own record, written after its last
    INSERT, is its commit. So a load that fails, is killed, or is fenced out
    by a load that took its lock over has claimed nothing, and the next run
    claims those files again.

    Under the model's lock, before the first read (`_claim_lake_files`,
    called by the materialization), each run:
    1. fails, naming them, if a loaded file now has another fingerprint (it
       was rewritten in place: its new lines would never be read);
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


{#- A file's fingerprint from the listing's virtual columns, readable in an error message. -#}
{% macro _lake_fingerprint_sql() %}
  {{ return("concat(toString(ifNull(_size, 0)), ' bytes, modified ', ifNull(toString(_time), 'at an unknown time'))") }}
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


{#- The files of `spec`'s dataset as listed now: (path, fingerprint). -#}
{% macro _lake_files_listing_sql(spec) %}
  {{ return('select _path as path, ' ~ vcmt._lake_fingerprint_sql() ~ ' as fingerprint from '
            ~ vcmt._lake_table_function(spec.dataset, spec.format, 'One', spec.files)) }}
{% endmacro %}


{#- The files of `dataset` the model has loaded: (path, fingerprint), the
    latest claim of each path by a load the model recorded. -#}
{% macro _lake_loaded_files_sql(model, dataset) %}
  {{ return('select path, argMax(fingerprint, claimed_at) as fingerprint from '
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
    after refusing a loaded file that was rewritten. The caller holds the model's lock; the claim is fenced
    by it like every write. Logs, per dataset, how many files the load reads. -#}
{% macro _claim_lake_files(cfg, objs, sql, rebuild) %}
  {#- The model's public name (`m`, not a sharded model's `m_local`), as `lake_source` names the record. -#}
  {%- set model = vcmt._model_relation(vcmt._public_relation(objs)) -%}
  {%- for spec in vcmt._lake_files_specs(sql) -%}
    {%- set record = vcmt._lake_files_record(model) -%}
    {%- set listing = vcmt._lake_files_listing_sql(spec) -%}
    {%- set where = "vcmt.lake_source('" ~ spec.dataset ~ "', new_files=true) in model `" ~ model.identifier ~ "`" -%}
    {%- set unloaded = '' -%}
    {%- set gone_note = '' -%}
    {%- if not rebuild and vcmt._relation_exists(objs.loads) -%}
      {%- set loaded = vcmt._lake_loaded_files_sql(model, spec.dataset) -%}
      {#- A loaded file no longer listed (pruned by retention, or its batch restaged under new names) is not an
          error: its lines are in the model. It is counted in the run's log line once: the claim records it gone. -#}
      {%- set compare_sql -%}
        select loaded.path, loaded.fingerprint, ifNull(listed.fingerprint, '') as now
        from ({{ loaded }}) as loaded left join ({{ listing }}) as listed on listed.path = loaded.path
        where now != loaded.fingerprint order by loaded.path {{ vcmt._lake_read_settings() }}
      {%- endset -%}
      {%- set compared = run_query(compare_sql).rows -%}
      {%- set changed = compared | rejectattr(2, 'equalto', '') | list -%}
      {%- set gone = compared | length - changed | length -%}
      {%- set gone_note = '; ' ~ vcmt._count(gone, 'loaded file') ~ ' no longer in the lake, kept in the model'
          if gone > 0 else '' -%}
      {%- if changed | length > 0 -%}
        {%- set shown = [] -%}
        {%- for row in changed[:10] -%}
          {%- do shown.append(row[0] ~ ' (loaded at ' ~ row[1] ~ ', now ' ~ row[2] ~ ')') -%}
        {%- endfor -%}
        {%- do exceptions.raise_compiler_error(where ~ ": " ~ changed | length ~ " file(s) changed after this model "
              ~ "loaded them: " ~ (shown | join('; ')) ~ (' and ' ~ (changed | length - 10)
              ~ ' more' if changed | length > 10 else '')
              ~ ". A staged file is never rewritten in place by Spark (it writes new files), so something rewrote it; "
              ~ "its new lines would never be read, and the lines it had are in the model. Nothing was loaded. "
              ~ "Load every "
              ~ "file again with `dbt run -s " ~ model.identifier ~ " --full-refresh` (docs/staging.md, "
              ~ "\"Reading each file once\").") -%}
      {%- endif -%}
      {%- set unloaded = ' where path not in (select path from (' ~ loaded ~ '))' -%}
      {#- A batch folder with loaded files gone and new files listed was restaged: its earlier lines come
          again, which a delete under delete_mode='unconditional' does not survive (docs/design.md, "Replay"). -#}
      {%- if gone > 0 and cfg.delete_mode == 'unconditional' -%}
        {%- set restaged_sql -%}
          select distinct extract(path, '^(.*)/') as folder from ({{ listing }}){{ unloaded }}
          and folder in (select extract(loaded.path, '^(.*)/') from ({{ loaded }}) as loaded
                         where loaded.path not in (select path from ({{ listing }})))
          order by folder limit 10 {{ vcmt._lake_read_settings() }}
        {%- endset -%}
        {%- set restaged = run_query(restaged_sql).columns[0].values() -%}
        {%- if restaged | length > 0 -%}
          {%- do exceptions.raise_compiler_error(where ~ ": batch folder(s) " ~ restaged | join(', ') ~ " were staged "
                ~ "again (loaded files gone, new ones there): reading them would read their earlier lines again, and "
                ~ "under delete_mode='unconditional' a delete read again removes its row again (docs/design.md, "
                ~ "\"Replay\"). Nothing was loaded. Reload every file with `dbt run -s " ~ model.identifier
                ~ " --full-refresh`.") -%}
        {%- endif -%}
      {%- endif -%}
      {#- Each claim also records a row with an empty path: the dataset was read with new_files=true by that
          load. A model loaded before without it (a watermark) reads every file once more now. -#}
      {%- set before = run_query('select (select count() from (' ~ vcmt._lake_loads_sql(model) ~ ')), (select count() '
                                 ~ 'from ' ~ vcmt._on_every_node(record) ~ ' where dataset = '
                                 ~ vcmt._sql_string(spec.dataset) ~ " and path = '' and invocation_id global in ("
                                 ~ vcmt._lake_loads_sql(model) ~ ')) ' ~ vcmt._lake_read_settings()).rows[0] -%}
      {%- if before[0] | int > 0 and before[1] | int == 0 -%}
        {%- if cfg.delete_mode == 'unconditional' -%}
          {%- do exceptions.raise_compiler_error(where ~ ": the model was loaded before without new_files=true, so "
                ~ "this run would read every file of the dataset once more, and under delete_mode='unconditional' a "
                ~ "delete read again removes its row again (docs/design.md, \"Replay\"). Nothing was loaded. "
                ~ "Switch with "
                ~ "`dbt run -s " ~ model.identifier ~ " --full-refresh`.") -%}
        {%- endif -%}
        {{ log(where ~ ': the model was loaded before without new_files=true: every file of the dataset is read once '
               ~ 'more, which changes nothing already applied under versioned deletes', info=true) }}
      {%- endif -%}
    {%- endif -%}
    {%- call statement('vcmt_claim_lake_files') -%}
      insert into {{ record }} (dataset, path, fingerprint, invocation_id, claimed_at)
      select {{ vcmt._sql_string(spec.dataset) }}, path, fingerprint, {{ vcmt._sql_string(invocation_id) }}, now64(6)
      from (select path, fingerprint from ({{ listing }}){{ unloaded }}
            {%- if gone_note %}
            union all select path, {{ vcmt._sql_string(vcmt._lake_gone()) }} from ({{ loaded }})
            where path not in (select path from ({{ listing }}))
            {%- endif %}
            union all select '', '')
      where {{ vcmt._fenced(objs.target) }}
      {{ vcmt._lake_read_settings(holder_of=objs.target) }}
    {%- endcall -%}
    {%- set files = run_query('select count() from ' ~ record ~ ' where dataset = ' ~ vcmt._sql_string(spec.dataset)
                              ~ " and path != '' and fingerprint != " ~ vcmt._sql_string(vcmt._lake_gone())
                              ~ ' and invocation_id = '
                              ~ vcmt._sql_string(invocation_id)).columns[0].values()[0] | int -%}
    {{ log(where ~ ': ' ~ vcmt._count(files, 'file') ~ ' to read' ~ (' (every file: a first run or a full refresh)'
        if rebuild
           else ', not loaded before') ~ (gone_note if gone_note else ''), info=true) }}
  {%- endfor -%}
{% endmacro %}
