{#- What the lock (load/lock.sql, docs/design.md#one-load-at-a-time) reads
    from the engine's catalog: the 0.4 lock's generations in system.tables,
    on the lock's node, and the holder's statements in system.processes, on
    every node. -#}


{#- The generations of the model `target`'s 0.4 lock (load/lock.sql
    `_legacy_lock_table`), as SQL rows (gen, comment, seconds since its
    CREATE, name): those a 0.4 load reads (18 digits at most). The
    generation is cut from the table's name in SQL, in bytes on both sides,
    so any model name works. `local`: this node's system.tables, for SQL that
    runs on the lock's node itself. -#}
{% macro _legacy_lock_generations_sql(target, local=false) %}
  {%- set prefix = vcmt._sql_string(vcmt._legacy_lock_table(target, '').identifier) -%}
  {%- set tail = 'substring(name, length(' ~ prefix ~ ') + 1)' -%}
  {%- set source = 'system.tables where' if local else vcmt._lock_source(target, 'system', 'tables') -%}
  {{ return("select toUInt64(" ~ tail ~ ") as gen, comment, dateDiff('second', metadata_modification_time, now()) "
      ~ "as age, name "
      ~ "from " ~ source ~ " database = " ~ vcmt._sql_string(target.schema)
      ~ " and startsWith(name, " ~ prefix ~ ") and match(" ~ tail ~ ", '^[0-9]{1,18}$')"
      ~ ('' if local else vcmt._lock_read_settings(target))) }}
{% endmacro %}


{#- `from ... where ...` of every table named like a generation of the 0.4
    lock of `target` (any number of digits: a 0.4 load that found the
    sentinel creates one past it), on the node that runs it. -#}
{% macro _legacy_lock_tables_sql(target) %}
  {{ return("from system.tables where database = " ~ vcmt._sql_string(target.schema) ~ " and match(name, "
      ~ vcmt._sql_string('^' ~ modules.re.escape(vcmt._legacy_lock_table(target, '').identifier) ~ '[0-9]+$') ~ ")") }}
{% endmacro %}


{#- The names of those tables, read on the lock's node. -#}
{% macro _legacy_lock_generations(target) %}
  {%- set sql = 'select name ' ~ vcmt._legacy_lock_tables_sql(target) -%}
  {%- set cluster = vcmt._lock_cluster(target) -%}
  {%- if cluster -%}
    {%- set sql = 'select name from cluster(' ~ vcmt._sql_string(cluster) ~ ', view(select *, ' ~ vcmt._lock_slot()
        ~ ' as _vcmt_slot from (' ~ sql ~ ')), _vcmt_slot) where _vcmt_slot = ' ~ vcmt._lock_slot()
        ~ vcmt._lock_read_settings(target, {'optimize_skip_unused_shards': 1,
                                            'force_optimize_skip_unused_shards': 1}) -%}
  {%- endif -%}
  {%- set names = [] -%}
  {%- for row in run_query(sql).rows -%}{%- do names.append(row[0]) -%}{%- endfor -%}
  {{ return(names) }}
{% endmacro %}


{#- A cluster's node that is down runs no statement of anybody's, and a
    lock whose first shard is down reads as nobody's (every write's fence
    then fails). The lock's tables are not replicated: its rows are read
    from, and written to (_lock_row_sql), the first shard's first replica
    that is up. `more`: further settings of that read. -#}
{% macro _lock_read_settings(target, more=none) %}
  {%- set settings = {'skip_unavailable_shards': 1, 'load_balancing': 'in_order'} -%}
  {%- do settings.update(more or {}) -%}
  {{ return(' ' ~ vcmt._settings_clause(settings) if vcmt._lock_cluster(target) else '') }}
{% endmacro %}


{#- `from <this>` for a system table the lock reads (system.tables), up to
    a `where` ready for a condition: the table itself, or its copy on the
    cluster's first shard. -#}
{% macro _lock_source(target, schema, table) %}
  {%- set cluster = vcmt._lock_cluster(target) -%}
  {%- if cluster is none -%}{{ return(schema ~ '.' ~ table ~ ' where') }}{%- endif -%}
  {{ return('cluster(' ~ vcmt._sql_string(cluster) ~ ', ' ~ vcmt._sql_string(schema) ~ ', ' ~ vcmt._sql_string(table)
            ~ ') where _shard_num = 1 and') }}
{% endmacro %}


{#- The condition on system.processes that finds the statements of `holder`:
    its name as their `log_comment` (settings.sql `_holder_settings`), which
    the engine neither cuts nor masks; or, for a load of vcmt 0.4, its name
    in the statement's text (its fence), which `log_queries_cut_to_length`
    and `query_masking_rules` can hide. The name is spelled in two pieces
    here, so this statement (and another load's same check) never finds
    itself. -#}
{% macro _holder_statements(holder) %}
  {%- set name = 'concat(' ~ vcmt._sql_string(holder[:8]) ~ ', ' ~ vcmt._sql_string(holder[8:]) ~ ')' -%}
  {{ return('query_id != queryID() and (position(query, ' ~ name ~ ') > 0 or Settings[\'log_comment\'] = ' ~ name
      ~ ')') }}
{% endmacro %}


{#- One of the holder's statements runs now (it is alive even if it has not
    renewed for a while). -#}
{% macro _holder_busy(holder, target) %}
  {%- set cluster = vcmt._lock_cluster(target) -%}
  {%- set processes = 'clusterAllReplicas(' ~ vcmt._sql_string(cluster) ~ ', system.processes)'
      if cluster else 'system.processes' -%}
  {%- set rows = run_query('select count() from ' ~ processes ~ ' where ' ~ vcmt._holder_statements(holder)
                           ~ vcmt._lock_read_settings(target)).rows -%}
  {{ return(rows[0][0] | int > 0) }}
{% endmacro %}
