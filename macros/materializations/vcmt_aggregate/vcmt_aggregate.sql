{#- vcmt_aggregate: totals over one vcmt_upsert model kept online by a
    materialized view on it, exact with no FINAL (docs/design.md#online-aggregates).
    Read it with sum(...) ... group by its keys. -#}
{% materialization vcmt_aggregate, adapter='clickhouse' %}
  {%- set who = 'vcmt_aggregate ' ~ this.identifier -%}
  {%- set target = this.incorporate(type='table') -%}
  {%- set writer = target.incorporate(path={'identifier': target.identifier ~ '__writer'}) -%}
  {%- set upstream = vcmt._aggregate_upstream(who) -%}
  {%- set shape = vcmt._check_aggregate(sql, upstream, who) -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {#- Under --empty and --sample dbt reads the upstream as a subquery, which no view can keep online: the model is
      left as it is (created empty, with no writer, if missing: its next run builds it). -#}
  {%- if not vcmt._aggregate_reads_upstream() -%}
    {%- if vcmt._table_identity(target) is none -%}
      {%- call statement('vcmt_aggregate_create_empty') -%}
        {{ vcmt._create_aggregate_sql(target, shape.columns, shape.key_columns, '') }}
      {%- endcall -%}
    {%- endif -%}
    {%- do store_raw_result('main', message='left as it is (--empty, --sample)', code='VCMT_AGGREGATE',
        rows_affected=0) -%}
    {{ return({'relations': [target]}) }}
  {%- endif -%}
  {#- Under the upstream's lock no load writes: the totals read are those of its rows, and the writer sees every
      INSERT after them. -#}
  {%- set up_objs = vcmt.objects(upstream.target) -%}
  {%- set default = (vcmt._options() | selectattr('name', 'equalto', 'lock_timeout') | first).default -%}
  {%- set cfg = {'lock_timeout': upstream.node.config.get('lock_timeout', default)} -%}
  {%- do vcmt._acquire_lock(cfg, up_objs, who) -%}
  {%- set upstream_uuid = vcmt._table_identity(upstream.target).uuid -%}
  {%- set why = vcmt._aggregate_stale(target, writer, sql, upstream_uuid) -%}
  {%- if why -%}
    {{ log(who ~ ': building its totals from ' ~ upstream.target.identifier ~ ' (' ~ why ~ ')', info=true) }}
    {%- do vcmt._rebuild_aggregate(cfg, upstream.target, target, writer, sql, upstream_uuid, columns=shape.columns,
        keys=shape.key_columns, writer_sql=sql) -%}
  {%- endif -%}
  {%- do vcmt._release_lock(upstream.target) -%}
  {%- do store_raw_result('main', message=('built: ' ~ why) if why else 'kept online', code='VCMT_AGGREGATE',
      rows_affected=0) -%}

  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {%- do adapter.commit() -%}
  {%- do persist_docs(target, model) -%}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': [target]}) }}
{% endmaterialization %}
