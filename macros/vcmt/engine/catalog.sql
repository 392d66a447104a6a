{#- What vcmt reads from the engine about objects and SQL: the catalog
    (system.tables, system.columns, system.projections, skip indexes, table
    settings, functions) and the parse tree of a SELECT. Every system.* read
    of the package lives in this folder (the lock's in lock_reads.sql; a test
    keeps it so). Every answer is read as rows of a query, never as the text of a
    statement a client may reformat: an HTTP client appends `FORMAT <x>` to
    what it sends, and the parser attaches it to an EXPLAIN's inner query. -#}


{#- name -> {engine, as_select, create_table_query} for every object of the
    model that exists: one system.tables query per run instead of one per object. -#}
{% macro _existing_objects(objs) %}
  {%- set names = [] -%}
  {%- for rel in objs.values() -%}{%- do names.append(vcmt._sql_string(rel.identifier)) -%}{%- endfor -%}
  {%- set rows = run_query("select name, engine, as_select, create_table_query from system.tables where database = "
                           ~ vcmt._sql_string(objs.target.schema) ~ " and name in (" ~ names | join(', ') ~ ")") -%}
  {%- set found = {} -%}
  {%- for row in rows.rows -%}
    {%- do found.update({row[0]: {'engine': row[1], 'as_select': row[2], 'create_table_query': row[3]}}) -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}


{% macro _relation_exists(relation) %}
  {%- set rows = run_query("select count() from system.tables where database = " ~ vcmt._sql_string(relation.schema)
      ~ " and name = " ~ vcmt._sql_string(relation.identifier)) -%}
  {{ return(rows.columns[0].values()[0] | int > 0) }}
{% endmacro %}


{#- A table's (or view's) uuid, comment and stored SELECT, or none when
    it does not exist. -#}
{% macro _table_identity(relation) %}
  {%- set rows = run_query("select toString(uuid), comment, as_select from system.tables where database = "
      ~ vcmt._sql_string(relation.schema) ~ " and name = " ~ vcmt._sql_string(relation.identifier)).rows -%}
  {{ return({'uuid': rows[0][0], 'comment': rows[0][1], 'as_select': rows[0][2]} if rows | length > 0 else none) }}
{% endmacro %}


{#- Whether `relation` exists on every node it is made on: each replica of
    the model's cluster for a relation created ON CLUSTER, else this node.
    A CREATE ... ON CLUSTER that a node missed (down then, its DDL task
    never replayed) leaves the table on the other nodes only. -#}
{% macro _exists_on_every_node(relation) %}
  {%- if not on_cluster_clause(relation) | trim -%}{{ return(vcmt._relation_exists(relation)) }}{%- endif -%}
  {%- set found = vcmt._nodes_holding(relation) -%}
  {{ return(found.holding | length == found.nodes) }}
{% endmacro %}


{#- On the model's cluster, who holds `relation`: {nodes, holding} (every
    node of the cluster, the labels of those that hold it: _node_label_sql)
    and {shards, shards_holding} (shards, and those with a replica that
    holds it). A node that is down fails the read, never reads as empty. -#}
{% macro _nodes_holding(relation) %}
  {%- set cluster = vcmt._sql_string(vcmt._cluster_name()) -%}
  {%- set listed = "from system.clusters where cluster = " ~ cluster -%}
  {%- set row = run_query("select (select count() " ~ listed ~ "), (select uniqExact(shard_num) " ~ listed ~ "), "
      ~ "arrayStringConcat(arraySort(groupArray(" ~ vcmt._node_label_sql(cluster) ~ ")), '|'), uniqExact(_shard_num) "
      ~ "from clusterAllReplicas(" ~ cluster ~ ", system.tables) where database = " ~ vcmt._sql_string(relation.schema)
      ~ " and name = " ~ vcmt._sql_string(relation.identifier) ~ " settings skip_unavailable_shards = 0").rows[0] -%}
  {{ return({'nodes': row[0] | int, 'shards': row[1] | int, 'holding': row[2].split('|') if row[2] else [],
             'shards_holding': row[3] | int}) }}
{% endmacro %}


{#- Whether the existing table `relation`'s sorting key starts with `items`
    (SQL expressions), both as the engine's formatter spells them (a
    collapsing table's sorting key ends with its version column). False for
    a relation with no sorting key (a view, `ORDER BY tuple()`) or none. -#}
{% macro _stored_sorting_key_starts(relation, items) %}
  {%- set rows = run_query("select sorting_key != '' and ifNull(startsWith(formatQuerySingleLineOrNull('select ' "
      ~ "|| sorting_key) || ',', formatQuerySingleLine(" ~ vcmt._sql_string('select ' ~ vcmt._user_sql_list(items))
      ~ ") || ','), 0) from system.tables where database = " ~ vcmt._sql_string(relation.schema) ~ " and name = "
      ~ vcmt._sql_string(relation.identifier)).rows -%}
  {{ return(rows | length > 0 and rows[0][0] | int == 1) }}
{% endmacro %}


{% macro _relation_columns(relation) %}
  {%- set columns = [] -%}
  {%- for c in adapter.get_columns_in_relation(relation) -%}
    {%- do columns.append({'name': c.name, 'data_type': c.data_type}) -%}
  {%- endfor -%}
  {{ return(columns) }}
{% endmacro %}


{#- name -> query of `relation`'s projections (of `type` only, e.g. 'Aggregate', when given). -#}
{% macro _existing_projections(relation, type=none) %}
  {%- set existing = {} -%}
  {%- set rows = run_query("select name, query from system.projections where database = "
      ~ vcmt._sql_string(relation.schema) ~ " and table = " ~ vcmt._sql_string(relation.identifier)
      ~ (" and type = " ~ vcmt._sql_string(type) if type else "")) -%}
  {%- for row in rows.rows -%}{%- do existing.update({row[0]: row[1]}) -%}{%- endfor -%}
  {{ return(existing) }}
{% endmacro %}


{#- The engine's own parse tree of a SELECT, as {kind, name, alias, children}
    nodes: the one reader of EXPLAIN AST. It runs as a subquery, so a client's
    `FORMAT` clause attaches to the outer SELECT and the answer is plain rows
    on every driver (EXPLAIN in a subquery only takes a SELECT). The root's
    one child is the SelectWithUnionQuery. `memo`: a dict kept for the run
    (config.sql `_run_state`), so the same text is parsed once a run. -#}
{% macro _explain_ast(select_sql, memo=none) %}
  {%- set memo = {} if memo is none else memo.setdefault('explain_ast', {}) -%}
  {%- if select_sql not in memo -%}
    {%- do memo.update({select_sql: run_query('select explain from (explain ast ' ~ vcmt._user_sql(select_sql)
        ~ ')').columns[0].values() | list}) -%}
  {%- endif -%}
  {{ return(vcmt._ast_tree(memo[select_sql])) }}
{% endmacro %}


{#- EXPLAIN AST output (one node a line, indented one space a level) as a tree
    of {kind, name, alias, children}. -#}
{% macro _ast_tree(lines) %}
  {%- set pattern = modules.re.compile('^(\\S+)(?: (.*?))?(?: \\(alias ([^)]*)\\))?(?: \\(children \\d+\\))?$') -%}
  {%- set root = {'kind': 'Root', 'name': '', 'alias': none, 'children': [], 'depth': -1} -%}
  {%- set stack = [root] -%}
  {%- for line in lines -%}
    {%- set label = line | trim -%}
    {%- set depth = line | length - line.lstrip(' ') | length -%}
    {%- set m = pattern.match(label) -%}
    {%- set node = {'kind': m.group(1), 'name': m.group(2) or '', 'alias': m.group(3), 'children': [],
        'depth': depth} -%}
    {%- for _ in range(stack | length) if stack | length > 1
        and stack[-1].depth >= depth -%}{%- do stack.pop() -%}{%- endfor -%}
    {%- do stack[-1].children.append(node) -%}
    {%- do stack.append(node) -%}
  {%- endfor -%}
  {{ return(root) }}
{% endmacro %}


{#- Append to `out` every node of `kind` (every node if none; and, if given,
    lower-case `name`) under `node`. -#}
{% macro _ast_find(node, kind, name, out) %}
  {%- if (kind is none or node.kind == kind) and (name is none or node.name | lower == name) -%}
    {%- do out.append(node) -%}
  {%- endif -%}
  {%- for child in node.children -%}{%- do vcmt._ast_find(child, kind, name, out) -%}{%- endfor -%}
{% endmacro %}


{#- A node of _ast_tree and everything under it as one text: two
    expressions the engine parses the same (`id % 4`, `(id % 4)`) give the
    same text. -#}
{% macro _ast_text(node) %}
  {%- set parts = [] -%}
  {%- for child in node.children -%}{%- do parts.append(vcmt._ast_text(child)) -%}{%- endfor -%}
  {{ return(node.kind ~ ' ' ~ node.name ~ '(' ~ parts | join(', ') ~ ')') }}
{% endmacro %}


{#- The materialized views reading the model's table other than the model's
    own, as [{view, feeds}] (`feeds`: the TO table, or the view's inner table).
    A full refresh replaces the table's rows without cancel rows, so what
    these views derived from the old rows stays behind (docs/design.md#lifecycle). -#}
{% macro _downstream_views(objs) %}
  {%- set own = [] -%}
  {%- for rel in objs.values() -%}{%- do own.append(rel.schema ~ '.' ~ rel.identifier) -%}{%- endfor -%}
  {%- set rows = run_query("select d, v, t.create_table_query, toString(t.uuid) from system.tables as m"
                           ~ " array join m.dependencies_database as d, m.dependencies_table as v"
                           ~ " left join system.tables as t on t.database = d and t.name = v"
                           ~ " where m.database = " ~ vcmt._sql_string(objs.target.schema) ~ " and m.name = "
                           ~ vcmt._sql_string(objs.target.identifier)) -%}
  {%- set views = [] -%}
  {%- for row in rows.rows if (row[0] ~ '.' ~ row[1]) not in own -%}
    {%- set to = modules.re.search(' TO (\\S+) ', row[2] or '') -%}
    {%- do views.append({'view': row[0] ~ '.' ~ row[1], 'feeds': to.group(1) if to else row[0] ~ '.`.inner_id.' ~ row[3]
        ~ '`'}) -%}
  {%- endfor -%}
  {{ return(views) }}
{% endmacro %}


{#- How a read names the node each row comes from: `shard <n> (<host>:<tcp
    port>)` through clusterAllReplicas on a cluster, `<host>:<port>` on one
    server. Every read that compares nodes uses this one label. -#}
{% macro _node_label_sql(cluster) %}
  {{ return("concat('shard ', toString(_shard_num), ' (', hostName(), ':', toString(tcpPort()), ')')" if cluster
      else "concat(hostName(), ':', toString(tcpPort()))") }}
{% endmacro %}


{#- Each node's rows of system.tables that match `where` (SQL over its
    columns), as `node, name, comment, engine`: every replica of every shard
    through clusterAllReplicas when `cluster` is named, else this server.
    In one order, by shard, node and name, so that a message that lists the
    nodes lists them alike from run to run. -#}
{% macro _node_tables_sql(cluster, where) %}
  {%- set source = "clusterAllReplicas(" ~ vcmt._sql_string(cluster) ~ ", system.tables)" if cluster
      else "system.tables" -%}
  {{ return("select " ~ vcmt._node_label_sql(cluster) ~ " as node, name, comment, engine from " ~ source ~ " where "
      ~ where ~ " order by " ~ ("_shard_num, " if cluster else "") ~ "node, name") }}
{% endmacro %}


{#- Which of `names` (identifiers in `relation`'s schema) exist on each node
    of the model's cluster, with their comment, as [{node, name, comment}]:
    every replica of every shard through clusterAllReplicas on a cluster
    (a node named `shard <n> (<host>:<tcp port>)`), the one server elsewhere.
    A full refresh writes its generation in its tables' comments
    (_generation_comment), and ON CLUSTER DDL may have run on some nodes only:
    this is where vcmt sees each node's own catalog (docs/design.md#lifecycle).
    With `prefixes`, the names that start with one of them too. Each row
    also has the object's `engine`. -#}
{% macro _objects_on_every_node(relation, names, prefixes=[]) %}
  {%- set cluster = vcmt._cluster_name() if on_cluster_clause(relation) | trim else none -%}
  {%- set rows = run_query(vcmt._node_tables_sql(cluster, vcmt._observed_tables_condition(relation.schema,
      {'names': names, 'prefixes': prefixes}))) -%}
  {%- set out = [] -%}
  {%- for row in rows.rows -%}
    {%- do out.append({'node': row[0], 'name': row[1], 'comment': row[2], 'engine': row[3]}) -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{#- The names among the object sets `sets` (each as vcmt.objects returns
    it) that exist on at least one node (name -> [nodes]), in one read. -#}
{% macro _existing_anywhere(sets) %}
  {%- set names = [] -%}
  {%- for objs in sets -%}
    {%- for rel in objs.values() -%}{%- do names.append(rel.identifier) -%}{%- endfor -%}
  {%- endfor -%}
  {%- set found = {} -%}
  {%- for row in vcmt._objects_on_every_node(sets[0].target, names) -%}
    {%- do found.setdefault(row.name, []).append(row.node) -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}


{#- `from ... where ...` of the tables among `names` in `schema` whose
    comment is `comment`, in the catalog of the node that runs it: a mend
    (_mend_split) reads it on every node of an ON CLUSTER statement. -#}
{% macro _commented_tables_sql(schema, names, comment) %}
  {%- set quoted = [] -%}
  {%- for name in names -%}{%- do quoted.append(vcmt._sql_string(name)) -%}{%- endfor -%}
  {{ return("from system.tables where database = " ~ vcmt._sql_string(schema) ~ " and name in ("
      ~ quoted | join(', ') ~ ") and comment = " ~ vcmt._sql_string(comment)) }}
{% endmacro %}


{#- The first by name of the tables `names` in `schema` whose comment is
    `comment`, on the dbt node ('' when none). -#}
{% macro _first_commented_table(schema, names, comment) %}
  {{ return(run_query("select min(name) " ~ vcmt._commented_tables_sql(schema, names, comment)).rows[0][0]) }}
{% endmacro %}


{#- SQL giving where the Distributed engine sends a key on `cluster`: the
    weights of the shards that take rows, in shard order, e.g. '1,1' (a
    shard of weight 0 owns no slot); a sharded model's placement
    (ddl/sharding.sql). -#}
{% macro _shard_weights_sql(cluster) %}
  {{ return("(select arrayStringConcat(arrayMap(x -> toString(x.2), arraySort(groupArray((shard_num, shard_weight)))), "
      ~ "',') from (select distinct shard_num, shard_weight from system.clusters where cluster = "
      ~ vcmt._sql_string(cluster) ~ " and shard_weight > 0))") }}
{% endmacro %}


{#- SQL giving the shard number each of `cluster`'s slots sends rows to, in
    slot order, e.g. '1,2' (a shard of weight w owns w consecutive slots, in
    shard order; one of weight 0 owns none): the Distributed engine sends a
    row to the shard of slot `sharding value % slots` (ddl/sharding.sql,
    _shards_moved). -#}
{% macro _shard_slots_sql(cluster) %}
  {{ return("(select arrayStringConcat(arrayFlatten(arrayMap(x -> arrayWithConstant(x.2, toString(x.1)), "
      ~ "arraySort(groupArray((shard_num, shard_weight))))), ',') from (select distinct shard_num, shard_weight "
      ~ "from system.clusters where cluster = " ~ vcmt._sql_string(cluster) ~ "))") }}
{% endmacro %}


{#- The most replicas any shard of `cluster` has (0 for a cluster the node
    does not know). -#}
{% macro _most_replicas(cluster) %}
  {{ return(run_query('select max(replica_num) from system.clusters where cluster = '
      ~ vcmt._sql_string(cluster)).rows[0][0] or 0) }}
{% endmacro %}


{#- Column names and exact ClickHouse types of a relation, in table order,
    as [{name, data_type}]: system.columns keeps the type string as the
    server spells it (LowCardinality, Nullable, Decimal scale), which the
    generic tests' casts and tolerance decisions need verbatim. -#}
{% macro _catalog_columns(relation) %}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set columns = [] -%}
  {%- for row in run_query("select name, type from system.columns where database = "
      ~ vcmt._sql_string(relation.schema) ~ " and table = " ~ vcmt._sql_string(relation.identifier)
      ~ " order by position").rows -%}
    {%- do columns.append({'name': row[0], 'data_type': row[1]}) -%}
  {%- endfor -%}
  {{ return(columns) }}
{% endmacro %}


{#- Column names and types of a relation as DESCRIBE gives them (a
    temporary table's too), as [{name, data_type}]: the spelling of
    system.columns. -#}
{% macro _described_columns(relation) %}
  {%- set columns = [] -%}
  {%- for row in run_query("describe table " ~ relation).rows -%}
    {%- do columns.append({'name': row[0], 'data_type': row[1]}) -%}
  {%- endfor -%}
  {{ return(columns) }}
{% endmacro %}


{#- Which keys each of the columns `names` is part of, as [(name, [labels])]
    for the columns that are in at least one, from a table's observed
    columns (observe.sql `_observed_columns`). -#}
{% macro _columns_in_keys(columns, names) %}
  {%- set out = [] -%}
  {%- for c in columns if c.name in names -%}
    {%- set keys = [] -%}
    {%- for flag, label in [(c.partition, 'partition key'), (c.sorting, 'sorting key'), (c.primary, 'primary key'),
        (c.sampling, 'sampling key')] if flag | int == 1 -%}
      {%- do keys.append(label) -%}
    {%- endfor -%}
    {%- if keys -%}{%- do out.append((c.name, keys)) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{#- Each of the tables `identifiers` in `schema`, as the text of its (name,
    type) columns in order: one query for all of them. -#}
{% macro _column_signatures(schema, identifiers) %}
  {%- set quoted = [] -%}
  {%- for n in identifiers -%}{%- do quoted.append(vcmt._sql_string(n)) -%}{%- endfor -%}
  {%- set rows = run_query("select table, toString(arrayMap(c -> (c.2, c.3), arraySort(groupArray((position, name, "
      ~ "type))))) from system.columns where database = " ~ vcmt._sql_string(schema) ~ " and table in ("
      ~ quoted | join(', ') ~ ") group by table").rows -%}
  {%- set out = {} -%}
  {%- for row in rows -%}{%- do out.update({row[0]: row[1]}) -%}{%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{#- For projections' queries, in one read: each one's parse tree
    (_explain_ast's shape; run once their syntax is known to parse), and the
    kinds of the functions their text may call (every word before a `(`, and
    what such a word starts with, for combinators: sumIf is sum): {trees,
    kinds: {'aggregates': {'exact', 'ci'}, 'volatile': {...}, 'combinators':
    [...]}}, names matched exactly and case-insensitive names lowered. -#}
{% macro _projection_parses(projections) %}
  {%- set words = [] -%}
  {%- set asts = [] -%}
  {%- for p in projections -%}
    {%- for w in modules.re.findall('([A-Za-z_][A-Za-z0-9_]*)\\s*\\(', p['query']) -%}
      {%- if w | lower not in words -%}{%- do words.append(w | lower) -%}{%- endif -%}
    {%- endfor -%}
    {%- do asts.append('(select toJSONString(groupArray(explain)) from (explain ast ' ~ vcmt._user_sql(p['query'])
        ~ '))') -%}
  {%- endfor -%}
  {%- set quoted = [] -%}
  {%- for w in words -%}{%- do quoted.append(vcmt._sql_string(w)) -%}{%- endfor -%}
  {%- set row = run_query("select (select toJSONString(groupArray((name, case_insensitive, is_aggregate))) from "
      ~ "system.functions where (is_aggregate or deterministic = 0) and arrayExists(w -> startsWith(w, lower(name)), ["
      ~ quoted | join(', ') ~ "]::Array(String))), (select toJSONString(groupArray(name)) from "
      ~ "system.aggregate_function_combinators), " ~ asts | join(', ')).rows[0] -%}
  {%- set aggregates = {'exact': [], 'ci': []} -%}
  {%- set volatile = {'exact': [], 'ci': []} -%}
  {%- for name, ci, aggregate in fromjson(row[0]) -%}
    {%- set bucket = aggregates if aggregate | int == 1 else volatile -%}
    {%- do bucket['ci' if ci | int == 1 else 'exact'].append(name | lower if ci | int == 1 else name) -%}
  {%- endfor -%}
  {%- set trees = [] -%}
  {%- for lines in row[2:] -%}{%- do trees.append(vcmt._ast_tree(fromjson(lines))) -%}{%- endfor -%}
  {{ return({'trees': trees, 'kinds': {'aggregates': aggregates, 'volatile': volatile,
             'combinators': fromjson(row[1])}}) }}
{% endmacro %}


{#- Which of the functions `names` the engine does not mark deterministic
    (a SQL function is never marked), sorted and joined; '' when all are, or
    when the engine's system.functions has no `deterministic` column. -#}
{% macro _nondeterministic_functions(names) %}
  {%- if not names -%}{{ return('') }}{%- endif -%}
  {%- set known = run_query("select count() from system.columns where database = 'system' and table = "
      ~ "'functions' and name = 'deterministic'").rows[0][0] | int -%}
  {%- if not known -%}{{ return('') }}{%- endif -%}
  {%- set quoted = [] -%}
  {%- for f in names -%}{%- do quoted.append(vcmt._sql_string(f)) -%}{%- endfor -%}
  {{ return(run_query("select arrayStringConcat(arraySort(groupArray(name)), ', ') "
      ~ "from system.functions where ifNull(deterministic, 0) != 1 and name in (" ~ quoted | join(', ')
      ~ ')').rows[0][0]) }}
{% endmacro %}


{#- The served node's setting `name` (system.server_settings), or none. -#}
{% macro _server_setting(name) %}
  {%- set found = run_query("select value from system.server_settings where name = "
      ~ vcmt._sql_string(name)).columns[0].values() -%}
  {{ return(found[0] if found else none) }}
{% endmacro %}
