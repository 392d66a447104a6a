{% test projection_matches_base(model,
    tolerance=0.000000001) %}{{ return(adapter.dispatch('test_projection_matches_base', 'vcmt')(model,
    tolerance)) }}{% endtest %}

{#- Every aggregating projection on the table (as ClickHouse holds it in
    system.projections, whatever created it) must answer its own query as the
    base table does. A projection part that went stale, e.g. through a
    collapsing merge under deduplicate_merge_projection_mode = 'ignore', still
    returns cancelled states. Before the comparison is returned, it runs once
    with force_optimize_projection = 1 (on a sharded model, its projection
    side), which fails unless ClickHouse answers it from a projection; otherwise the check would compare
    the base table with itself and pass for nothing (under `--empty`, which reads no row, it is not run). -#}
{% macro default__test_projection_matches_base(model, tolerance) %}
  {#- At parse time dbt renders the test only to find its dependencies; the
      graph and the tables are not there yet, and an error would stop the
      whole project instead of this one test. -#}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set relation = vcmt._vcmt_test_relation('projection_matches_base', model) -%}
  {%- if tolerance is not number or tolerance < 0 -%}
    {{ exceptions.raise_compiler_error("vcmt.projection_matches_base: argument `tolerance` must be a number >= 0; got `"
        ~ tolerance ~ "`.") }}
  {%- endif -%}
  {#- A sharded model's projections live on its per-shard target; the
      comparison still reads the model's relation, i.e. every shard
      (docs/design.md#sharded-clusters). -#}
  {%- set sharding_key = vcmt._vcmt_test_model_config(model).get('sharding_key') -%}
  {%- set holder = vcmt.objects(relation, sharding_key).target -%}
  {%- set checks = [] -%}
  {%- for projection in vcmt._existing_projections(holder, 'Aggregate') | dictsort -%}
    {%- set check = vcmt._vcmt_test_projection_diff(relation, projection[0], projection[1], tolerance) -%}
    {#- On a Distributed model each side goes to the shards as its own query,
        and the base side (which must not use the projection) would fail
        there: the proof reads the projection side alone. -#}
    {%- set proof = check if not sharding_key else vcmt._vcmt_test_projection_side(relation,
        vcmt._vcmt_test_projection_parts(projection[1]), true) -%}
    {%- if not vcmt._vcmt_test_reads_nothing(model) -%}
      {%- do run_query("select count() from (" ~ proof ~ ") as vcmt_proof settings force_optimize_projection = 1") -%}
    {%- endif -%}
    {%- do checks.append(check) -%}
  {%- endfor -%}
  {%- if checks -%}
    {{ return(vcmt._vcmt_test_sql(model, checks | join('\nunion all\n'))) }}
  {%- else -%}
select
    '' as projection_name,
    '' as group_key,
    false as in_projection,
    false as in_base,
    '' as projection_row,
    '' as base_row
where false
  {%- endif %}
{% endmacro %}
