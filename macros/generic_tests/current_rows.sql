{#- A vcmt_upsert model's current rows: `(select * from <relation> final where
    <sign> = 1 [and (<where>)])`. Until a merge the table also holds each
    updated or deleted key's cancel row and the state it cancels, so a plain
    SELECT sees them; FINAL collapses each pair and keeps the live state row.
    The sign column is the model's `sign` config (default `sign`). In a unit
    test the relation is the fixture, read as given. -#}
{% macro current_rows(relation, where=none) %}{{ return(adapter.dispatch('current_rows', 'vcmt')(relation,
    where)) }}{% endmacro %}

{% macro default__current_rows(relation, where) %}
  {#- A unit test's fixture (a CTE) holds the model's current rows as given: no cancel row to collapse. -#}
  {%- if relation is not string and relation.is_cte -%}
    {{ return('(select * from ' ~ relation ~ (' where (' ~ where ~ ')' if where else '') ~ ')') }}
  {%- endif -%}
  {%- set sign = vcmt._identity_columns(vcmt._vcmt_test_model_config(relation), 'vcmt.current_rows').sign -%}
  {%- set filter = vcmt._quote(sign) ~ ' = 1' ~ (' and (' ~ where ~ ')' if where else '') -%}
  {%- if execute and relation is not string and config.get('materialized') == 'incremental' -%}
    {%- do vcmt._warn_incremental_over_current_rows(relation) -%}
  {%- endif -%}
  {%- if relation is string -%}
    {{ return('(select * from ' ~ relation ~ ' final where ' ~ filter ~ ')') }}
  {%- endif -%}
  {#- Under --empty and --sample dbt renders a ref as a subquery, which FINAL cannot take: FINAL on the
      table, then the ref's sample window and limit on its current rows. -#}
  {%- set rows = relation.render_event_time_filtered('(select * from ' ~ relation.render() ~ ' final where ' ~ filter
      ~ ')') -%}
  {%- if relation.limit is not none -%}
    {%- set rows = '(select * from ' ~ rows ~ (' where false' if relation.limit == 0 else '') ~ ' limit '
        ~ relation.limit ~ ')' -%}
  {%- endif -%}
  {{ return(rows) }}
{% endmacro %}


{#- An incremental model over a vcmt model's current rows picks up the rows
    new or changed since its last run (a `_batch_id` filter), but a deleted
    row leaves nothing to pick up: it stays in the incremental model forever
    (README, "Downstream models"). Warned at every compile; the model's
    changes are what such a model reads. -#}
{% macro _warn_incremental_over_current_rows(relation) %}
  {%- do exceptions.warn("vcmt.current_rows(ref('" ~ relation.identifier ~ "')) in the incremental model `"
      ~ this.identifier ~ "`: an incremental run adds the rows new or changed since the last one, but a row deleted "
      ~ "from " ~ relation.identifier ~ " leaves nothing to add, and stays in " ~ this.identifier ~ " forever. Read "
      ~ "what changed instead: set changes=true on " ~ relation.identifier ~ " and read vcmt.changes(ref('"
      ~ relation.identifier ~ "')) (README, \"Downstream models\"); or materialize " ~ this.identifier
      ~ " as a table or a view.") -%}
{% endmacro %}


{#- dbt's generic tests (`unique`, `not_null`, `accepted_values`,
    `relationships`, dbt-utils' ...) read the tested model through
    `get_where_subquery`. A project that puts vcmt before dbt in its dispatch
    search order for the `dbt` namespace:

      dispatch: [{macro_namespace: dbt, search_order: [<project>, vcmt, dbt]}]

    gets this one: on a vcmt_upsert model the tests see its current rows
    (`vcmt.current_rows`, with the test's `where` config), elsewhere dbt's own.
    vcmt's own tests keep the stored rows: they check the cancel rows. -#}
{% macro default__get_where_subquery(relation) -%}
  {%- if execute and relation is not string
        and ((model if model is mapping else {}).get('test_metadata') or {}).get('namespace') != 'vcmt'
        and vcmt._vcmt_test_model_config(relation).get('materialized') == 'vcmt_upsert' -%}
    {{ return(vcmt.current_rows(relation, config.get('where')) ~ ' dbt_subquery') }}
  {%- endif -%}
  {{ return(dbt.default__get_where_subquery(relation)) }}
{%- endmacro %}


{#- dbt's `relationships` test reads its parent (`to`) directly, not through
    `get_where_subquery`: with the same dispatch line, a vcmt_upsert parent is
    read as its current rows too, so a deleted parent key is missing. Named
    `default__` so that it comes before dbt-clickhouse's own, which it calls. -#}
{% macro default__test_relationships(model, column_name, to, field) %}
  {#- At parse time dbt renders the test only to find its dependencies. -#}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- if to is not string and vcmt._vcmt_test_model_config(to).get('materialized') == 'vcmt_upsert' -%}
    {%- set to = vcmt.current_rows(to) -%}
  {%- endif -%}
  {{ return(dbt.clickhouse__test_relationships(model, column_name, to, field)) }}
{% endmacro %}


{#- `dbt show` previews a node with `limit <n>` after its SQL (dbt's
    `get_limit_sql`), and `dbt show --select <model>` previews the tests on
    it too. dbt-clickhouse's `relationships` test ends with a SETTINGS
    clause, which no limit may follow: with the same dispatch line the
    limit goes before it, as dbt-clickhouse places a test's (`place_limit`,
    at its `-- end_of_sql` mark). -#}
{% macro default__get_limit_sql(sql, limit) %}
  {%- if limit is not none and '-- end_of_sql' in sql -%}
    {{ return(dbt.clickhouse__place_limit(sql, limit)) }}
  {%- endif -%}
  {{ return(dbt.default__get_limit_sql(sql, limit)) }}
{% endmacro %}
