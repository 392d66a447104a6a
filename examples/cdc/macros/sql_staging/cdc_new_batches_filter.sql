{#- A predicate that keeps only the landing batches not staged yet in
    `relation`, so an incremental run reads and writes only new batches.
    Batches listed in var `vcmt_restage_batches` are staged again and replace
    their partitions: no run ever stages a line twice. `true` on a first
    build or --full-refresh.

    Batches are `_batch_id` partitions; other partition columns (such as
    `topic`) scope them, because topics land independently and batch N of one
    topic says nothing about batch N of another:
      `_batch_id not in (0, 1)`
      `not (topic = 'customers' and _batch_id in (0)) and not (topic = 'orders' and _batch_id in (0, 1))`

      where {{ cdc_new_batches_filter(this) }}
-#}
{% macro cdc_new_batches_filter(relation) %}
  {%- if not (execute and is_incremental()) -%}{{ return('true') }}{%- endif -%}
  {%- set restage = var('vcmt_restage_batches', []) | map('int') | list -%}
  {#- Staged batches per scope (`topic = 'orders'`, or '' when batch is the only partition column). -#}
  {%- set staged = {} -%}
  {%- for partition in _cdc_partitions(relation) -%}
    {%- set batch = partition['_batch_id'] | int -%}
    {%- set scope = [] -%}
    {%- for column, value in partition.items() if column != '_batch_id' -%}
      {%- do scope.append(column ~ ' = ' ~ "'" ~ value ~ "'") -%}
    {%- endfor -%}
    {%- if batch not in restage -%}{%- do staged.setdefault(scope | join(' and '), []).append(batch) -%}{%- endif -%}
  {%- endfor -%}
  {%- set predicates = [] -%}
  {%- for scope, batches in staged | dictsort -%}
    {%- set batch_list = '(' ~ (batches | sort | join(', ')) ~ ')' -%}
    {%- do predicates.append('not (' ~ scope ~ ' and _batch_id in ' ~ batch_list ~ ')' if scope else '_batch_id not in ' ~ batch_list) -%}
  {%- endfor -%}
  {{ return(predicates | join(' and ') if predicates else 'true') }}
{% endmacro %}
