{#- A data test that is not vcmt's own (dbt's `unique`, `not_null`, `accepted_values`, `relationships`,
    dbt-utils', a project's generic test) on a vcmt_upsert model, compiled without the dispatch line the
    README documents, reads the stored rows: cancel rows and old states included until a merge, so
    `unique` fails after the first update and `relationships` passes for a deleted parent. Two places say
    so: the package's on-run-end hook logs one warning naming the tests that ran and the line to add
    (`_warn_tests_reading_stored_rows`), and the package's data test `vcmt_dispatch_line` (data_tests/),
    severity warn, counts in dbt's `WARN=` (dbt gives a model no warn status, dbt-core issue 6721: only a
    test can carry one). Singular tests are the user's own SQL and are left alone. -#}

{#- The line that makes dbt's generic tests read a vcmt_upsert model's current rows (current_rows.sql). -#}
{% macro _dispatch_line() %}
  {{ return("dispatch: [{macro_namespace: dbt, search_order: [" ~ project_name ~ ", vcmt, dbt]}]") }}
{% endmacro %}


{#- The vcmt_upsert model a generic data test that is not vcmt's runs on (a graph node), or none. -#}
{% macro _vcmt_model_of_foreign_test(test_node) %}
  {%- set attached = graph.nodes.get(test_node.attached_node or '') or {} -%}
  {%- if test_node.test_metadata and test_node.test_metadata.namespace != 'vcmt'
        and (attached.get('config') or {}).get('materialized') == 'vcmt_upsert' -%}
    {{ return(attached) }}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}


{#- Run by the package's on-run-end hook: one warning naming the tests of this run that read the stored rows
    (their compiled SQL lacks vcmt.current_rows' `final where`), and the line to add. -#}
{% macro _warn_tests_reading_stored_rows(results) %}
  {%- if not execute or not results -%}{{ return('') }}{%- endif -%}
  {%- set found = [] -%}
  {%- for res in results if res.node.resource_type == 'test' -%}
    {%- set attached = vcmt._vcmt_model_of_foreign_test(res.node) -%}
    {%- if attached and ' final where ' not in (res.node.compiled_code or ' final where ') -%}
      {%- do found.append(res.node.name ~ ' (' ~ attached.name ~ ')') -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if found -%}
    {%- do exceptions.warn(
        "vcmt: " ~ found | length ~ " data test(s) on vcmt_upsert models read the stored rows, cancel rows and old "
        ~ "states included until a merge, so their result can be wrong: " ~ found | join(', ')
        ~ ". Add this line to dbt_project.yml to have dbt's generic tests read the current rows: "
        ~ vcmt._dispatch_line()) -%}
  {%- endif -%}
  {{ return('') }}
{% endmacro %}


{#- The SQL of the package's data test `vcmt_dispatch_line`: one row (data_test, model, fix) per generic
    test of the project, not vcmt's, on a vcmt_upsert model whose `get_where_subquery`, as this project
    dispatches it, reads the stored rows; no row otherwise. -#}
{% macro _tests_reading_stored_rows_sql() %}
  {%- set rows = [] -%}
  {%- for node in (graph.nodes.values() if execute else []) if node.resource_type == 'test' -%}
    {%- set attached = vcmt._vcmt_model_of_foreign_test(node) -%}
    {%- if attached -%}
      {%- set relation = api.Relation.create(database=attached.database, schema=attached.schema,
                                             identifier=attached.alias) -%}
      {%- if ' final where ' not in adapter.dispatch('get_where_subquery', 'dbt')(relation) | string -%}
        {%- do rows.append('select ' ~ vcmt._sql_string(node.name) ~ ' as data_test, '
                           ~ vcmt._sql_string(attached.name) ~ ' as model, '
                           ~ vcmt._sql_string(vcmt._dispatch_line()) ~ ' as fix') -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(rows | join('\nunion all\n') if rows else "select '' as data_test, '' as model, '' as fix where false") }}
{% endmacro %}
