{#- Truncates (`truncate_when`, docs/design.md#truncates).

    A truncate event carries no key, only a position: the model's `version`.
    A truncate at version T removes every row of the model whose version is
    at or below T, and every event at or below T, whenever it arrives, is
    ignored; rows and events above T are untouched. The highest T applied is
    the model's floor, kept in `<model>__truncates`.

    Before a batch is loaded:
    - a batch whose highest truncate is above the floor deletes every live
      row at or below it, as one INSERT of deletes at version T through the
      stage (so tombstones, counters and projections follow as for any
      delete), and only then records T: a run killed in between deletes
      again on the rerun, which finds nothing left to delete;
    - the events loaded are the batch's non-truncate events above the floor.
    Events below a truncate of the same batch are dropped rather than applied
    and deleted: the result is the same. -#}


{#- Returns {sql, truncates, truncated_to, truncated_rows, ignored}: the SQL
    to load (the model's SELECT without truncates and without events at or
    below the floor) and what was done. -#}
{% macro _apply_truncates(cfg, objs, columns, sql) %}
  {%- if not cfg.truncate_when -%}
    {{ return({'sql': sql, 'truncates': 0, 'truncated_to': none, 'truncated_rows': 0, 'ignored': 0}) }}
  {%- endif -%}
  {%- set vtype = (columns | selectattr('name', 'equalto', cfg.version) | first).data_type -%}
  {%- set v = vcmt._quote(cfg.version) -%}
  {%- set is_truncate = 'ifNull((' ~ vcmt._user_sql(cfg.truncate_when) ~ '), 0)' -%}
  {%- set rows = 'select ' ~ is_truncate ~ ' as _vcmt_t, cast(' ~ v ~ ', ' ~ vcmt._sql_string(vtype) ~ ') as _vcmt_v from (' ~ vcmt._user_sql(sql) ~ ') as _vcmt_src' -%}
  {%- set floor = vcmt._truncate_floor(objs, vtype) -%}
  {%- set floor_sql = 'cast(' ~ vcmt._sql_string(floor) ~ ', ' ~ vcmt._sql_string(vtype) ~ ')' if floor is not none else none -%}
  {%- set seen = run_query(
        'select countIf(_vcmt_t), toString(maxIf(_vcmt_v, _vcmt_t)), '
        ~ ('countIf(not _vcmt_t and _vcmt_v <= ' ~ floor_sql ~ '), maxIf(_vcmt_v, _vcmt_t) > ' ~ floor_sql if floor_sql else '0, 1')
        ~ ' from (' ~ rows ~ ') ' ~ vcmt._read_settings()).rows[0] -%}
  {%- set result = {'truncates': seen[0] | int, 'truncated_to': none, 'truncated_rows': 0, 'ignored': seen[2] | int} -%}

  {%- if seen[0] | int > 0 and seen[3] | int == 1 -%}
    {%- set to = seen[1] -%}
    {%- set to_sql = 'cast(' ~ vcmt._sql_string(to) ~ ', ' ~ vcmt._sql_string(vtype) ~ ')' -%}
    {%- set before = vcmt._applied_totals(objs) -%}
    {%- set cols = [] -%}
    {%- for c in columns if c.name not in [cfg.version, cfg.sign] -%}{%- do cols.append(c.name) -%}{%- endfor -%}
    {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': truncate at ' ~ cfg.version ~ ' ' ~ to ~ ': deleting every row at or below it', info=true) }}
    {%- call statement('vcmt_truncate') -%}
      insert into {{ objs.stage }} ({{ vcmt._column_list(cols + [cfg.version, cfg.sign]) }})
      select {{ vcmt._column_list(cols) }}, {{ to_sql }}, toInt8(-1)
      from {{ objs.target }} final
      where {{ vcmt._quote(cfg.sign) }} = 1 and {{ v }} <= {{ to_sql }}
      {{ vcmt._stage_insert_settings(cfg) }}
    {%- endcall -%}
    {%- set deleted = vcmt._applied_totals(objs).deleted - before.deleted -%}
    {%- call statement('vcmt_truncate_record') -%}
      insert into {{ objs.truncates }}
      select {{ vcmt._sql_string(to) }}, now64(3), {{ vcmt._sql_string(invocation_id) }}, {{ deleted }}
    {%- endcall -%}
    {%- set ignored = run_query('select countIf(not _vcmt_t and _vcmt_v <= ' ~ to_sql ~ ') from (' ~ rows ~ ') ' ~ vcmt._read_settings()).rows[0][0] -%}
    {%- do result.update({'truncated_to': to, 'truncated_rows': deleted, 'ignored': ignored | int}) -%}
    {%- set floor_sql = to_sql -%}
  {%- endif -%}

  {#- A NULL version is not filtered here: the loader's checks report it. -#}
  {%- set keep = 'not ' ~ is_truncate ~ (' and ifNull(' ~ v ~ ' > ' ~ floor_sql ~ ', 1)' if floor_sql else '') -%}
  {%- do result.update({'sql': 'select * from (' ~ vcmt._user_sql(sql) ~ ') as _vcmt_src where ' ~ keep}) -%}
  {{ return(result) }}
{% endmacro %}


{#- The highest truncate version applied to the model, as text, or none. -#}
{% macro _truncate_floor(objs, vtype) %}
  {%- set rows = run_query('select toString(max(accurateCastOrNull(version, ' ~ vcmt._sql_string(vtype) ~ '))) from ' ~ objs.truncates ~ ' ' ~ vcmt._read_settings()).rows -%}
  {{ return(rows[0][0] if rows | length > 0 else none) }}
{% endmacro %}
