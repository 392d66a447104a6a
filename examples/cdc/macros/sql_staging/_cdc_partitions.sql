{#- The partitions of a staged table, one dict per partition
    (`topic=orders/_batch_id=0` -> {'topic': 'orders', '_batch_id': '0'}).
    They come from the metastore: no Spark job, unlike a select distinct. -#}
{% macro _cdc_partitions(relation) %}
  {%- set partitions = [] -%}
  {%- for row in run_query('show partitions ' ~ relation) -%}
    {%- set partition = {} -%}
    {%- for part in row[0].split('/') -%}
      {%- set column, value = part.split('=', 1) -%}
      {%- do partition.update({column: value}) -%}
    {%- endfor -%}
    {%- do partitions.append(partition) -%}
  {%- endfor -%}
  {{ return(partitions) }}
{% endmacro %}
