{#- Aggregating projections on a collapsing table.

    A projection aggregates each part on its own and merges those partial
    results, so it is exact only when the +1 row of a state and the -1 row
    that later cancels it (an exact copy of the state row, in another part)
    contribute values that cancel in the merged result. What is accepted,
    checked on the engine's own parse tree (_explain_ast):

    - the only aggregate is `sum(<arg>)`, written as a whole select item
      (an alias is fine), where <arg> is the sign column itself, or a product
      `<expr> * sign` / `sign * <expr>` in which the sign column is one
      top-level factor and the other factors never mention the sign column
      and hold no aggregate. Then the cancel row adds exactly minus what its
      state row added (<expr> is computed from copied columns), so the pair
      sums to 0 in any part and any merge order;
    - every other aggregate, found through system.functions.is_aggregate
      with its combinators (count, min, uniq, groupBitmap, sumIf, sumDistinct,
      sum(...) over (), ...), is refused: a cancel row is one more row to
      them, or they keep values of cancelled states. sumIf(x, c) is written
      sum(if(c, x, 0) * sign);
    - the sign column appears nowhere else: not in GROUP BY keys, not in
      WHERE, not twice in one product (sum(x * sign * sign) counts the
      cancel as +1), not inside the other factor (sum(sign * if(sign > 0,
      x, -x))), not negated (-sign: write -1 * sign). A filter or key on
      sign separates a cancel from its state row;
    - WHERE and GROUP BY on other columns are exact: the cancel row copies
      every column of its state row, so both rows pass or fail the filter
      together and land in the same group;
    - no function whose result may differ between the two rows
      (system.functions.deterministic = 0: now(), rand(), ...), no
      subquery, no WITH, no window, no expression over aggregates
      (sum(x) * sum(sign) is merged per part, not recomputed): compute
      ratios at query time. -#}
{% macro _validate_projection(projection, sign) %}
  {%- set re = modules.re -%}
  {%- if projection is not mapping or 'name' not in projection or 'query' not in projection -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: each entry of `projections` must be a dict with `name` and "
        ~ "`query`, e.g. {'name': 'by_status', 'query': 'select status, sum(sign), sum(amount * sign) "
        ~ "group by status'}; got `" ~ projection ~ "`.") }}
  {%- endif -%}
  {%- set unknown = projection.keys() | reject('in', ['name', 'query']) | list -%}
  {%- if unknown -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: projection `" ~ projection['name'] ~ "` has unknown key(s) "
        ~ unknown ~ "; a projection is {'name': ..., 'query': ...} and nothing else. Remove them (a projection's "
        ~ "settings live in the table's `settings`).") }}
  {%- endif -%}
  {%- set name = projection['name'] -%}
  {%- if not re.match('^[A-Za-z_][A-Za-z0-9_]*$', name) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: projection name `" ~ name ~ "` must be a plain identifier "
        ~ "(letters, digits, underscore).") }}
  {%- endif -%}
  {%- set query = projection['query'] -%}
  {%- if not re.search('(?i)\\bgroup\\s+by\\b', query) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: projection `" ~ name ~ "` must be an aggregating projection "
        ~ "(select ... group by ...): a normal projection would keep cancel rows and is not needed for correctness.") }}
  {%- endif -%}
  {%- if not re.match('(?is)^\\s*select\\b', query) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: projection `" ~ name ~ "` must start with SELECT (no WITH); got `"
        ~ query ~ "`. Write the expressions inline.") }}
  {%- endif -%}
{% endmacro %}


{#- The engine-backed half of the projection check (see _validate_projection):
    needs a connection, so the materialization calls it before any DDL, once
    the syntax check passed. One read (engine/catalog.sql
    `_projection_parses`): each projection's parse tree, and the kinds of the
    functions its text names. -#}
{% macro _check_projections(cfg) %}
  {%- if not cfg.projections or not execute -%}{{ return(none) }}{%- endif -%}
  {%- set parsed = vcmt._projection_parses(cfg.projections) -%}
  {%- for p in cfg.projections -%}
    {%- do vcmt._check_projection_exact(p, cfg.sign, parsed.kinds, parsed.trees[loop.index0]) -%}
  {%- endfor -%}
{% endmacro %}


{#- Refuses a projection's query (a `vcmt_aggregate` model's SELECT too,
    with its own message `head`) that is not provably exact; returns its
    SELECT items (parse tree nodes). `tree`: the query's parse tree, `fns`
    the kinds of its functions (engine/catalog.sql `_projection_parses`). -#}
{% macro _check_projection_exact(projection, sign, fns, tree, head=none) %}
  {%- set name = projection['name'] -%}
  {%- set query = projection['query'] -%}
  {%- set head = head or "vcmt_upsert: `projections`: projection `" ~ name ~ "` " -%}
  {#- The engine's own parser (_explain_ast). A projection's query parses as a
      SELECT without FROM; that it also parses as a projection was checked
      first (_check_syntax). -#}
  {%- set selects = tree.children[0].children[0].children -%}
  {%- if selects | length != 1 or selects[0].kind != 'SelectQuery' -%}
    {{ exceptions.raise_compiler_error(head ~ "must be one `select ... group by ...` query; got `" ~ query ~ "`.") }}
  {%- endif -%}
  {%- set sums = [] -%}
  {%- do vcmt._ast_find(tree, 'Function', 'sum', sums) -%}
  {%- set texts = vcmt._sum_arguments(query) -%}
  {%- set ctx = {'head': head, 'sign': sign, 'fns': fns, 'query': query,
                 'sum_texts': texts if texts | length == sums | length else [], 'sums_seen': []} -%}
  {#- EXPLAIN in a subquery shows a SELECT without FROM as reading system.one;
      the projection grammar has no FROM (checked by _check_syntax). -#}
  {%- set clauses = selects[0].children | rejectattr('kind', 'equalto', 'TablesInSelectQuery') | list -%}
  {#- The first list is the SELECT list: the only place aggregates may be, as whole items. -#}
  {%- for item in clauses[0].children -%}
    {%- do vcmt._ast_check(item, ctx, true) -%}
  {%- endfor -%}
  {%- for clause in clauses[1:] -%}
    {%- do vcmt._ast_check(clause, ctx, false) -%}
  {%- endfor -%}
  {{ return(clauses[0].children) }}
{% endmacro %}


{#- Walk one node of a projection's parse tree; raise on anything that is not
    provably exact (rules in the comment of _validate_projection). `top` is
    true for a whole item of the SELECT list. -#}
{% macro _ast_check(node, ctx, top) %}
  {%- set sign = ctx.sign -%}
  {%- set head = ctx.head -%}
  {%- set got = "; got `" ~ ctx.query ~ "`." -%}
  {%- set why = " Under collapsing only sum(" ~ sign ~ ") and sums of sign-weighted expressions such as sum(amount * "
      ~ sign ~ ") stay exact, because a cancel row subtracts exactly what its state row added; count(), min, max, avg, "
      ~ "uniq and similar aggregates see both rows or keep values of cancelled states. Use sum(" ~ sign
      ~ ") for counts and divide sums by sum(" ~ sign ~ ") for averages at query time." -%}
  {%- if node.kind in ['Subquery', 'SelectWithUnionQuery', 'SelectQuery', 'WindowDefinition', 'TablesInSelectQuery']
        or node.kind.endswith('Asterisk') or 'Matcher' in node.kind -%}
    {{ exceptions.raise_compiler_error(head ~ "uses a subquery, a window or `*` (" ~ node.kind
        ~ "); only plain expressions of the row's columns can be checked to stay exact under collapsing" ~ got) }}
  {%- endif -%}
  {%- if node.alias == sign or (node.kind == 'Identifier' and vcmt._names_sign(node.name, sign)) -%}
    {{ exceptions.raise_compiler_error(head ~ "uses `" ~ sign ~ "` outside a sign-weighted sum (in a GROUP BY key, "
        ~ "a WHERE, an alias or another expression). A cancel row differs from its state row only in `" ~ sign
        ~ "`, so a key, filter or expression on it separates the pair; use it only as sum(" ~ sign
        ~ ") or sum(<expr> * " ~ sign ~ "), e.g. -1 * " ~ sign ~ " instead of -" ~ sign ~ got) }}
  {%- endif -%}
  {%- if node.kind == 'Function' and vcmt._is_aggregate(node.name, ctx.fns) -%}
    {%- set is_sum = node.name | lower == 'sum' -%}
    {%- if is_sum -%}{%- do ctx.sums_seen.append(1) -%}{%- endif -%}
    {%- if not top -%}
      {{ exceptions.raise_compiler_error(head ~ "uses the aggregate `" ~ node.name ~ "()` inside an expression; "
          ~ "each aggregate must be a whole SELECT item, because a projection (or an aggregate table) merges the "
          ~ "stored aggregates part by part and does not recompute expressions over them: compute ratios such as "
          ~ "sum(x * " ~ sign ~ ") / sum(" ~ sign ~ ") at query time" ~ got) }}
    {%- endif -%}
    {%- if not is_sum -%}
      {%- set hint = " Write sumIf(x, cond) as sum(if(cond, x, 0) * " ~ sign
          ~ ")." if node.name | lower == 'sumif' else "" -%}
      {{ exceptions.raise_compiler_error(head ~ "uses the aggregate `" ~ node.name ~ "()`, which collapsing cannot "
          ~ "keep correct." ~ why ~ hint ~ " Got `" ~ ctx.query ~ "`.") }}
    {%- endif -%}
    {%- set text = ctx.sum_texts[ctx.sums_seen | length - 1] if ctx.sum_texts else '...' -%}
    {%- set args = node.children[0].children if node.children | length == 1
        and node.children[0].kind == 'ExpressionList' else [] -%}
    {%- set factors = vcmt._product_factors(args[0]) if args | length == 1 else [] -%}
    {%- set bare = [] -%}
    {%- for f in factors if f.kind == 'Identifier' and f.name == sign
        and not f.alias -%}{%- do bare.append(f) -%}{%- endfor -%}
    {%- set others = [] -%}
    {%- for f in factors if not (f.kind == 'Identifier' and f.name == sign
        and not f.alias) -%}{%- do others.append(f) -%}{%- endfor -%}
    {%- set mentions = [] -%}
    {%- for f in others -%}{%- do vcmt._ast_find(f, 'Identifier', none, mentions) -%}{%- endfor -%}
    {%- set signed = [] -%}
    {%- for m in mentions if vcmt._names_sign(m.name, sign) -%}{%- do signed.append(m) -%}{%- endfor -%}
    {%- if bare | length != 1 or signed -%}
      {{ exceptions.raise_compiler_error(head ~ "uses `sum(" ~ text ~ ")`, which is not weighted by `" ~ sign
          ~ "`: the argument must be `" ~ sign ~ "` or `<expr> * " ~ sign ~ "`, with `" ~ sign
          ~ "` exactly once as a top-level factor and nowhere inside <expr> (sum(x * " ~ sign ~ " * " ~ sign
          ~ ") or sum(" ~ sign ~ " * if(" ~ sign ~ " > 0, x, -x)) count a cancel row like a state row)." ~ why
          ~ " Got `" ~ ctx.query ~ "`.") }}
    {%- endif -%}
    {%- for f in others -%}{%- do vcmt._ast_check(f, ctx, false) -%}{%- endfor -%}
    {{ return(none) }}
  {%- endif -%}
  {%- if node.kind == 'Function' and vcmt._is_volatile(node.name, ctx.fns) -%}
    {{ exceptions.raise_compiler_error(head ~ "uses `" ~ node.name ~ "()`, whose result can differ between a state row "
        ~ "and the cancel row written later (the engine marks it non-deterministic), so the pair would not cancel; "
        ~ "use only deterministic expressions of the row's columns" ~ got) }}
  {%- endif -%}
  {%- for child in node.children -%}{%- do vcmt._ast_check(child, ctx, false) -%}{%- endfor -%}
{% endmacro %}


{#- `a * b * c` parses as multiply(multiply(a, b), c): the flat list of factors. -#}
{% macro _product_factors(node) %}
  {%- if node.kind == 'Function' and node.name == 'multiply' and not node.alias
        and node.children | length == 1 and node.children[0].children | length == 2 -%}
    {{ return(vcmt._product_factors(node.children[0].children[0])
              + vcmt._product_factors(node.children[0].children[1])) }}
  {%- endif -%}
  {{ return([node]) }}
{% endmacro %}


{#- `sign`, or a compound name ending in it (t.sign): both may read the sign column. -#}
{% macro _names_sign(identifier, sign) %}
  {{ return(identifier == sign or identifier.endswith('.' ~ sign)) }}
{% endmacro %}


{#- An aggregate per system.functions, or one with combinators (sumIf, uniqArrayIf...). -#}
{% macro _is_aggregate(fn, fns) %}
  {%- if fn in fns.aggregates.exact or fn | lower in fns.aggregates.ci -%}{{ return(true) }}{%- endif -%}
  {%- for c in fns.combinators if fn | length > c | length and fn.endswith(c) -%}
    {%- if vcmt._is_aggregate(fn[:-(c | length)], fns) -%}{{ return(true) }}{%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}


{% macro _is_volatile(fn, fns) %}
  {{ return(fn in fns.volatile.exact or fn | lower in fns.volatile.ci) }}
{% endmacro %}


{#- The argument text of every sum(...) call in the query, in order, for messages. -#}
{% macro _sum_arguments(query) %}
  {%- set texts = [] -%}
  {%- for call in modules.re.finditer('(?i)(?<![\\w`".])sum\\s*\\(', query) -%}
    {%- do texts.append(vcmt._split_top_level(query[call.end():]) | join(',') | trim) -%}
  {%- endfor -%}
  {{ return(texts) }}
{% endmacro %}


{% macro _projection_clauses(projections) %}
  {%- set clauses = [] -%}
  {%- for p in projections -%}
    {%- do clauses.append('projection ' ~ vcmt._quote(p['name']) ~ ' (' ~ vcmt._user_sql(p['query']) ~ ')') -%}
  {%- endfor -%}
  {{ return(clauses) }}
{% endmacro %}
