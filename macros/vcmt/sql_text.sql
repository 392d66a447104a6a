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
