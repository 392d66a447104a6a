{#- Run by the package's on-run-end hook. A data test that is not vcmt's own (dbt's `unique`,
    `not_null`, `accepted_values`, `relationships`, dbt-utils', a project's generic test) on a
    vcmt_upsert model, compiled without the dispatch line the README documents, read the stored rows:
    cancel rows and old states included until a merge, so `unique` fails after the first update and
    `relationships` passes for a deleted parent. Such a run gets one warning naming the tests and the
    line to add. Singular tests are the user's own SQL and are left alone. -#}
{% macro _warn_tests_reading_stored_rows(results) %}
  {%- if not execute or not results -%}{{ return('') }}{%- endif -%}
  {%- set found = [] -%}
  {%- for res in results if res.node.resource_type == 'test' and res.node.test_metadata -%}
    {%- set attached = graph.nodes.get(res.node.attached_node or '') or {} -%}
    {%- if res.node.test_metadata.namespace != 'vcmt'
          and (attached.get('config') or {}).get('materialized') == 'vcmt_upsert'
          and ' final where ' not in (res.node.compiled_code or ' final where ') -%}
      {%- do found.append(res.node.name ~ ' (' ~ attached.name ~ ')') -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if found -%}
    {%- do exceptions.warn(
        "vcmt: " ~ found | length ~ " data test(s) on vcmt_upsert models read the stored rows, cancel rows and old "
        ~ "states included until a merge, so their result can be wrong: " ~ found | join(', ')
        ~ ". Add this line to dbt_project.yml to have dbt's generic tests read the current rows: "
        ~ "dispatch: [{macro_namespace: dbt, search_order: [" ~ project_name ~ ", vcmt, dbt]}]") -%}
  {%- endif -%}
  {{ return('') }}
{% endmacro %}
