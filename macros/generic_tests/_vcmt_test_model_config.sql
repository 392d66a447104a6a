{#- The config of the node a generic test runs on, so that a test on a
    vcmt_upsert model needs no arguments. `model` is the tested relation, or a
    `(select ... where ...) dbt_subquery` string when the test sets `where`;
    both contain the node's relation name. Returns {} when no node matches
    (e.g. a source, or outside the execute phase where `graph` is empty). -#}
{% macro _vcmt_test_model_config(model) %}
  {%- if not execute -%}{{ return({}) }}{%- endif -%}
  {%- set rendered = model | string -%}
  {%- set candidates = [] -%}
  {%- for node in graph.nodes.values() if node.resource_type in ['model', 'seed', 'snapshot'] and node.relation_name -%}
    {%- if node.relation_name == rendered -%}{{ return(node.config) }}{%- endif -%}
    {%- if model is not string and node.alias == model.identifier and node.schema == model.schema -%}
      {%- do candidates.insert(0, node) -%}
    {%- elif node.relation_name in rendered -%}
      {%- do candidates.append(node) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(candidates[0].config if candidates else {}) }}
{% endmacro %}
