{#- The loader's input: the model's SELECT as events, each column cast to the
    target's type, the sign normalised, and unsent columns given a value. -#}


{#- The model's events, every column cast to the target's type (so one key
    has one spelling: a UUID written in upper and lower case is one key), with
    the sign normalised to +1 (upsert) / -1 (delete) in `_vcmt_sign`; a SELECT
    without a sign column is all upserts. -#}
{% macro _normalized_events_sql(cfg, columns, select_columns, sql) %}
  {%- set has_sign = cfg.sign in (select_columns | map(attribute='name') | list) -%}
  {%- set sign_expr = 'if(' ~ vcmt._sign_number(cfg, select_columns) ~ ' < 0, toInt8(-1), '
      ~ 'toInt8(1))' if has_sign else 'toInt8(1)' -%}
  {%- set types = vcmt._types_by_name(columns) -%}
  {%- set casts = [] -%}
  {%- for c in cfg.key_columns + vcmt._loaded_data_columns(cfg, columns, select_columns) + [cfg.version] -%}
    {%- do casts.append('cast(_vcmt_in.' ~ vcmt._quote(c) ~ ', ' ~ vcmt._sql_string(types[c]) ~ ') as '
        ~ vcmt._quote(c)) -%}
  {%- endfor -%}
  {%- if cfg.watermark and cfg.watermark not in types -%}
    {%- do casts.append('_vcmt_in.' ~ vcmt._quote(cfg.watermark) ~ ' as ' ~ vcmt._quote(cfg.watermark)) -%}
  {%- endif -%}
  select {{ casts | join(', ') }}, _vcmt_in._vcmt_sign as _vcmt_sign
  from (select *, {{ sign_expr }} as _vcmt_sign from ({{ vcmt._user_sql(sql) }}) as _vcmt_src) as _vcmt_in
{% endmacro %}


{#- The input's sign as a number, for every comparison with 0: a file's sign
    may be text (CSV, a quoted JSON value) or a float, and text meeting
    `< 0` fails with no common type. Values that are no integer are refused
    first (_check_event_values); a truncate row's sign may be anything
    (NULL here). -#}
{% macro _sign_number(cfg, select_columns) %}
  {%- set input = (select_columns | selectattr('name', 'equalto', cfg.sign) | first).data_type -%}
  {%- if modules.re.match('^(Nullable\\()?U?Int', input) -%}{{ return(vcmt._quote(cfg.sign)) }}{%- endif -%}
  {{ return('accurateCastOrNull(' ~ vcmt._quote(cfg.sign) ~ ', \'Int64\')') }}
{% endmacro %}


{#- Target data columns the SELECT returns. A column the target keeps but the
    SELECT no longer returns (on_schema_change) is left to its default in the
    stage, and the transform keeps the stored value for it. -#}
{% macro _loaded_data_columns(cfg, columns, select_columns) %}
  {%- set returned = select_columns | map(attribute='name') | list -%}
  {%- set data = [] -%}
  {%- for c in vcmt._data_columns(cfg, columns) if c in returned -%}{%- do data.append(c) -%}{%- endfor -%}
  {{ return(data) }}
{% endmacro %}


{#- With `unavailable_column`, a column an event did not send carries no value
    (Debezium's staging leaves it NULL), even in a non-Nullable column: it is
    replaced by its type's default before the checks and the load, and the
    transform keeps the stored value for it (docs/design.md#unsent-columns).
    The list must be a column of the target: a model that adds it later needs
    on_schema_change to add it (or --full-refresh). -#}
{% macro _unsent_as_defaults(cfg, objs, columns, select_columns, sql) %}
  {%- set u = cfg.unavailable_column -%}
  {%- if not u -%}{{ return(sql) }}{%- endif -%}
  {%- set stored = columns | map(attribute='name') | list -%}
  {%- if u not in stored -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert " ~ objs.target.identifier ~ ": `unavailable_column` `" ~ u
        ~ "` is not a column of the target, so unsent columns cannot be recognised and would be overwritten; "
        ~ "nothing was loaded. Add the column with on_schema_change='append_new_columns' (or run with "
        ~ "--full-refresh).") }}
  {%- endif -%}
  {%- set input_types = vcmt._types_by_name(select_columns) -%}
  {%- set replaced = [] -%}
  {%- for c in columns if c.name in input_types and c.name in vcmt._data_columns(cfg, columns) and c.name != u -%}
    {%- set col = vcmt._quote(c.name) -%}
    {#- The target type's default, as the input's (non-Nullable) type, so it converts back exactly. -#}
    {%- set default = 'cast(defaultValueOfTypeName(' ~ vcmt._sql_string(vcmt._scalar_type(c.data_type) or c.data_type)
        ~ '), '
                      ~ vcmt._sql_string(vcmt._scalar_type(input_types[c.name]) or input_types[c.name]) ~ ')' -%}
    {%- do replaced.append('if(has(' ~ vcmt._quote(u) ~ ', ' ~ vcmt._sql_string(c.name) ~ '), ' ~ default ~ ', ' ~ col
        ~ ') as ' ~ col) -%}
  {%- endfor -%}
  {%- if not replaced -%}{{ return(sql) }}{%- endif -%}
  {{ return('select * replace (' ~ replaced | join(', ') ~ ') from (' ~ vcmt._user_sql(sql) ~ ') as _vcmt_unsent') }}
{% endmacro %}
