{#- SQL text helpers: the one place that turns values and user-written SQL
    into text vcmt splices into its statements. -#}

{#- A ClickHouse string literal: backslashes and quotes escaped, so any value
    (a watermark, a view's stored query, a name) reads back unchanged.
    (dbt.string_literal escapes neither.) -#}
{% macro _sql_string(value) %}
  {{ return("'" ~ (value | string) | replace('\\', '\\\\') | replace("'", "\\'") ~ "'") }}
{% endmacro %}


{#- User-written SQL (a model's SELECT, a merge expression, a partition key)
    followed by a line break, so a trailing `-- comment` ends there instead of
    swallowing the text vcmt puts after it. -#}
{% macro _user_sql(text) %}
  {{ return((text | string) ~ '\n') }}
{% endmacro %}


{#- A ClickHouse identifier in backticks, with backslashes and backticks
    escaped, so any column name a user may choose reads back unchanged.
    (adapter.quote wraps the name in double quotes and escapes nothing.) -#}
{% macro _quote(name) %}
  {{ return('`' ~ (name | string) | replace('\\', '\\\\') | replace('`', '\\`') ~ '`') }}
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
    inside parentheses, brackets or quotes (with backslash escapes) belong to
    an expression. The list ends at the first bracket that closes one opened
    before `text`, so `_split_top_level(text[i:]) | join(',')` is the
    argument text of a call whose parenthesis opens just before `i`. -#}
{% macro _split_top_level(text) %}
  {%- set parts = [] -%}
  {%- set ns = namespace(depth=0, quote=none, escaped=false, current='', done=false) -%}
  {%- for ch in text if not ns.done -%}
    {%- if ns.quote is not none -%}
      {%- if ns.escaped -%}{%- set ns.escaped = false -%}
      {%- elif ch == '\\' -%}{%- set ns.escaped = true -%}
      {%- elif ch == ns.quote -%}{%- set ns.quote = none -%}
      {%- endif -%}
    {%- elif ch in ["'", '"', '`'] -%}{%- set ns.quote = ch -%}
    {%- elif ch in '([' -%}{%- set ns.depth = ns.depth + 1 -%}
    {%- elif ch in ')]' and ns.depth == 0 -%}{%- set ns.done = true -%}
    {%- elif ch in ')]' -%}{%- set ns.depth = ns.depth - 1 -%}
    {%- endif -%}
    {%- if ns.done -%}
    {%- elif ch == ',' and ns.depth == 0 and ns.quote is none -%}
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
