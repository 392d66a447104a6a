{#- Check the values of a load's input before its first INSERT, so a bad value
    fails the whole load instead of leaving it half-applied. A value is bad
    when it cannot be stored in the target column's type: NULL in a key,
    version or non-Nullable column, NaN, out of range, unparseable; and a NULL
    sign. Columns whose input type already is the target type cannot hold such
    values (the model's own SELECT, always) and cost nothing here; the check
    matters for `vcmt.load_stage`, whose SELECT may read any file.
    Raises naming the first bad row and column. -#}
{% macro _check_event_values(cfg, columns, select_columns, sql, caller_name) %}
  {%- set input_types = {} -%}
  {%- for c in select_columns -%}{%- do input_types.update({c.name: c.data_type}) -%}{%- endfor -%}
  {%- set checks = [] -%}
  {%- for c in columns if c.name in input_types and c.name != cfg.sign and input_types[c.name] != c.data_type -%}
    {%- set target_type = c.data_type | replace('LowCardinality(', '') -%}
    {%- set target_type = target_type[:-1] if target_type != c.data_type else target_type -%}
    {%- set nullable = target_type.startswith('Nullable(') -%}
    {%- set inner_type = target_type[9:-1] if nullable else target_type -%}
    {%- if not modules.re.match('^(Array|Map|Tuple|Nested|Variant|Dynamic|JSON|Object|AggregateFunction|SimpleAggregateFunction)\\b', inner_type) -%}
      {%- set col = vcmt._quote(c.name) -%}
      {%- set bad = 'accurateCastOrNull(' ~ col ~ ', ' ~ vcmt._sql_string(inner_type) ~ ') is null' -%}
      {%- do checks.append({'name': c.name, 'type': c.data_type,
                            'bad': '(' ~ col ~ ' is not null and ' ~ bad ~ ')' if nullable else bad}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if cfg.sign in input_types and input_types[cfg.sign].startswith('Nullable(') -%}
    {%- do checks.append({'name': cfg.sign, 'type': 'Int8', 'bad': vcmt._quote(cfg.sign) ~ ' is null'}) -%}
  {%- endif -%}
  {%- if not checks -%}{{ return(none) }}{%- endif -%}

  {%- set counts = [] -%}
  {%- for ch in checks -%}{%- do counts.append('countIf(' ~ ch.bad ~ ')') -%}{%- endfor -%}
  {%- set found = run_query('select ' ~ counts | join(', ') ~ ' from (' ~ vcmt._user_sql(sql) ~ ') ' ~ vcmt._read_settings()).rows[0] -%}
  {%- for ch in checks -%}{%- set bad_rows = found[loop.index0] | int -%}{%- if bad_rows > 0 -%}
    {#- One thread reads the input in order, so the row number is its position. -#}
    {%- set settings = vcmt._pinned_query_settings() -%}
    {%- do settings.update({'max_threads': 1}) -%}
    {%- set first = run_query('select _vcmt_row, toString(' ~ vcmt._quote(ch.name) ~ ') from (select *, rowNumberInAllBlocks() as _vcmt_row from ('
                              ~ vcmt._user_sql(sql) ~ ')) where ' ~ ch.bad ~ ' limit 1 ' ~ vcmt._settings_clause(settings)).rows[0] -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": row " ~ first[0] ~ " of the input (counting from 0) has `" ~ ch.name ~ "` = "
        ~ (first[1] if first[1] is not none else 'NULL') ~ ", which cannot be stored as " ~ ch.type ~ " (" ~ bad_rows
        ~ " such row(s): NULL, NaN, out of range or unparseable). Nothing was loaded; fix or filter these rows in the SELECT.") }}
  {%- endif -%}{%- endfor -%}
{% endmacro %}
