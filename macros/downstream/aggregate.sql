{#- A `vcmt_aggregate` model (docs/design.md#online-aggregates): a GROUP BY
    over one vcmt_upsert model whose aggregates are sign-weighted sums, kept
    in a SummingMergeTree table by a materialized view on that model
    (`<model>__writer`), so every INSERT the upstream's loads make updates
    it: read it with `sum(...) ... group by`, exact with no FINAL. -#}


{#- The vcmt_upsert model a vcmt_aggregate model reads, its one input: its
    node and target relation. -#}
{% macro _aggregate_upstream(who) %}
  {%- set inputs = model.depends_on.nodes | unique | list -%}
  {%- set node = graph.nodes.get(inputs[0]) if inputs | length == 1 else none -%}
  {%- if node is none or node.config.materialized != 'vcmt_upsert' -%}
    {{ exceptions.raise_compiler_error(who ~ ": a vcmt_aggregate model reads exactly one vcmt_upsert model, through "
        ~ "one ref() (its materialized view fires on that model's INSERTs only); this one reads " ~ inputs
        ~ ". Join other tables at query time, or read them in a view over this model.") }}
  {%- endif -%}
  {%- set target = vcmt._node_target(node) -%}
  {%- if node.config.get('sharding_key') or target.should_on_cluster -%}
    {{ exceptions.raise_compiler_error(who ~ ": " ~ node.name ~ " is on a cluster; a vcmt_aggregate model would see "
        ~ "only the INSERTs of the node it is created on. Nothing was created or changed.") }}
  {%- endif -%}
  {{ return({'node': node, 'target': target}) }}
{% endmacro %}


{#- The aggregate's columns and keys, checked before any DDL: the SELECT
    reads the upstream's table alone, and its aggregates are sum(sign) and
    sum(<expr> * sign) as whole items, as an aggregating projection's must
    be (checks/projections.sql): a cancel row then subtracts exactly what
    its state row added, in any part and any merge. The other items are
    the keys. Returns {columns, key_columns}. -#}
{% macro _check_aggregate(sql, upstream, who) %}
  {%- set sign = vcmt._identity_columns(upstream.node.config, who).sign -%}
  {%- set head = who ~ ": " -%}
  {%- set query = {'name': this.identifier, 'query': sql} -%}
  {%- set parsed = vcmt._projection_parses([query]) -%}
  {%- set tree = parsed.trees[0] -%}
  {%- set items = vcmt._check_projection_exact(query, sign, parsed.kinds, tree, head=head) -%}
  {%- set tables = [] -%}
  {%- do vcmt._ast_find(tree, 'TableExpression', none, tables) -%}
  {%- set named = [] -%}
  {%- do vcmt._ast_find(tree, 'TableIdentifier', none, named) -%}
  {#- Under --empty and --sample dbt reads the ref as a subquery (vcmt_aggregate.sql leaves the model alone). -#}
  {%- if (tables | length != 1 or named | length != 1) and vcmt._aggregate_reads_upstream() -%}
    {{ exceptions.raise_compiler_error(head ~ "its SELECT must read " ~ upstream.target ~ " alone (no join, subquery "
        ~ "or second table): the materialized view that keeps it online sees the rows an INSERT adds to that table "
        ~ "only. Got `" ~ sql ~ "`.") }}
  {%- endif -%}
  {%- set columns = adapter.get_column_schema_from_query(sql) -%}
  {%- set keys = [] -%}
  {%- for item in items -%}
    {%- if not (item.kind == 'Function' and item.name | lower == 'sum') -%}
      {%- do keys.append(columns[loop.index0].name) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if keys | length == columns | length -%}
    {{ exceptions.raise_compiler_error(head ~ "its SELECT has no sum(): write the totals it keeps as sum(" ~ sign
        ~ ") (a count) and sum(<expr> * " ~ sign ~ "). Got `" ~ sql ~ "`.") }}
  {%- endif -%}
  {{ return({'columns': columns, 'key_columns': keys}) }}
{% endmacro %}


{#- Whether the SELECT reads the upstream's table itself: not under --empty
    or --sample, where dbt reads a ref as a subquery of some rows or none. -#}
{% macro _aggregate_reads_upstream() %}
  {{ return(not (flags.EMPTY or flags.SAMPLE)) }}
{% endmacro %}


{#- The comment of an aggregate's table: the upstream table it was built
    from (its uuid, which a --full-refresh of the upstream changes). -#}
{% macro _aggregate_comment(upstream_uuid) %}
  {{ return(vcmt._aggregate_marker() ~ upstream_uuid) }}
{% endmacro %}

{% macro _aggregate_marker() %}{{ return('vcmt aggregate of ') }}{% endmacro %}


{#- Why the aggregate `target` must be built again from the upstream's rows,
    or none: it has no table or no writer, its SELECT changed, `--full-refresh`,
    or the upstream table it was built from was replaced (a --full-refresh of
    the upstream that could not rebuild it). -#}
{% macro _aggregate_stale(target, writer, sql, upstream_uuid) %}
  {%- set table = vcmt._table_identity(target) -%}
  {%- set view = vcmt._table_identity(writer) -%}
  {%- if table is none or view is none -%}{{ return('first build') }}{%- endif -%}
  {%- if should_full_refresh() -%}{{ return('--full-refresh') }}{%- endif -%}
  {%- if table.comment != vcmt._aggregate_comment(upstream_uuid) -%}
    {{ return('its upstream was rebuilt') }}
  {%- endif -%}
  {%- if vcmt._sql_differs(view.as_select, sql) -%}{{ return('its SELECT changed') }}{%- endif -%}
  {{ return(none) }}
{% endmacro %}


{#- An aggregate's table: a SummingMergeTree sorted by its keys, which merges
    add up; `comment` names the upstream table it holds the totals of. -#}
{% macro _create_aggregate_sql(relation, columns, keys, comment) %}
  {%- set nullable = [] -%}
  {%- for c in columns if c.name in keys and 'Nullable' in c.data_type -%}
    {%- do nullable.append(c.name) -%}
  {%- endfor -%}
  {{ return('create table ' ~ relation ~ ' (' ~ vcmt._columns_ddl(columns) | join(', ')
      ~ ') engine = SummingMergeTree order by (' ~ vcmt._column_list(keys) ~ ')'
      ~ (' settings allow_nullable_key = 1' if nullable else '') ~ ' comment ' ~ vcmt._sql_string(comment)) }}
{% endmacro %}


{#- Build the aggregate `target` again from its upstream's rows, under the
    upstream's lock (the caller holds it, so no load writes meanwhile): a new
    table beside it, filled by `select_sql` over the upstream as it is now,
    exchanged with it in one statement (readers see the old totals, then the
    new), its writer (re)created when `writer_sql` is given. A build that
    fails before the exchange leaves the old table and writer as they were.
    `like`: a table to copy the new one's structure from (else `columns` and
    `keys`). -#}
{% macro _rebuild_aggregate(cfg, upstream, target, writer, select_sql, upstream_uuid, like=none, columns=none,
    keys=none, writer_sql=none) %}
  {%- set new = target.incorporate(path={'identifier': target.identifier ~ vcmt._object_suffix('staging')}) -%}
  {%- set exists = vcmt._table_identity(target) is not none -%}
  {%- set steps = [('drop_new', vcmt._drop_sql(new, local=true))] -%}
  {%- if like is not none -%}
    {%- do steps.append(('create_new', 'create table ' ~ new ~ ' as ' ~ like)) -%}
    {%- do steps.append(('comment_new', 'alter table ' ~ new ~ ' modify comment '
        ~ vcmt._sql_string(vcmt._aggregate_comment(upstream_uuid)))) -%}
  {%- else -%}
    {%- do steps.append(('create_new', vcmt._create_aggregate_sql(new, columns, keys,
        vcmt._aggregate_comment(upstream_uuid)))) -%}
  {%- endif -%}
  {%- do steps.append(('backfill', 'insert into ' ~ new ~ ' select * from (' ~ vcmt._user_sql(select_sql)
      ~ ') where ' ~ vcmt._fenced(upstream) ~ ' ' ~ vcmt._read_settings(holder_of=upstream))) -%}
  {#- Only once the new totals are whole: a build that fails before leaves the old table and writer serving. -#}
  {%- if writer_sql -%}{%- do steps.append(('drop_writer', vcmt._drop_sql(writer, local=true))) -%}{%- endif -%}
  {%- do steps.append(('swap', ('exchange tables ' ~ new ~ ' and ' ~ target) if exists
      else ('rename table ' ~ new ~ ' to ' ~ target))) -%}
  {%- if writer_sql -%}
    {%- do steps.append(('create_writer', vcmt._create_view_sql(writer, target, vcmt._user_sql(writer_sql)))) -%}
  {%- endif -%}
  {%- do steps.append(('drop_old', vcmt._drop_sql(new, local=true))) -%}
  {%- for name, step_sql in steps -%}
    {%- do vcmt._renew_lock(cfg, {'target': upstream}) -%}
    {%- do vcmt._check_fence(upstream) -%}
    {%- call statement('vcmt_aggregate_' ~ name) -%}{{ step_sql }}{%- endcall -%}
  {%- endfor -%}
{% endmacro %}


{#- After a --full-refresh of `objs`' model (its lock still held): its rows
    were replaced without cancel rows, so each materialized view on it now
    adds to totals of rows that are gone. The table of each vcmt_aggregate
    model is built again from the new rows (its writer, bound to the model's
    name, feeds it from then on); any other view's table is named, with
    what to run. -#}
{% macro _rebuild_downstream_views(cfg, objs, views) %}
  {%- set upstream = vcmt._public_relation(objs) -%}
  {%- for v in views -%}
    {%- set schema, name = v.feeds.split('.', 1) -%}
    {%- set table = upstream.incorporate(path={'schema': schema | replace('`', ''), 'identifier': name
        | replace('`', '')}) -%}
    {%- set found = vcmt._table_identity(table) -%}
    {%- if found is not none and found.comment.startswith(vcmt._aggregate_marker()) -%}
      {{ log('vcmt_upsert ' ~ upstream.identifier ~ ': full refresh: rebuilding the vcmt_aggregate model '
          ~ table.identifier ~ ' from the new rows', info=true) }}
      {%- set writer = table.incorporate(path={'identifier': v.view.split('.', 1)[1] | replace('`', '')}) -%}
      {%- do vcmt._rebuild_aggregate(cfg, objs.target, table, writer, vcmt._table_identity(writer).as_select,
          vcmt._table_identity(upstream).uuid, like=table) -%}
    {%- else -%}
      {%- do exceptions.warn('vcmt_upsert ' ~ objs.target.identifier ~ ': full refresh: the materialized view '
          ~ v.view ~ ' reads ' ~ objs.target.identifier ~ ', whose rows the rebuild replaced without cancel rows: '
          ~ v.feeds ~ ' no longer matches it. Rebuild it from the model, with writers paused: TRUNCATE TABLE '
          ~ v.feeds ~ ', then INSERT INTO ' ~ v.feeds ~ ' the view\'s SELECT (run over ' ~ objs.target.identifier
          ~ ' as it is now); or make it a vcmt_aggregate model, which a full refresh rebuilds.') -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}
