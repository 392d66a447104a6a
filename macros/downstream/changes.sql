{#- What changed in a vcmt_upsert model (`changes=true`) since this model last
    read it: the rows its loads wrote into the table, each cancel (sign -1)
    and each new state (+1), with `_vcmt_load`, the number of the load that
    wrote it. Sums of `x * sign` over them are what the loads changed
    (docs/design.md#change-feed).

    - In an `incremental` model, the loads this model has not read: those
      after the highest `_vcmt_load` in its own table (which it must keep:
      `max(_vcmt_load) as _vcmt_load`), up to the last load that has ended.
      The default (legacy) strategy with a `unique_key` swaps the new table
      in at once, so a run that fails half-way has read nothing; other
      strategies are refused. A model behind the feed's start (the upstream
      was rebuilt with --full-refresh, or its feed rebased while this model
      did not run) fails, naming the --full-refresh that rebuilds it.
    - In a `table` (and a first build), every row up to the last load that
      has ended: their sums are the model's current rows.
    - In a view, every row at the time it is read.
    - In a unit test, the fixture as given (its rows are the changes).

      select customer_id, sum(amount * sign) as amount, sum(sign) as orders, max(_vcmt_load) as _vcmt_load
      from {{ vcmt.changes(ref('fct_orders')) }} group by customer_id -#}
{% macro changes(relation) %}{{ return(adapter.dispatch('changes', 'vcmt')(relation)) }}{% endmacro %}

{% macro default__changes(relation) %}
  {%- if relation is string -%}
    {{ exceptions.raise_compiler_error("vcmt.changes: its argument must be a ref of a vcmt_upsert model with "
        ~ "changes=true, e.g. vcmt.changes(ref('fct_orders')); got `" ~ relation ~ "`.") }}
  {%- endif -%}
  {%- if relation.is_cte -%}
    {{ return('(select *, toUInt64(0) as `_vcmt_load` from ' ~ relation ~ ')') }}
  {%- endif -%}
  {%- set table = relation.incorporate(limit=none, event_time_filter=none) -%}
  {%- set objs = vcmt.objects(table) -%}
  {%- set rows = 'select * except (`_vcmt_row`) from ' ~ objs.changes -%}
  {%- set who = "vcmt.changes(ref('" ~ table.identifier ~ "')) in model `" ~ this.identifier ~ "`" -%}
  {%- if not execute or relation.limit == 0 -%}
    {{ return('(' ~ rows ~ (' limit 0' if relation.limit == 0) ~ ')') }}
  {%- endif -%}
  {%- if not vcmt._relation_exists(objs.changes_writer) -%}
    {{ exceptions.raise_compiler_error(who ~ ": " ~ table.identifier ~ " has no change feed. Set changes=true in its "
        ~ "config (a vcmt_upsert model) and run it: its feed starts with that run.") }}
  {%- endif -%}
  {%- set first = 'select * from ' ~ objs.changes ~ ' order by _vcmt_load, _vcmt_row limit 1' -%}
  {%- set feed = run_query('select (select count() from (' ~ first ~ ') where _vcmt_row = 0), (select _vcmt_load from ('
      ~ first ~ ')), (select max(`load`) from ' ~ objs.loads ~ ') ' ~ vcmt._read_settings()).rows[0] -%}
  {%- set start, ended = feed[1] | int, (feed[2] or 0) | int -%}
  {%- if feed[0] | int == 0 -%}
    {{ exceptions.raise_compiler_error(who ~ ": the change feed of " ~ table.identifier ~ " starts at its next load "
        ~ "(changes=true was just set, or a load that restarts it is running): run " ~ table.identifier
        ~ " first.") }}
  {%- endif -%}
  {%- set materialized = config.get('materialized') -%}
  {%- if materialized == 'view' -%}
    {{ return(relation.render_event_time_filtered('(' ~ rows ~ ' where `_vcmt_row` != 0)')) }}
  {%- endif -%}
  {%- set read = vcmt._changes_read_position(who, materialized) -%}
  {%- if read is not none and read < start -%}
    {{ exceptions.raise_compiler_error(who ~ ": this model has read " ~ table.identifier ~ "'s changes up to load "
        ~ read ~ ", and its change feed now starts at load " ~ start ~ " (" ~ table.identifier ~ " was rebuilt "
        ~ "with --full-refresh, or its feed rebased while this model did not run): the loads in between are no "
        ~ "longer there. Rebuild this model: dbt run --full-refresh --select " ~ this.identifier ~ ".") }}
  {%- endif -%}
  {%- set where = '`_vcmt_load` <= ' ~ ended ~ ' and `_vcmt_row` != 0' -%}
  {%- if read is not none -%}
    {#- A base row here means the feed restarted since this run read its start: its rows are no changes. -#}
    {%- set where = '`_vcmt_load` > ' ~ read ~ ' and ' ~ where ~ ' and throwIf(`_vcmt_row` = 1, '
        ~ vcmt._sql_string(who ~ ": the change feed of " ~ table.identifier ~ " restarted while this model read it: "
        ~ "run it again (it then names the --full-refresh that rebuilds it).") ~ ') = 0' -%}
  {%- endif -%}
  {{ return(relation.render_event_time_filtered('(' ~ rows ~ ' where ' ~ where ~ ')')) }}
{% endmacro %}


{#- The last load an incremental model calling vcmt.changes() has read: the
    highest `_vcmt_load` in its table, or none (it reads every load: a first
    build, --full-refresh, a table or an empty one). Refuses what cannot
    read each load once: an incremental model without the `_vcmt_load`
    column, or with a strategy that does not swap its new table in at once;
    warns when the model filters groups out with a HAVING. -#}
{% macro _changes_read_position(who, materialized) %}
  {%- if materialized != 'incremental' or not is_incremental() -%}{{ return(none) }}{%- endif -%}
  {%- set strategy = adapter.calculate_incremental_strategy(config.get('incremental_strategy')) -%}
  {%- if not config.get('unique_key') or strategy != 'legacy' or config.get('inserts_only') -%}
    {{ exceptions.raise_compiler_error(who ~ ": an incremental model reads each load of the feed once only when a "
        ~ "run that fails half-way changes nothing, which dbt-clickhouse's default (legacy) strategy with a "
        ~ "`unique_key` does (it swaps the new table in at once); this model has unique_key=" ~ config.get('unique_key')
        ~ ", incremental_strategy=" ~ config.get('incremental_strategy') ~ ", inserts_only="
        ~ config.get('inserts_only') ~ ". Set unique_key to its group columns and leave the strategy unset.") }}
  {%- endif -%}
  {%- if modules.re.search('(?i)\\bhaving\\b', model.get('raw_code') or '') -%}
    {%- do exceptions.warn(who ~ ": the model has a HAVING: a group it filters out (its rows all deleted) keeps its "
        ~ "old row, since the strategy replaces only the groups the new rows hold. Keep every group, its count 0 "
        ~ "once it has no row, and filter when reading (README, \"Downstream models\").") -%}
  {%- endif -%}
  {%- if '_vcmt_load' not in adapter.get_columns_in_relation(this) | map(attribute='name') | list -%}
    {{ exceptions.raise_compiler_error(who ~ ": the model keeps no `_vcmt_load` column, the last load it has read. "
        ~ "Add `max(_vcmt_load) as _vcmt_load` to its SELECT, then rebuild it: dbt run --full-refresh --select "
        ~ this.identifier ~ ".") }}
  {%- endif -%}
  {%- set found = run_query('select max(`_vcmt_load`), count() from ' ~ this ~ ' ' ~ vcmt._read_settings()).rows[0] -%}
  {{ return(found[0] | int if found[1] | int > 0 else none) }}
{% endmacro %}
