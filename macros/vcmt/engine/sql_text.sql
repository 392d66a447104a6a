{#- SQL text helpers: the one place that turns values and user-written SQL
    into text vcmt splices into its statements. -#}

{#- A ClickHouse string literal: backslashes and quotes escaped, so any value
    (a watermark, a view's stored query, a name) reads back unchanged.
    (dbt.string_literal escapes neither.) With `each`, `value` is a list and
    the list of their literals is returned: one macro call for all of them
    (each call costs dbt a copy of its context; a run quotes a few hundred). -#}
{% macro _sql_string(value, each=false) %}
  {%- set out = [] -%}
  {%- for v in (value if each else [value]) -%}
    {%- do out.append("'" ~ (v | string) | replace('\\', '\\\\') | replace("'", "\\'") ~ "'") -%}
  {%- endfor -%}
  {{ return(out if each else out[0]) }}
{% endmacro %}


{#- User-written SQL (a model's SELECT, a merge expression, a partition key)
    followed by a line break, so a trailing `-- comment` ends there instead of
    swallowing the text vcmt puts after it. -#}
{% macro _user_sql(text) %}
  {{ return((text | string) ~ '\n') }}
{% endmacro %}


{#- A config option that is one SQL expression or a list of them
    (`order_by`, `partition_by`, `primary_key`) as the text of a list: each
    item ends its own line, so a `-- comment` in one item never swallows the
    items after it. -#}
{% macro _user_sql_list(value) %}
  {%- set items = [] -%}
  {%- for item in ([value] if value is string else value) -%}{%- do items.append(vcmt._user_sql(item)) -%}{%- endfor -%}
  {{ return(items | join(', ')) }}
{% endmacro %}


{#- The expressions of such an option, as the engine reads the text the DDL
    gives it (_user_sql_list) and formats it back: comments and here-docs
    gone, quoting canonical, so _split_top_level splits it as the engine
    does. None if the engine cannot parse it (check.sql then says so, naming
    the option). -#}
{% macro _sql_list_items(value, memo=none) %}
  {%- set sql = 'select formatQuerySingleLineOrNull(' ~ vcmt._sql_string('select ' ~ vcmt._user_sql_list(value))
      ~ ')' -%}
  {%- set memo = {} if memo is none else memo.setdefault('formatted', {}) -%}
  {%- if sql not in memo -%}{%- do memo.update({sql: run_query(sql).rows[0][0]}) -%}{%- endif -%}
  {{ return(vcmt._formatted_list_items(memo[sql])) }}
{% endmacro %}

{#- The same from `select <items>` as formatQuerySingleLineOrNull gave it (none: none). -#}
{% macro _formatted_list_items(formatted) %}
  {%- if formatted is none -%}{{ return(none) }}{%- endif -%}
  {{ return(vcmt._split_top_level(formatted[('SELECT ' | length):])) }}
{% endmacro %}


{#- A ClickHouse identifier in backticks, with backslashes and backticks
    escaped, so any column name a user may choose reads back unchanged.
    (adapter.quote wraps the name in double quotes and escapes nothing.)
    With `each`, `name` is a list, quoted in one call (as _sql_string). -#}
{% macro _quote(name, each=false) %}
  {%- set out = [] -%}
  {%- for n in (name if each else [name]) -%}
    {%- do out.append('`' ~ (n | string) | replace('\\', '\\\\') | replace('`', '\\`') ~ '`') -%}
  {%- endfor -%}
  {{ return(out if each else out[0]) }}
{% endmacro %}


{#- The name a quoted identifier stands for (`a\`b` -> a`b, "x" -> x);
    anything else is returned as written. -#}
{% macro _unquote(text) %}
  {%- if text | length > 1 and text[0] in ['`', '"'] and text[-1] == text[0] -%}
    {{ return(modules.re.sub('\\\\(.)', '\\1', text[1:-1])) }}
  {%- endif -%}
  {{ return(text) }}
{% endmacro %}


{#- The items of a comma-separated SQL list, split at top level only: commas
    inside parentheses, brackets, quotes (with backslash escapes) or comments
    (`--`, `//`, `# `, `#!` to the end of the line; `/* */`, nested, as the
    engine reads them) belong to an expression, and an item keeps its
    comment. Here-docs (`$$...$$`) are not known: for a config option, split
    the engine's own formatting of it (_sql_list_items). The
    list ends at the first bracket that closes one opened before `text`, so
    `_split_top_level(text[i:]) | join(',')` is the argument text of a call
    whose parenthesis opens just before `i`. -#}
{% macro _split_top_level(text) %}
  {%- set parts = [] -%}
  {%- set ns = namespace(depth=0, quote=none, escaped=false, current='', done=false, line=false, block=0, prev='') -%}
  {%- for ch in text if not ns.done -%}
    {%- set prev = ns.prev -%}
    {%- set ns.prev = ch -%}
    {%- if ns.line -%}
      {%- if ch == '\n' -%}{%- set ns.line = false -%}{%- endif -%}
    {%- elif ns.block > 0 -%}
      {%- if prev == '*' and ch == '/' -%}{%- set ns.block = ns.block - 1 -%}{%- set ns.prev = '' -%}
      {%- elif prev == '/' and ch == '*' -%}{%- set ns.block = ns.block + 1 -%}{%- set ns.prev = '' -%}
      {%- endif -%}
    {%- elif ns.quote is not none -%}
      {%- set ns.prev = '' -%}
      {%- if ns.escaped -%}{%- set ns.escaped = false -%}
      {%- elif ch == '\\' -%}{%- set ns.escaped = true -%}
      {%- elif ch == ns.quote -%}{%- set ns.quote = none -%}
      {%- endif -%}
    {%- elif (prev == '-' and ch == '-') or (prev == '/' and ch == '/') or (prev == '#' and ch in ' !') -%}
      {%- set ns.line = true -%}
    {%- elif prev == '/' and ch == '*' -%}{%- set ns.block = 1 -%}{%- set ns.prev = '' -%}
    {%- elif ch in ["'", '"', '`'] -%}{%- set ns.quote = ch -%}
    {%- elif ch in '([' -%}{%- set ns.depth = ns.depth + 1 -%}
    {%- elif ch in ')]' and ns.depth == 0 -%}{%- set ns.done = true -%}
    {%- elif ch in ')]' -%}{%- set ns.depth = ns.depth - 1 -%}
    {%- endif -%}
    {%- if ns.done -%}
    {%- elif ch == ',' and ns.depth == 0 and ns.quote is none and not ns.line and ns.block == 0 -%}
      {%- do parts.append(ns.current) -%}{%- set ns.current = '' -%}
    {%- else -%}
      {%- set ns.current = ns.current ~ ch -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if ns.current | trim != '' -%}{%- do parts.append(ns.current) -%}{%- endif -%}
  {{ return(parts) }}
{% endmacro %}


{#- Whether two SQL texts differ once both went through the engine's
    formatter: spacing, case of keywords and optional quoting never count. -#}
{% macro _sql_differs(a, b) %}
  {%- set rows = run_query("select formatQuery(" ~ vcmt._sql_string(a) ~ ") != formatQuery(" ~ vcmt._sql_string(b)
      ~ ")").columns[0].values() -%}
  {{ return(rows[0] | int == 1) }}
{% endmacro %}


{#- Whether a table's stored CREATE (`stored`) has the column `name`. -#}
{% macro _stored_has_column(stored, name) %}
  {{ return(modules.re.search('[(,]\\s*`?' ~ modules.re.escape(name) ~ '`?\\s', stored) is not none) }}
{% endmacro %}
