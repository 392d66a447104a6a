{#- Check the values of a load's input before its first INSERT, so a bad value
    fails the whole load instead of leaving it half-applied. A value is bad
    when it cannot be stored in the target column's type: NULL in a key,
    version or non-Nullable column, NaN, out of range, unparseable; and a NULL
    sign. Columns whose input type already is the target type cannot hold such
    values (the model's own SELECT, always) and cost nothing here; the check
    matters for `vcmt.load_stage`, whose SELECT may read any file. A value
    that a cast would store differently (a narrower number, decimal scale or
    time precision) is bad too.
    Raises naming the first bad row and column. -#}
{% macro _check_event_values(cfg, columns, select_columns, sql, caller_name, holder_of=none) %}
  {%- set input_types = vcmt._types_by_name(select_columns) -%}
  {%- set checks = vcmt._value_checks(cfg, columns | rejectattr('name', 'equalto', cfg.sign) | list, input_types) -%}
  {#- A sign is any integer (>= 0 upsert, < 0 delete), never NULL; a file's
      may be text or a float (events.sql#_sign_number). -#}
  {%- if cfg.sign in input_types and not modules.re.match('^U?Int', input_types[cfg.sign]) -%}
    {%- do checks.extend(vcmt._value_checks(cfg, [{'name': cfg.sign, 'data_type': 'Int64'}], input_types)) -%}
  {%- endif -%}
  {%- if not checks -%}{{ return(none) }}{%- endif -%}

  {%- set counts = [] -%}
  {%- for ch in checks -%}{%- do counts.append('countIf(' ~ ch.bad ~ ')') -%}{%- endfor -%}
  {%- set found = run_query('select ' ~ counts | join(', ') ~ ' from (' ~ vcmt._user_sql(sql) ~ ') '
      ~ vcmt._read_settings(holder_of)).rows[0] -%}
  {%- for ch in checks -%}{%- set bad_rows = found[loop.index0] | int -%}{%- if bad_rows > 0 -%}
    {#- One thread reads the input in order, so the row number is its position. -#}
    {%- set settings = vcmt._pinned_query_settings() -%}
    {%- do settings.update({'max_threads': 1}) -%}
    {%- set first = run_query('select _vcmt_row, toString(' ~ vcmt._quote(ch.name) ~ ') from (select *, '
        ~ 'rowNumberInAllBlocks() as _vcmt_row from ('
                              ~ vcmt._user_sql(sql) ~ ')) where ' ~ ch.bad ~ ' limit 1 '
                              ~ vcmt._settings_clause(settings)).rows[0] -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": row " ~ first[0] ~ " of the input (counting from 0) has `"
        ~ ch.name ~ "` = "
        ~ (first[1] if first[1] is not none else 'NULL') ~ ", which cannot be stored as " ~ ch.type ~ " (" ~ bad_rows
        ~ " such row(s): NULL, NaN, out of range or unparseable). Nothing was loaded; fix or filter these rows in the "
        ~ "SELECT.") }}
  {%- endif -%}{%- endfor -%}
{% endmacro %}


{#- The loader's rule for one value, per column of `columns` whose type
    differs from its `input_types` entry: [{name, type, bad}], `bad` an
    expression true for a value of the input type that the column's type
    cannot hold, or would hold as another value. The loader checks a load's
    input with it, and a type change under `sync_all_columns` the stored rows
    (schema_changes.sql). -#}
{% macro _value_checks(cfg, columns, input_types) %}
  {%- set checks = [] -%}
  {%- for c in columns if c.name in input_types and input_types[c.name] != c.data_type -%}
    {%- set unwrapped = c.data_type[15:-1] if c.data_type.startswith('LowCardinality(') else c.data_type -%}
    {%- set nullable = unwrapped.startswith('Nullable(') -%}
    {%- set inner_type = vcmt._scalar_type(c.data_type) -%}
    {%- set col = vcmt._quote(c.name) -%}
    {%- if inner_type is none -%}
      {#- Arrays, maps, tuples...: cast errors surface before the first INSERT,
          because every load casts before it sorts or ranks (see settings.sql). -#}
    {%- elif inner_type.startswith('Enum') -%}
      {%- set names = [] -%}
      {%- for m in modules.re.finditer("'((?:[^'\\\\]|\\\\.)*)'\\s*=\\s*(-?[0-9]+)", inner_type) -%}
        {%- do names.append("'" ~ m.group(1) ~ "'") -%}{%- do names.append("'" ~ m.group(2) ~ "'") -%}
      {%- endfor -%}
      {%- set bad = 'toString(' ~ col ~ ') not in (' ~ names | join(', ') ~ ')' -%}
      {%- do checks.append({'name': c.name, 'type': c.data_type,
                            'bad': '(' ~ col ~ ' is not null and ' ~ bad ~ ')' if nullable else '(' ~ col
                                ~ ' is null or ' ~ bad ~ ')'}) -%}
    {%- else -%}
      {%- set typed = 'accurateCastOrNull(' ~ col ~ ', ' ~ vcmt._sql_string(inner_type) ~ ')' -%}
      {%- set bad = typed ~ ' is null' -%}
      {#- A narrower number or time type would store another value (a
          DateTime64(6) in a DateTime64(3) column, 0.125 in Decimal(10, 2)),
          which can merge two versions or two keys: refused as well. -#}
      {%- if modules.re.match('^(Nullable\\()?(U?Int|Float|Decimal|DateTime|Date|BFloat)', input_types[c.name]) -%}
        {%- set bad = '(' ~ bad ~ ' or cast(' ~ typed ~ ', ' ~ vcmt._sql_string(input_types[c.name]) ~ ') != ' ~ col
            ~ ')' -%}
      {%- endif -%}
      {%- do checks.append({'name': c.name, 'type': c.data_type,
                            'bad': '(' ~ col ~ ' is not null and ' ~ bad ~ ')' if nullable else bad}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(checks) }}
{% endmacro %}


{#- The type a value of `data_type` is checked against with accurateCastOrNull
    (LowCardinality and Nullable unwrapped), or none for types that cannot sit
    inside Nullable (arrays, maps, tuples, geo types...). -#}
{% macro _scalar_type(data_type) %}
  {%- set t = data_type[15:-1] if data_type.startswith('LowCardinality(') else data_type -%}
  {%- set t = t[9:-1] if t.startswith('Nullable(') else t -%}
  {%- if modules.re.match('^(Array|Map|Tuple|Nested|Variant|Dynamic|JSON|Object|AggregateFunction|'
                          ~ 'SimpleAggregateFunction|Point|Ring|LineString|MultiLineString|Polygon|'
                          ~ 'MultiPolygon|Geometry)\\b', t) -%}
    {{ return(none) }}
  {%- endif -%}
  {{ return(t) }}
{% endmacro %}
