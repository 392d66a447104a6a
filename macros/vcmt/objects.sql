{#- The objects one vcmt_upsert model owns. Their names are a public contract:
    external writers insert into `<model>__stage`, tests read `<model>`. -#}
{% macro objects(target) %}
  {{ return(adapter.dispatch('objects', 'vcmt')(target)) }}
{% endmacro %}

{% macro default__objects(target) %}
  {%- set names = {
      'stage': 'stage',
      'transform': 'transform',
      'tombstones': 'tombstones',
      'tombstones_writer': 'tombstones_writer',
      'cancels_writer': 'tombstones_from_cancels',
      'applied': 'applied',
      'applied_writer': 'applied_writer',
      'loads': 'loads',
      'truncates': 'truncates',
      'batch': 'batch',
  } -%}
  {%- set objs = {'target': target} -%}
  {%- for role, suffix in names.items() -%}
    {#- Helpers follow the target onto the cluster (dbt-clickhouse's can_on_cluster). -#}
    {%- set rel = api.Relation.create(database=target.database, schema=target.schema,
                                      identifier=target.identifier ~ '__' ~ suffix, type='table',
                                      can_on_cluster=target.can_on_cluster) -%}
    {%- do objs.update({role: rel}) -%}
  {%- endfor -%}
  {{ return(objs) }}
{% endmacro %}


{#- Drop every object of the model (only those in `found` when given), views
    first so no writer ever sees a stage without its transform. -#}
{% macro _drop_objects(objs, found=none) %}
  {%- set order = ['transform', 'tombstones_writer', 'cancels_writer', 'applied_writer', 'stage'] -%}
  {%- for role in objs.keys() if role not in order -%}{%- do order.append(role) -%}{%- endfor -%}
  {%- for role in order if found is none or objs[role].identifier in found -%}
    {%- call statement('vcmt_drop_' ~ role) -%}
      {{ vcmt._drop_sql(objs[role]) }}
    {%- endcall -%}
  {%- endfor -%}
{% endmacro %}


{#- Where --full-refresh builds a model's new tables before swapping them in
    (`<model>__vcmt_new`, `<model>__vcmt_new__stage`, ...). -#}
{% macro _staging_objects(objs) %}
  {{ return(vcmt.objects(objs.target.incorporate(path={'identifier': objs.target.identifier ~ '__vcmt_new'}))) }}
{% endmacro %}


{#- name -> {engine, as_select, create_table_query} for every object of the
    model that exists: one system.tables query per run instead of one per object. -#}
{% macro _existing_objects(objs) %}
  {%- set names = [] -%}
  {%- for rel in objs.values() -%}{%- do names.append(vcmt._sql_string(rel.identifier)) -%}{%- endfor -%}
  {%- set rows = run_query("select name, engine, as_select, create_table_query from system.tables where database = "
                           ~ vcmt._sql_string(objs.target.schema) ~ " and name in (" ~ names | join(', ') ~ ")") -%}
  {%- set found = {} -%}
  {%- for row in rows.rows -%}
    {%- do found.update({row[0]: {'engine': row[1], 'as_select': row[2], 'create_table_query': row[3]}}) -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}


{% macro _relation_exists(relation) %}
  {%- set rows = run_query("select count() from system.tables where database = " ~ vcmt._sql_string(relation.schema) ~ " and name = " ~ vcmt._sql_string(relation.identifier)) -%}
  {{ return(rows.columns[0].values()[0] | int > 0) }}
{% endmacro %}
