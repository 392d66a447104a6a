{#- Check the model's SELECT against the config before any DDL and return the
    target's column list [{name, data_type}] (sign forced to Int8, added when
    the SELECT has none: then every event is an upsert). -#}
{% macro _target_columns(cfg, select_columns) %}
  {%- set by_name = vcmt._types_by_name(select_columns) -%}
  {%- set returned = by_name.keys() | list -%}
  {%- do vcmt._check_reserved_names(returned, 'vcmt_upsert') -%}
  {%- for k in cfg.key_columns -%}
    {%- if k not in by_name -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: `unique_key` column `" ~ k ~ "` is not returned by the model's "
          ~ "SELECT; it returns " ~ returned ~ ".") }}
    {%- endif -%}
    {%- if 'Nullable(' in by_name[k] -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: `unique_key` column `" ~ k ~ "` is " ~ by_name[k]
          ~ "; key columns cannot be Nullable. Cast it in the SELECT, e.g. `assumeNotNull(" ~ k ~ ")` or `coalesce(" ~ k
          ~ ", 0)`, after filtering NULL keys out.") }}
    {%- endif -%}
    {#- Floats do not identify a row: 0.0 = -0.0 is true, yet GROUP BY and IN
        (what the transform's lookup and the fold use) see two keys, so one
        logical key ends up with two live rows. Wrapped floats (Nullable,
        LowCardinality, Array, Tuple...) inherit the problem. -#}
    {%- if modules.re.search("(?<!')\\bB?Float(16|32|64)\\b", by_name[k]) -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: `unique_key` column `" ~ k ~ "` is " ~ by_name[k]
          ~ "; floating-point key columns cannot identify a row (0.0 and -0.0 compare equal but become two live keys). "
          ~ "Cast it in the SELECT to a Decimal or an integer, e.g. `toDecimal64(" ~ k ~ ", 6) as " ~ k
          ~ "` or `toInt64(" ~ k ~ ") as " ~ k ~ "`.") }}
    {%- endif -%}
  {%- endfor -%}
  {%- if cfg.version not in by_name -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `version` column `" ~ cfg.version
        ~ "` is not returned by the model's SELECT; it returns " ~ returned ~ ". Set `version` to the column that "
        ~ "orders a key's changes.") }}
  {%- endif -%}
  {%- if not vcmt._is_version_type(by_name[cfg.version]) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `version` column `" ~ cfg.version ~ "` has type "
        ~ by_name[cfg.version] ~ "; VersionedCollapsingMergeTree needs a non-Nullable integer, Date, Date32, "
        ~ "DateTime or DateTime64. Cast it in the SELECT.") }}
  {%- endif -%}
  {%- if cfg.sign_required and cfg.sign not in by_name -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `sign` column `" ~ cfg.sign ~ "` is not returned by the model's "
        ~ "SELECT; it returns " ~ returned ~ ". Return it (+1 upsert, -1 delete), or drop the `sign` config to treat "
        ~ "every event as an upsert.") }}
  {%- endif -%}
  {%- if cfg.sign in by_name and not modules.re.match('^U?Int(8|16|32|64|128|256)$', by_name[cfg.sign]) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `sign` column `" ~ cfg.sign ~ "` has type " ~ by_name[cfg.sign]
        ~ "; it must be an integer: +1 (or any value >= 0) for an upsert, -1 for a delete.") }}
  {%- endif -%}
  {%- for column in cfg.merge.keys() if column not in by_name -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `merge` names column `" ~ column ~ "`, which the model's SELECT "
        ~ "does not return; it returns " ~ returned ~ ".") }}
  {%- endfor -%}
  {%- if cfg.unavailable_column -%}
    {%- set u = cfg.unavailable_column -%}
    {%- if u not in by_name -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: `unavailable_column` `" ~ u ~ "` is not returned by the model's "
          ~ "SELECT; it returns " ~ returned ~ ".") }}
    {%- endif -%}
    {%- if not modules.re.match('^Array[(](LowCardinality[(])?(Nullable[(])?String[)]+$', by_name[u]) -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: `unavailable_column` `" ~ u ~ "` has type " ~ by_name[u]
          ~ "; it must be an Array(String) of column names. Cast it in the SELECT, e.g. `cast(" ~ u
          ~ ", 'Array(String)') as " ~ u ~ "`.") }}
    {%- endif -%}
  {%- endif -%}
  {%- if cfg.watermark and cfg.watermark not in by_name -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `watermark` column `" ~ cfg.watermark
        ~ "` is not returned by the model's SELECT; it returns " ~ returned ~ ".") }}
  {%- endif -%}
  {%- set columns = [] -%}
  {%- for c in select_columns -%}
    {%- do columns.append({'name': c.name, 'data_type': 'Int8' if c.name == cfg.sign else c.data_type}) -%}
  {%- endfor -%}
  {%- if cfg.sign not in by_name -%}
    {%- do columns.append({'name': cfg.sign, 'data_type': 'Int8'}) -%}
  {%- endif -%}
  {{ return(columns) }}
{% endmacro %}


{% macro _is_version_type(data_type) %}
  {{ return(modules.re.match("^(U?Int(8|16|32|64|128|256)|Date|Date32|DateTime(\\('[^']*'\\))?|DateTime64\\(.*\\))$",
      data_type) is not none) }}
{% endmacro %}


{% macro _data_columns(cfg, columns) %}
  {%- set data = [] -%}
  {%- for c in columns if c.name not in cfg.key_columns and c.name not in [cfg.version, cfg.sign] -%}
    {%- do data.append(c.name) -%}
  {%- endfor -%}
  {{ return(data) }}
{% endmacro %}


{% macro _column_list(names) %}
  {{ return(vcmt._quote(names, each=true) | join(', ')) }}
{% endmacro %}


{#- `a` or `(a, b)`: the form IN and tuple comparisons need for the key. -#}
{% macro _key_tuple(keys) %}
  {%- set cols = vcmt._column_list(keys) -%}
  {{ return('(' ~ cols ~ ')' if keys | length > 1 else cols) }}
{% endmacro %}


{#- How a lookup of the batch's keys in the target names a key, as
    {left, select}: the left side of its IN and the select list of its
    subquery. Usually the key itself. When the sorting key puts expressions
    of the key before or between the key's columns (`order_by=['id % 20',
    'id']` beside `partition_by='id % 20'`), the lookup is on that whole
    prefix of the sorting key, so the primary key prunes each partition's
    granules by it: `id in (keys)` alone tests every partition's granules
    against every key (docs/design.md#what-the-transform-writes).

    The rows found must be the same, so an expression joins the prefix only
    if the engine's parse of it shows nothing but key columns, literals
    other than NULL, and functions of `_lookup_functions` (no alias: one
    would name a column of the lookup's query): its value is then fixed by
    the key alone, whatever the settings, time zone or tables around it, and
    equal keys give equal tuples. Functions of `_calendar_functions` count
    too when every column the expression reads has a type whose dates no
    session setting changes (`_calendar_type`). The prefix stops before the
    first other expression, and a model that allows a nullable sorting key
    keeps the plain lookup. One EXPLAIN AST, only for models whose sorting
    key has such an expression, once per run and sorting key (`cfg._run`).
    `columns`: the model's, for their types. -#}
{% macro _lookup_key(cfg, columns) %}
  {%- set memo = vcmt._run_state(cfg).setdefault('lookup_key', {}) -%}
  {%- set memo_key = tojson([cfg.order_by, cfg.key_columns, vcmt._types_by_name(columns), (cfg.settings or {}).get(
      'allow_nullable_key') | string]) -%}
  {%- if memo_key not in memo -%}{%- do memo.update({memo_key: vcmt._lookup_key_parsed(cfg, columns)}) -%}{%- endif -%}
  {{ return(memo[memo_key]) }}
{% endmacro %}

{% macro _lookup_key_parsed(cfg, columns) %}
  {%- set plain = {'left': vcmt._key_tuple(cfg.key_columns), 'select': vcmt._column_list(cfg.key_columns),
      'expressions': 0} -%}
  {%- set written = [] -%}
  {%- for item in cfg.order_by -%}{%- do written.append(vcmt._unquote(item | trim)) -%}{%- endfor -%}
  {%- if written | reject('in', cfg.key_columns) | list | length == 0 -%}{{ return(plain) }}{%- endif -%}
  {%- set prefix = [] -%}
  {%- set ns = namespace(missing=cfg.key_columns | list, cut=false) -%}
  {%- for item in (vcmt._sql_list_items(cfg.order_by, vcmt._run_state(cfg)) or []) if ns.missing -%}
    {%- set name = vcmt._unquote(item | trim) -%}
    {%- do prefix.append({'key': name if name in cfg.key_columns else none, 'sql': item | trim}) -%}
    {%- set ns.missing = ns.missing | reject('equalto', name) | list -%}
  {%- endfor -%}
  {%- set exprs = prefix | selectattr('key', 'none') | list -%}
  {%- if not exprs or (cfg.settings or {}).get('allow_nullable_key') not in [none, 0, '0', false] -%}
    {{ return(plain) }}
  {%- endif -%}
  {%- set wrapped = [] -%}
  {%- for e in exprs -%}{%- do wrapped.append('(' ~ vcmt._user_sql(e.sql) ~ ')') -%}{%- endfor -%}
  {%- set select_list = vcmt._explain_ast('select ' ~ wrapped | join(', '),
      vcmt._run_state(cfg)).children[0].children[0].children[0]
      .children[0] -%}
  {%- set allowed = vcmt._lookup_functions() -%}
  {%- set calendar = vcmt._calendar_functions() -%}
  {%- set types = vcmt._types_by_name(columns) -%}
  {%- set items = [] -%}
  {%- for p in prefix if not ns.cut -%}
    {%- if p.key is not none -%}
      {%- do items.append({'key': p.key, 'sql': vcmt._quote(p.key)}) -%}
    {%- else -%}
      {%- set nodes = [] -%}
      {%- do vcmt._ast_find(select_list.children[exprs.index(p)], none, none, nodes) -%}
      {%- for node in nodes if not ns.cut -%}
        {%- set ns.cut = node.alias is not none
            or (node.kind == 'Function' and node.name | lower not in allowed + calendar)
            or (node.kind == 'Identifier' and node.name not in cfg.key_columns)
            or (node.kind == 'Literal' and node.name == 'NULL')
            or node.kind not in ['Function', 'ExpressionList', 'Identifier', 'Literal'] -%}
      {%- endfor -%}
      {%- if nodes | selectattr('kind', 'equalto', 'Function') | map(attribute='name') | map('lower')
          | select('in', calendar) | list -%}
        {%- for node in nodes | selectattr('kind', 'equalto', 'Identifier') if not ns.cut -%}
          {%- set ns.cut = not vcmt._calendar_type(types.get(node.name, '')) -%}
        {%- endfor -%}
      {%- endif -%}
      {%- if not ns.cut -%}{%- do items.append({'key': none, 'sql': wrapped[exprs.index(p)]}) -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if not items | selectattr('key', 'none') | list -%}{{ return(plain) }}{%- endif -%}
  {%- for k in cfg.key_columns if k not in items | map(attribute='key') | list -%}
    {%- do items.append({'key': k, 'sql': vcmt._quote(k)}) -%}
  {%- endfor -%}
  {%- set sql = items | map(attribute='sql') | join(', ') -%}
  {{ return({'left': '(' ~ sql ~ ')', 'select': sql, 'expressions': items | selectattr('key', 'none') | list
      | length}) }}
{% endmacro %}


{#- A model that sets no `order_by` (nor `primary_key`) and is partitioned
    by expressions of its key (`partition_by='id % 20'`, `toYYYYMM(day)` of
    a `Date` key column): its sorting key is `partition_by`'s items, then
    the key columns. Within a part a partition expression has one value, so
    the rows sit in the same order as when sorted by the key alone; but
    the lookups then name that prefix (_lookup_key), and a batch reads only
    its keys' granules instead of one granule per partition for each key
    (docs/design.md#what-the-transform-writes). Only if every partition item
    is a key column (as the engine parses it: `(id)` is `id`) or reads one
    and is an expression _lookup_key takes whole, and no two items are the
    same. An existing table (`stored`: the relation whose sorting key
    decides) keeps the sorting key it was created with: this default only
    when its stored sorting key starts with it (a table from before keeps
    the key alone until a --full-refresh). Returns `cfg` with `order_by` set
    to that default or to the key alone; a set `order_by` is left alone. -#}
{% macro _sorting_key_default(cfg, columns, stored=none) %}
  {%- if cfg.order_by_set or cfg.primary_key -%}{{ return(cfg) }}{%- endif -%}
  {%- set keyed = [] -%}
  {%- for k in cfg.key_columns -%}{%- do keyed.append(vcmt._quote(k)) -%}{%- endfor -%}
  {%- set plain = {} -%}{%- do plain.update(cfg) -%}{%- do plain.update({'order_by': keyed}) -%}
  {%- set parted = (vcmt._sql_list_items(cfg.partition_by, vcmt._run_state(cfg)) if cfg.partition_by else []) or [] -%}
  {%- if not parted -%}{{ return(plain) }}{%- endif -%}
  {%- set wrapped = [] -%}
  {%- for p in parted -%}{%- do wrapped.append('(' ~ vcmt._user_sql(p | trim) ~ ')') -%}{%- endfor -%}
  {%- set parsed = vcmt._explain_ast('select ' ~ wrapped | join(', '),
      vcmt._run_state(cfg)).children[0].children[0].children[0]
      .children[0].children -%}
  {%- set texts = [] -%}
  {%- for node in parsed -%}{%- do texts.append(vcmt._ast_text(node)) -%}{%- endfor -%}
  {%- if texts | unique | list | length != texts | length -%}{{ return(plain) }}{%- endif -%}
  {%- set items = [] -%}
  {%- set ns = namespace(expressions=0, keyless=false) -%}
  {%- for p in parted -%}
    {%- set node = parsed[loop.index0] -%}
    {%- if node.kind == 'Identifier' and node.name in cfg.key_columns -%}
      {%- if vcmt._quote(node.name) not in items -%}{%- do items.append(vcmt._quote(node.name)) -%}{%- endif -%}
    {%- else -%}
      {%- set nodes = [] -%}
      {%- do vcmt._ast_find(node, 'Identifier', none, nodes) -%}
      {%- set ns.keyless = ns.keyless or not nodes | map(attribute='name') | select('in', cfg.key_columns) | list -%}
      {%- do items.append(p | trim) -%}{%- set ns.expressions = ns.expressions + 1 -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if ns.keyless -%}{{ return(plain) }}{%- endif -%}
  {%- for k in keyed if k not in items -%}{%- do items.append(k) -%}{%- endfor -%}
  {%- set trial = {} -%}{%- do trial.update(cfg) -%}{%- do trial.update({'order_by': items}) -%}
  {%- if stored is not none -%}
    {{ return(trial if vcmt._stored_sorting_key_starts(stored, items) else plain) }}
  {%- endif -%}
  {{ return(trial if vcmt._lookup_key(trial, columns).expressions == ns.expressions else plain) }}
{% endmacro %}


{#- The functions an expression of a key lookup may use (_lookup_key), by the
    name the engine's parse gives them, lower case: arithmetic, bits, hashes,
    integer conversions and string slices, whose value depends on their
    arguments alone. Date and time functions are not among them: the engine
    computes them in a session's time zone for a lookup and in the server's
    for a merge, so the two could disagree (_calendar_functions has those
    that are safe on some types). -#}
{% macro _lookup_functions() %}
  {%- set names = ['plus', 'minus', 'multiply', 'negate', 'abs', 'intdiv', 'intdivorzero', 'modulo', 'moduloorzero',
      'positivemodulo', 'pmod', 'bitand', 'bitor', 'bitxor', 'bitnot', 'bitshiftleft', 'bitshiftright',
      'cityhash64', 'siphash64', 'xxhash32', 'xxhash64', 'xxh3', 'murmurhash2_32', 'murmurhash2_64',
      'murmurhash3_32', 'murmurhash3_64', 'farmhash64', 'farmfingerprint64', 'inthash32', 'inthash64', 'javahash',
      'crc32', 'lower', 'upper', 'substring', 'substr', 'left', 'right', 'length', 'tuple'] -%}
  {%- for bits in [8, 16, 32, 64, 128, 256] -%}
    {%- do names.extend(['toint' ~ bits, 'touint' ~ bits]) -%}
  {%- endfor -%}
  {{ return(names) }}
{% endmacro %}


{#- Calendar functions a key lookup may use (_lookup_key) on columns of a
    `_calendar_type`, lower case: each gives a day or a number of one, so
    it reads the date and nothing else. Excluded: those that give a time
    (toStartOfDay, toStartOfHour...), whose value is an instant in some time
    zone, and those that take a week mode from the settings. -#}
{% macro _calendar_functions() %}
  {{ return(['toyyyymm', 'toyyyymmdd', 'toyear', 'toquarter', 'tomonth', 'todayofmonth', 'todayofyear',
             'tostartofmonth', 'tostartofquarter', 'tostartofyear', 'tomonday', 'toisoyear', 'toisoweek',
             'torelativeyearnum', 'torelativequarternum', 'torelativemonthnum', 'torelativedaynum', 'todate',
             'todate32']) }}
{% endmacro %}

{#- Whether a column of type `data_type` holds a date that no session
    setting changes the calendar functions of: a Date, or a DateTime with
    its own time zone (`DateTime('UTC')`). A DateTime without one is read in
    the session's time zone, which a merge and a lookup need not share; on a
    Date32 or a DateTime64, `enable_extended_results_for_datetime_functions`
    changes what toStartOfMonth and the like give outside Date's range. -#}
{% macro _calendar_type(data_type) %}
  {%- set t = data_type | trim -%}
  {{ return(t == 'Date' or (t.startswith('DateTime(') and "'" in t)) }}
{% endmacro %}


{#- Every name vcmt introduces inside its SQL starts with this prefix. -#}
{% macro _reserved_prefix() %}
  {{ return('_vcmt_') }}
{% endmacro %}


{% macro _check_reserved_names(names, caller_name) %}
  {%- for name in names if name.startswith(vcmt._reserved_prefix()) -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": column `" ~ name ~ "` starts with `" ~ vcmt._reserved_prefix()
        ~ "`, which vcmt reserves for its own columns and aliases; rename it in the SELECT (e.g. `" ~ name ~ " as "
        ~ name[vcmt._reserved_prefix() | length:] ~ "`).") }}
  {%- endfor -%}
{% endmacro %}


{#- {name: data_type} of a column list: the one name -> type map. -#}
{% macro _types_by_name(columns) %}
  {%- set types = {} -%}
  {%- for c in columns -%}{%- do types.update({c.name: c.data_type}) -%}{%- endfor -%}
  {{ return(types) }}
{% endmacro %}
