{#- Truncates (`truncate_when`, docs/design.md#truncates).

    A truncate event carries no key, only a position: the model's `version`.
    A truncate at version T removes every row of the model whose version is
    at or below T, and every event at or below T, whenever it arrives, is
    ignored; rows and events above T are untouched. The highest T recorded is
    the model's floor, kept (typed as the version) in `<model>__truncates`.

    Before a batch is loaded:
    - a batch whose highest truncate is above the floor records it, as
      pending (rows_deleted NULL);
    - a pending floor, this batch's or one a killed run left, is applied:
      every live row at or below it is deleted by one INSERT of deletes at
      the floor's version through the stage (tombstones, counters and
      projections follow as for any delete), then the floor is marked done;
    - the events loaded are the batch's non-truncate events above the floor
      (with unconditional deletes, deletes too: their version means nothing).
    Events below a truncate of the same batch are thus dropped rather than
    applied and deleted: the result is the same. -#}


{% macro _truncate_condition(cfg) %}
  {{ return('ifNull((' ~ vcmt._user_sql(cfg.truncate_when) ~ '), 0)') }}
{% endmacro %}


{#- The model's SELECT without its truncate rows: what the loader's checks read. -#}
{% macro _without_truncates(cfg, sql) %}
  {%- if not cfg.truncate_when -%}{{ return(sql) }}{%- endif -%}
  {{ return('select * from (' ~ vcmt._user_sql(sql) ~ ') as _vcmt_src where not ' ~ vcmt._truncate_condition(cfg)) }}
{% endmacro %}


{#- Returns {sql, truncates, truncated_to, truncated_rows, ignored, ignored_deletes, watermark}:
    the SQL to load (the model's SELECT without truncates and without events
    at or below the floor), what was done, and the batch's highest watermark
    over all its rows (a batch of only truncates or ignored events is read). -#}
{% macro _apply_truncates(cfg, objs, columns, select_columns, sql) %}
  {%- if not cfg.truncate_when -%}
    {{ return({'sql': sql, 'truncates': 0, 'truncated_to': none, 'truncated_rows': 0, 'ignored': 0,
        'ignored_deletes': 0,
              'watermark': none}) }}
  {%- endif -%}
  {%- set vtype = vcmt._sql_string((columns | selectattr('name', 'equalto', cfg.version) | first).data_type) -%}
  {%- set v = vcmt._quote(cfg.version) -%}
  {%- set truncates = vcmt._all_shards(objs, 'truncates') -%}
  {%- set floor = vcmt._truncate_floor_sql(objs) -%}
  {%- set returned = select_columns | map(attribute='name') | list -%}
  {#- An unconditional delete applies whatever its version. -#}
  {%- set is_delete = 'ifNull(' ~ vcmt._sign_number(cfg, select_columns)
      ~ ' < 0, 0)' if cfg.sign in returned else '0' -%}
  {%- set any_version = is_delete if cfg.delete_mode == 'unconditional' else '0' -%}
  {%- set rows = 'select ' ~ vcmt._truncate_condition(cfg) ~ ' as _vcmt_t, accurateCastOrNull(' ~ v ~ ', ' ~ vtype
      ~ ') as _vcmt_v, '
                 ~ any_version ~ ' as _vcmt_any, ' ~ is_delete ~ ' as _vcmt_del, ' ~ (vcmt._quote(cfg.watermark)
                 if cfg.watermark else 'null') ~ ' as _vcmt_w from (' ~ vcmt._user_sql(sql) ~ ') as _vcmt_src' -%}
  {%- set below = 'not _vcmt_t and not _vcmt_any and _vcmt_v <= _vcmt_floor' -%}
  {%- set seen = run_query('with ' ~ floor ~ ' as _vcmt_floor select countIf(_vcmt_t), countIf(_vcmt_t and _vcmt_v is '
      ~ 'null), '
        ~ 'countIf(_vcmt_t and _vcmt_v is not null and (_vcmt_floor is null or _vcmt_v > _vcmt_floor)), countIf('
        ~ below ~ '), '
        ~ vcmt._highest_as_text('_vcmt_w') ~ ', countIf(' ~ below ~ ' and _vcmt_del)' ~ ' from (' ~ rows ~ ') '
        ~ vcmt._read_settings(holder_of=objs.target)).rows[0] -%}
  {%- if seen[1] | int > 0 -%}
    {{ vcmt._refuse_under_lock(objs, "vcmt_upsert " ~ objs.target.identifier ~ ": " ~ seen[1] ~ " truncate event(s) "
        ~ "(rows where `truncate_when`: " ~ cfg.truncate_when ~ ") have a `" ~ cfg.version
        ~ "` that is NULL or does not fit " ~ vtype ~ "; a truncate's version says which rows it removes. "
        ~ "Nothing was loaded. Give truncate rows their source position.") }}
  {%- endif -%}
  {%- set result = {'truncates': seen[0] | int, 'truncated_to': none, 'truncated_rows': 0, 'ignored': seen[3] | int,
                    'ignored_deletes': seen[5] | int, 'watermark': seen[4]} -%}

  {%- if seen[2] | int > 0 -%}
    {%- call statement('vcmt_truncate_record') -%}
      insert into {{ objs.truncates }} (version, applied_at, invocation_id, rows_deleted)
      select maxIf(_vcmt_v, _vcmt_t), now64(3), {{ vcmt._sql_string(invocation_id) }}, null from ({{ rows }})
      where {{ vcmt._fenced(objs.target) }}
      {{ vcmt._read_settings(holder_of=objs.target) }}
    {%- endcall -%}
  {%- endif -%}
  {%- set pending = run_query('select maxOrNull(version) as f, f is not null and (maxIfOrNull(version, '
      ~ 'rows_deleted is not null) is null '
                              ~ 'or f > maxIfOrNull(version, rows_deleted is not null)), toString(f) from ' ~ truncates
                              ~ ' ' ~ vcmt._read_settings()).rows[0] -%}
  {%- if pending[1] | int == 1 -%}
    {%- set before = vcmt._applied_totals(objs) -%}
    {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': truncate at ' ~ cfg.version ~ ' ' ~ pending[2]
        ~ ': deleting every row at or below it', info=true) }}
    {%- set deletes_sql = vcmt._truncate_deletes_sql(cfg, objs, columns) -%}
    {%- call statement('vcmt_truncate') -%}{{ deletes_sql }}{%- endcall -%}
    {%- do result.update({'ran': [deletes_sql]}) -%}
    {%- set deleted = vcmt._applied_totals(objs).deleted - before.deleted -%}
    {%- call statement('vcmt_truncate_done') -%}
      insert into {{ objs.truncates }} (version, applied_at, invocation_id, rows_deleted)
      select max(version), now64(3), {{ vcmt._sql_string(invocation_id) }}, {{ deleted }} from {{ truncates }}
      where {{ vcmt._fenced(objs.target) }}
      {{ vcmt._settings_clause(vcmt._holder_settings(objs.target)) }}
    {%- endcall -%}
    {%- do result.update({'truncated_to': pending[2], 'truncated_rows': deleted}) -%}
    {%- if seen[2] | int > 0 -%}
      {%- set ignored = run_query('with ' ~ floor ~ ' as _vcmt_floor select countIf(' ~ below ~ '), countIf(' ~ below
          ~ ' and _vcmt_del) from ('
                                  ~ rows ~ ') ' ~ vcmt._read_settings(holder_of=objs.target)).rows[0] -%}
      {%- do result.update({'ignored': ignored[0] | int, 'ignored_deletes': ignored[1] | int}) -%}
    {%- endif -%}
  {%- endif -%}

  {#- A version that does not fit is not filtered here: the loader's checks report it. -#}
  {%- set keep = 'not ' ~ vcmt._truncate_condition(cfg) ~ ' and (' ~ any_version ~ ' or ifNull(accurateCastOrNull(' ~ v
      ~ ', ' ~ vtype ~ ') > ' ~ floor ~ ', 1))' -%}
  {%- do result.update({'sql': 'select * from (' ~ vcmt._user_sql(sql) ~ ') as _vcmt_src where ' ~ keep}) -%}
  {{ return(result) }}
{% endmacro %}


{#- The model's floor: the highest truncate recorded (on every shard's node). -#}
{% macro _truncate_floor_sql(objs) %}
  {{ return('(select maxOrNull(version) from ' ~ vcmt._all_shards(objs, 'truncates') ~ ')') }}
{% endmacro %}


{#- Applying the floor: one INSERT of a delete at the floor's version for
    every live row at or below it, through the stage. -#}
{% macro _truncate_deletes_sql(cfg, objs, columns) %}
  {%- set cols = [] -%}
  {%- for c in columns if c.name not in [cfg.version, cfg.sign] -%}{%- do cols.append(c.name) -%}{%- endfor -%}
  {%- set floor = vcmt._truncate_floor_sql(objs) -%}
  insert into {{ vcmt._all_shards(objs, 'stage') }} ({{ vcmt._column_list(cols + [cfg.version, cfg.sign]) }})
  select {{ vcmt._column_list(cols) }}, assumeNotNull({{ floor }}), toInt8(-1)
  from {{ vcmt._all_shards(objs, 'target') }} final
  where {{ vcmt._quote(cfg.sign) }} = 1 and {{ vcmt._quote(cfg.version) }} <= {{ floor }}
    and {{ vcmt._fenced(objs.target) }}
  {{ vcmt._stage_insert_settings(cfg, holder_of=objs.target) }}
{% endmacro %}
