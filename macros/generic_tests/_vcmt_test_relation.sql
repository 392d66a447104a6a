{#- The tested relation itself. Tests that read with FINAL or inspect the
    table's metadata cannot run on the `(select ... where ...)` subquery dbt
    passes when a test sets the `where` config. Under `--empty` and
    `--sample` dbt renders a ref as a subquery too: the table is read
    instead, whole (the invariants hold only over every row), and under
    `--empty` the test returns no row (_vcmt_test_sql). -#}
{% macro _vcmt_test_relation(test_name, model, argument='model') %}
  {%- if model is string -%}
    {{ exceptions.raise_compiler_error(
      "vcmt." ~ test_name ~ ": argument `" ~ argument ~ "` must be a table (a ref or a source), because the "
      ~ "test reads it with FINAL or from system tables; a `where` config turns it into a subquery. "
      ~ "Filter in a model instead; got `" ~ model ~ "`.") }}
  {%- endif -%}
  {{ return(model.incorporate(limit=none, event_time_filter=none)) }}
{% endmacro %}


{#- Whether dbt runs with `--empty` (a ref or source read with `limit 0`):
    the test then reads no row of `model`. -#}
{% macro _vcmt_test_reads_nothing(model) %}
  {{ return(model is not string and model.limit == 0) }}
{% endmacro %}


{#- A test's SQL as dbt runs it: under `--empty`, the same query with
    `limit 0`, which the engine plans (every name and type is checked) but
    does not execute. -#}
{% macro _vcmt_test_sql(model, sql) %}
  {%- if not vcmt._vcmt_test_reads_nothing(model) -%}{{ return(sql) }}{%- endif -%}
  {{ return('select * from (\n' ~ sql ~ '\n) as vcmt_empty limit 0') }}
{% endmacro %}
