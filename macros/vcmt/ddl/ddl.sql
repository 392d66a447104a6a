{% macro _columns_ddl(columns) %}
  {%- set parts = [] -%}
  {%- for c in columns -%}{%- do parts.append(vcmt._quote(c.name) ~ ' ' ~ c.data_type) -%}{%- endfor -%}
  {{ return(parts) }}
{% endmacro %}


{% macro create_target_sql(cfg, relation, columns) %}
  {{ return(adapter.dispatch('create_target_sql', 'vcmt')(cfg, relation, columns)) }}
{% endmacro %}

{% macro default__create_target_sql(cfg, relation, columns) %}
  {%- set settings = {} -%}
  {%- if cfg.projections -%}
    {#- ClickHouse refuses projections on collapsing tables unless merges may rebuild them. -#}
    {%- do settings.update({'deduplicate_merge_projection_mode': 'rebuild'}) -%}
  {%- endif -%}
  {%- do settings.update(cfg.settings) -%}
  {%- set body = vcmt._columns_ddl(columns) + vcmt._index_clauses(cfg.indexes)
                 + vcmt._projection_clauses(cfg.projections) -%}
  create table {{ relation }} {{ on_cluster_clause(relation) }} (
    {{ body | join(',\n    ') }}
  )
  engine = {{ vcmt._engine_name(relation) }}({{ vcmt._quote(cfg.sign) }}, {{ vcmt._quote(cfg.version) }})
  {%- if cfg.partition_by %}
  partition by ({{ vcmt._user_sql_list(cfg.partition_by) }})
  {%- endif %}
  order by ({{ vcmt._user_sql_list(cfg.order_by) }})
  {%- if cfg.primary_key %}
  primary key ({{ vcmt._user_sql_list(cfg.primary_key) }})
  {%- endif %}
  {%- if cfg.ttl %}
  ttl {{ vcmt._user_sql_list(cfg.ttl) }}
  {%- endif %}
  {%- if settings %}
  {{ vcmt._settings_clause(settings) }}
  {%- endif %}
{% endmacro %}


{#- On a cluster (dbt-clickhouse `cluster` set) the replicated engine keeps
    replicas in step; everywhere else the plain engine. -#}
{% macro _engine_name(relation) %}
  {{ return('ReplicatedVersionedCollapsingMergeTree' if on_cluster_clause(relation) | trim
      else 'VersionedCollapsingMergeTree') }}
{% endmacro %}


{#- The `indexes` config's skip indexes, as items of the column list. -#}
{% macro _index_clauses(indexes) %}
  {%- set clauses = [] -%}
  {%- for index in indexes or [] -%}
    {%- do clauses.append('index ' ~ vcmt._quote(index.name) ~ ' ' ~ vcmt._user_sql(index.definition)) -%}
  {%- endfor -%}
  {{ return(clauses) }}
{% endmacro %}


{% macro _create_stage_sql(relation, columns) %}
  create table {{ relation }} {{ on_cluster_clause(relation) }} (
    {{ vcmt._columns_ddl(columns) | join(',\n    ') }}
  ) engine = Null
{% endmacro %}


{#- Per key, the newest version at which the key was deleted: it keeps a
    late or redelivered upsert from bringing a deleted key back, even after
    merges have collapsed the deleted row away. -#}
{% macro _create_tombstones_sql(cfg, relation, columns) %}
  {%- set types = vcmt._types_by_name(columns) -%}
  create table {{ relation }} {{ on_cluster_clause(relation) }} (
    {%- for k in cfg.key_columns %}
    {{ vcmt._quote(k) }} {{ types[k] }},
    {%- endfor %}
    {{ vcmt._quote(cfg.version) }} SimpleAggregateFunction(max, {{ types[cfg.version] }})
  ) engine = AggregatingMergeTree
  order by ({{ vcmt._column_list(cfg.key_columns) }})
{% endmacro %}


{% macro _tombstones_writer_sql(cfg, objs, columns=none) %}
  select {{ vcmt._column_list(cfg.key_columns) }}, {{ vcmt._quote(cfg.version) }}
  from {{ objs.stage }}
  where {{ vcmt._quote(cfg.sign) }} < 0
{% endmacro %}


{#- delete_mode='unconditional': a delete's own version may mean nothing, so the
    tombstone also records the version of the row it removed. In one insert
    block a key is cancelled by a delete exactly when it has a -1 row and no +1 row. -#}
{% macro _cancels_writer_sql(cfg, objs, columns=none) %}
  select {{ vcmt._column_list(cfg.key_columns) }}, max({{ vcmt._quote(cfg.version) }}) as {{ vcmt._quote(cfg.version) }}
  from {{ objs.target }}
  group by {{ vcmt._column_list(cfg.key_columns) }}
  having max({{ vcmt._quote(cfg.sign) }}) = -1
{% endmacro %}


{#- The truncates recorded for the model (`truncate_when`): every row at or
    below the highest `version` is deleted, and events at or below it are
    ignored. A row with `rows_deleted` NULL records a truncate whose deletes
    are not confirmed yet; the next load applies it (docs/design.md#truncates). -#}
{% macro _create_truncates_sql(cfg, relation, columns) %}
  create table {{ relation }} {{ on_cluster_clause(relation) }} (
    version {{ (columns | selectattr('name', 'equalto', cfg.version) | first).data_type }},
    applied_at DateTime64(3),
    invocation_id String,
    rows_deleted Nullable(UInt64)
  ) engine = MergeTree order by applied_at
{% endmacro %}


{% macro _create_view_sql(relation, to_relation, select_sql) %}
  create materialized view {{ relation }} {{ on_cluster_clause(relation) }}
  to {{ to_relation }}
  as {{ select_sql }}
{% endmacro %}


{#- A view's new query, in place: it keeps firing throughout. -#}
{% macro _modify_view_sql(relation, select_sql) %}
  alter table {{ relation }} {{ on_cluster_clause(relation) }} modify query {{ select_sql }}
{% endmacro %}


{#- Drop one of a model's objects (on its cluster, if any) and wait until it is gone. -#}
{% macro _drop_sql(relation, if_exists=true, local=false) %}
  drop table {{ 'if exists ' if if_exists }}{{ relation }} {{ on_cluster_clause(relation) if not local }} sync
{% endmacro %}
