{#- Aggregating projections on a collapsing table stay exact only for sums
    weighted by the sign column: a cancel row (-1) subtracts exactly what its
    state row (+1) added. count/min/max/avg/uniq/any... see both rows, or keep
    values of cancelled states, so they are rejected before any DDL. -#}
{% macro _validate_projection(projection, sign) %}
  {%- set re = modules.re -%}
  {%- if projection is not mapping or 'name' not in projection or 'query' not in projection -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: each entry of `projections` must be a dict with `name` and `query`, e.g. {'name': 'by_status', 'query': 'select status, sum(sign), sum(amount * sign) group by status'}; got `" ~ projection ~ "`.") }}
  {%- endif -%}
  {%- set name = projection['name'] -%}
  {%- if not re.match('^[A-Za-z_][A-Za-z0-9_]*$', name) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: projection name `" ~ name ~ "` must be a plain identifier (letters, digits, underscore).") }}
  {%- endif -%}
  {%- set query = projection['query'] -%}
  {%- if not re.search('(?i)\\bgroup\\s+by\\b', query) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: projection `" ~ name ~ "` must be an aggregating projection (select ... group by ...): a normal projection would keep cancel rows and is not needed for correctness.") }}
  {%- endif -%}
  {%- set why = "Under collapsing only sum(" ~ sign ~ ") and sums of sign-weighted expressions such as sum(amount * " ~ sign ~ ") stay exact, because a cancel row subtracts exactly what its state row added; count(), min, max, avg, uniq and similar aggregates see both rows or keep values of cancelled states. Use sum(" ~ sign ~ ") for counts and divide sums by sum(" ~ sign ~ ") for averages at query time." -%}
  {%- for call in re.finditer('([A-Za-z_][A-Za-z0-9_]*)\\s*\\(', query) -%}
    {%- set fn = call.group(1) -%}
    {%- if fn | lower == 'sum' -%}
      {%- set arg = vcmt._call_argument(query, call.end()) -%}
      {%- if not vcmt._is_sign_weighted(arg, sign) -%}
        {{ exceptions.raise_compiler_error("vcmt_upsert: projection `" ~ name ~ "` uses `sum(" ~ arg ~ ")`, which is not weighted by `" ~ sign ~ "`. " ~ why) }}
      {%- endif -%}
    {%- elif vcmt._is_aggregate_function(fn) -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: projection `" ~ name ~ "` uses the aggregate `" ~ fn ~ "()`, which collapsing cannot keep correct. " ~ why) }}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}


{% macro _is_aggregate_function(fn) %}
  {%- set f = fn | lower -%}
  {%- set plain = ['count', 'min', 'max', 'avg', 'any', 'anylast', 'anyheavy', 'argmin', 'argmax',
                   'uniq', 'uniqexact', 'uniqcombined', 'uniqcombined64', 'uniqhll12', 'uniqtheta',
                   'grouparray', 'groupuniqarray', 'groupbitand', 'groupbitor', 'groupbitxor',
                   'median', 'topk', 'topkweighted', 'sumwithoverflow', 'sumkahan', 'sumcount',
                   'summap', 'minmap', 'maxmap', 'avgweighted', 'entropy', 'first_value', 'last_value',
                   'stddevpop', 'stddevsamp', 'varpop', 'varsamp', 'covarpop', 'covarsamp', 'corr',
                   'skewpop', 'skewsamp', 'kurtpop', 'kurtsamp', 'simplelinearregression'] -%}
  {%- set combinators = ['if', 'array', 'map', 'state', 'merge', 'ornull', 'ordefault', 'resample', 'distinct', 'foreach', 'simplestate'] -%}
  {%- if f in plain or f.startswith('quantile') or f.startswith('median') or f.startswith('uniq') or f.startswith('grouparray') -%}
    {{ return(true) }}
  {%- endif -%}
  {%- for c in combinators -%}
    {%- if f.endswith(c) and f[:-(c | length)] in plain + ['sum'] -%}{{ return(true) }}{%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}


{#- The text between the parenthesis opened just before `start` and its match. -#}
{% macro _call_argument(text, start) %}
  {%- set ns = namespace(depth=1, end=none) -%}
  {%- for i in range(start, text | length) if ns.end is none -%}
    {%- if text[i] == '(' -%}{%- set ns.depth = ns.depth + 1 -%}
    {%- elif text[i] == ')' -%}
      {%- set ns.depth = ns.depth - 1 -%}
      {%- if ns.depth == 0 -%}{%- set ns.end = i -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(text[start:ns.end] | trim if ns.end is not none else text[start:] | trim) }}
{% endmacro %}


{#- True when `expr` is the sign column itself, or a product in which the sign
    column is a top-level factor (so it multiplies the whole expression). -#}
{% macro _is_sign_weighted(expr, sign) %}
  {%- set normalized = expr | replace('`', '') | replace('"', '') | trim -%}
  {%- set ns = namespace(depth=0, factors=[], current='', ok=true) -%}
  {%- for ch in normalized -%}
    {%- if ch == '(' -%}{%- set ns.depth = ns.depth + 1 -%}{%- set ns.current = ns.current ~ ch -%}
    {%- elif ch == ')' -%}{%- set ns.depth = ns.depth - 1 -%}{%- set ns.current = ns.current ~ ch -%}
    {%- elif ns.depth == 0 and ch == '*' -%}{%- do ns.factors.append(ns.current | trim) -%}{%- set ns.current = '' -%}
    {%- elif ns.depth == 0 and ch in '+-/%<>=|' -%}{%- set ns.ok = false -%}{%- set ns.current = ns.current ~ ch -%}
    {%- else -%}{%- set ns.current = ns.current ~ ch -%}
    {%- endif -%}
  {%- endfor -%}
  {%- do ns.factors.append(ns.current | trim) -%}
  {%- set bare = [] -%}
  {%- for f in ns.factors -%}{%- do bare.append(f | replace('(', '') | replace(')', '') | trim) -%}{%- endfor -%}
  {{ return(ns.ok and sign in bare) }}
{% endmacro %}


{% macro _projection_clauses(projections) %}
  {%- set clauses = [] -%}
  {%- for p in projections -%}
    {%- do clauses.append('projection ' ~ vcmt._quote(p['name']) ~ ' (' ~ vcmt._user_sql(p['query']) ~ ')') -%}
  {%- endfor -%}
  {{ return(clauses) }}
{% endmacro %}
