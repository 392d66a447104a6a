{#- A table function over one staged dataset of the lake, hive-partitioned by
    batch (`_batch_id=<N>/` folders, read as the `_batch_id` column; ClickHouse
    25.x+ does this by default, older servers need `use_hive_partitioning: 1`
    in the profile's custom_settings).

    Only committed batches are read: the files under the dataset's partition
    folders (`<name>=<value>/`, at any depth below the first), or, in a
    dataset without partition folders, the files directly in its folder.
    Spark writes a job's files elsewhere (`_temporary/`, `.spark-staging-*/`)
    and moves them there when the job commits, so what a killed staging job
    left behind (0-byte or partial files) is never read (docs/staging.md,
    "Committed batches").

    `new_files=true`, in a `vcmt_upsert` model: each run reads every committed
    file its loads have not read yet, late batches and files added to a loaded
    batch included (lake_files.sql, docs/staging.md, "Reading each file once").
    Otherwise, in a `vcmt_upsert` model with `watermark='_batch_id'`, each run
    first checks for late and amended batches and fails naming them
    (`_check_lake_batches`, docs/staging.md, "Late and amended batches").

    Local lake (default): `file()`, relative to where dbt runs, or absolute.
    S3: set var `vcmt_lake_root` to `s3://bucket/prefix` (var `vcmt_s3_endpoint`
    for MinIO and other S3-compatible stores). Credentials come from env vars
    VCMT_S3_ACCESS_KEY_ID / VCMT_S3_SECRET_ACCESS_KEY when set, otherwise from
    the server's own S3 configuration (named collection, IAM role).

      select * from {{ vcmt.lake_source('stg_cdc__order_changes') }}
-#}
{% macro lake_source(dataset, format='Parquet', new_files=false) %}
  {{ return(adapter.dispatch('lake_source', 'vcmt')(dataset, format, new_files)) }}
{% endmacro %}

{% macro default__lake_source(dataset, format='Parquet', new_files=false) %}
  {%- set files = '*=*/**/*' -%}
  {#- A run reads the dataset's layout first (no file is opened); a compile, a docs generate, goes on with
      what it can read. -#}
  {%- if execute and flags.WHICH in ('run', 'build', 'show', 'retry') -%}
    {%- do vcmt._check_lake_on_server(dataset) -%}
  {%- endif -%}
  {%- if execute -%}
    {%- set layout = vcmt._lake_files_to_read(dataset, format, vcmt._lake_layout(dataset, format)) -%}
    {%- if layout.refusal and flags.WHICH in ('run', 'build', 'show', 'retry') -%}
      {%- do exceptions.raise_compiler_error(layout.refusal) -%}
    {%- endif -%}
    {%- set files = layout.files -%}
  {%- endif -%}
  {#- Under --empty dbt reads every ref and source with `limit 0`; a dataset is neither, so it does the same:
      no row is read, and no file is claimed (new_files) or recorded (watermark). -#}
  {%- if flags.EMPTY -%}
    {{ return('(select * from ' ~ vcmt._lake_table_function(dataset, format, format, files) ~ ' limit 0)') }}
  {%- endif -%}
  {%- if new_files -%}
    {{ return(vcmt._lake_new_files_source(dataset, format, files)) }}
  {%- endif -%}
  {%- do vcmt._check_lake_batches(dataset, vcmt._lake_table_function(dataset, format, 'One', files)) -%}
  {{ return(vcmt._lake_table_function(dataset, format, format, files)) }}
{% endmacro %}


{#- Which files of `dataset` a mart reads, from its `layout` (engine/lake_reads.sql, `_lake_layout`):
    {files: the glob under the dataset's folder, refusal: the error of a run, or none}. Runs no query.
    - the files in its partition folders (`<name>=<value>/`, at any depth below the first), where Spark
      commits a partitioned table's files;
    - or, in a dataset without partition folders, the files directly in its folder;
    - never both: a file directly beside partition folders is none that Spark wrote (it writes a
      partitioned table's files in their folders only), and read instead of them it would hide every
      batch; it is refused, named;
    - a `_batch_id=<N>` folder whose N is not a whole number of 64 bits is refused, named: staging never
      writes one, and ClickHouse would read `18446744073709551615` as batch -1 (docs/staging.md, "Batch ids");
    - a dataset without any committed file cannot be read at all (ClickHouse infers the columns from a
      file), which is what a mart meets before its staging model ran. -#}
{% macro _lake_files_to_read(dataset, format, layout) %}
  {%- set folder = vcmt._lake_root() ~ '/staged/' ~ dataset ~ '/' -%}
  {%- set where = "vcmt.lake_source('" ~ dataset ~ "'): " -%}
  {%- if layout.direct_files > 0 and layout.partition_files == 0 -%}
    {{ return({'files': '*', 'refusal': none}) }}
  {%- endif -%}
  {%- set refusal = none -%}
  {%- if layout.direct_files > 0 -%}
    {%- set refusal = where ~ vcmt._count(layout.direct_files, 'file') ~ " directly in " ~ folder
        ~ " beside its partition folders: " ~ layout.direct_paths | join(', ')
        ~ (' and ' ~ (layout.direct_files - layout.direct_paths | length) ~ ' more'
           if layout.direct_files > layout.direct_paths | length else '')
        ~ ". A mart reads a dataset's partition folders or, when it has none, the files directly in its folder, "
        ~ "never both; Spark writes a partitioned table's files in its partition folders only, so something else "
        ~ "put these there. Move them into a batch folder (or remove them), then run again (docs/staging.md, "
        ~ "\"Committed batches\"). Nothing was read or changed." -%}
  {%- elif layout.bad_batch_folders -%}
    {%- set refusal = where ~ "a staged batch folder must be named " ~ vcmt._batch_folder_rule() ~ "; "
        ~ layout.bad_batch_folders | join(', ') ~ (" is not" if layout.bad_batch_folders | length == 1
        else " are not") ~ ". Staging never writes such a folder (it refuses a landed one), and read as a batch it "
        ~ "would be misnumbered (18446744073709551615 reads as -1). Remove or rename it, then run again "
        ~ "(docs/staging.md, \"Batch ids\"). Nothing was read or changed." -%}
  {%- elif layout.partition_files == 0 -%}
    {%- set refusal = where ~ "no staged " ~ format ~ " file under " ~ folder
        ~ ", so there is nothing to read: its staging model has not run, has staged no line yet, or writes "
        ~ "elsewhere. Run it first, on your Spark target: `dbt run --select " ~ dataset
        ~ " --target <spark target>`; "
        ~ "it must write its table under <vcmt_lake_root>/staged/" ~ dataset ~ "/ with this run's vcmt_lake_root ("
        ~ vcmt._lake_root() ~ ")." -%}
  {%- endif -%}
  {{ return({'files': '*=*/**/*', 'refusal': refusal}) }}
{% endmacro %}


{#- A batch folder's name, as staging names it too (vcmt_staging/topic.py, BATCH_FOLDER). -#}
{% macro _batch_folder_rule() %}
  {{ return('_batch_id=<N>, N a whole number that fits 64 bits (0 to 9223372036854775807)') }}
{% endmacro %}


{#- Whether `name` (SQL of a String) is a batch id as `_batch_folder_rule` says: digits only, up to
    2^63 - 1. -#}
{% macro _batch_id_ok_sql(name) %}
  {{ return("(match(" ~ name ~ ", '^[0-9]+$') and ifNull(toUInt64OrNull(" ~ name ~ ") <= 9223372036854775807, 0))") }}
{% endmacro %}


{#- The table function over `dataset`'s committed files named `*.<format>`, read as `read_format` (`One`:
    the file listing only, no file opened). -#}
{% macro _lake_table_function(dataset, format, read_format, files='*=*/**/*') %}
  {%- set root = vcmt._lake_root() -%}
  {%- set path = root ~ '/staged/' ~ dataset ~ '/' ~ files ~ '.' ~ (format | lower) -%}
  {%- if not root.startswith('s3://') -%}
    {{ return("file(" ~ vcmt._sql_string(path) ~ ", " ~ vcmt._sql_string(read_format) ~ ")") }}
  {%- endif -%}
  {%- set endpoint = var('vcmt_s3_endpoint', none) -%}
  {%- set url = endpoint.rstrip('/') ~ '/' ~ path[5:] if endpoint else path -%}
  {%- set key = env_var('VCMT_S3_ACCESS_KEY_ID', '') -%}
  {%- set credentials = vcmt._sql_string(key) ~ ", " ~ vcmt._sql_string(env_var('VCMT_S3_SECRET_ACCESS_KEY', ''))
      ~ ", " if key else '' -%}
  {{ return("s3(" ~ vcmt._sql_string(url) ~ ", " ~ credentials ~ vcmt._sql_string(read_format) ~ ")") }}
{% endmacro %}


{#- A record a mart keeps of its lake beside its tables, `kind` one of its
    declared objects (`lake_batches`, `lake_files`; model/objects.sql). -#}
{% macro _lake_record(model, kind) %}
  {{ return(api.Relation.create(database=model.database, schema=model.schema,
                                identifier=model.identifier ~ vcmt._object_suffix(kind), type='table',
                                can_on_cluster=model.can_on_cluster)) }}
{% endmacro %}


{#- The lake's root folder or URL, without a trailing slash (var `vcmt_lake_root`). -#}
{% macro _lake_root() %}
  {{ return((var('vcmt_lake_root', '.local/lake') | string).rstrip('/')) }}
{% endmacro %}


{#- A local lake (a path, not s3://) on a ClickHouse server (any target but the embedded `type: chdb`):
    file() reads the server's own file system, and a server reads only under its user_files_path (a relative
    path is relative to it). An absolute lake root outside it is refused before anything is read, naming
    what the server can read (docs/staging.md, "A lake on a ClickHouse server"). One query: the server's
    user_files_path. -#}
{% macro _check_lake_on_server(dataset) %}
  {%- set root = vcmt._lake_root() -%}
  {%- if target.type == 'chdb' or root.startswith('s3://')
      or not root.startswith('/') -%}{{ return(none) }}{%- endif -%}
  {%- set user_files = (vcmt._server_setting('user_files_path') or '') | string | trim -%}
  {%- set user_files = user_files.rstrip('/') -%}
  {%- if user_files and not (root ~ '/').startswith(user_files ~ '/') -%}
    {%- do exceptions.raise_compiler_error(
          "vcmt.lake_source('" ~ dataset ~ "'): the lake root " ~ root ~ " (var vcmt_lake_root) is a local path, "
          ~ "which a ClickHouse server (target type " ~ target.type ~ ") reads with file() on its own file system "
          ~ "and only under its user_files_path, " ~ user_files ~ "/; " ~ root ~ " is not under it, so the server "
          ~ "cannot read the lake there. Give the server a lake it can read: S3 or an S3-compatible store "
          ~ "(vcmt_lake_root: s3://bucket/prefix, var vcmt_s3_endpoint for MinIO and others), or the lake's folder "
          ~ "under " ~ user_files ~ "/ on the server (a mount or a copy of <lake>/staged), with vcmt_lake_root "
          ~ "set to that path. See docs/staging.md, 'A lake on a ClickHouse server'. Nothing was read or changed.") -%}
  {%- endif -%}
{% endmacro %}
