{#- One read of what a run must know before it decides anything
    (docs/design.md#observe-plan-apply): the model's objects in the catalog
    (on every node of a cluster), their columns, projections and skip
    indexes, the lock's state, the applied totals, and the engine's parse of
    the config's SQL. Each check and each step of the run takes its answer
    from this observation instead of reading the catalog itself; a run reads
    the catalog again only after one of its statements changed it.

    It is one statement: every part is a scalar subquery that gives one
    String (a JSON document, or the text itself), and none can fail on what
    a user wrote (the config's SQL goes through the engine's ...OrNull
    formatters). -#}


{#- Run the observation of `parts` ([{key, sql, json}]: `sql` gives one
    String value, parsed as JSON when `json`) in one statement; returns
    {key: value}. -#}
{% macro _observe_parts(parts) %}
  {%- set items = [] -%}
  {%- for p in parts -%}{%- do items.append('(' ~ p.sql ~ ') as _vcmt_o' ~ loop.index0) -%}{%- endfor -%}
  {%- set row = run_query('select ' ~ items | join(',\n  ') ~ '\nsettings output_format_json_validate_utf8 = 1, '
      ~ 'output_format_json_quote_64bit_integers = 0').rows[0] -%}
  {%- set out = {} -%}
  {%- for p in parts -%}
    {%- set value = row[loop.index0] -%}
    {%- do out.update({p.key: fromjson(value) if p.json and value is not none else value}) -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{#- A part giving the rows of `from_where` (`from ... where ...`) as a JSON
    array of objects of `fields` ({name: SQL expression}), every value text. -#}
{% macro _json_rows_sql(fields, from_where) %}
  {%- set names = vcmt._sql_string(fields.keys() | list, each=true) -%}
  {%- set pairs = [] -%}
  {%- for name, expr in fields.items() -%}
    {%- do pairs.append(names[loop.index0] ~ ', toString(' ~ expr ~ ')') -%}
  {%- endfor -%}
  {{ return('select toJSONString(groupArray(map(' ~ pairs | join(', ') ~ '))) ' ~ from_where) }}
{% endmacro %}


{#- The names a model's observation looks for in the catalog: its objects,
    a full refresh's staging set and a mend's, and the prefixes of its load
    tables (older generations: objects.sql `_drop_older_load_tables`). -#}
{% macro _observed_names(objs) %}
  {%- set names = [] -%}
  {%- for set in [objs, vcmt._staging_objects(objs)] + vcmt._mend_sets(objs) -%}
    {%- for rel in set.values() if rel.identifier not in names -%}{%- do names.append(rel.identifier) -%}{%- endfor -%}
  {%- endfor -%}
  {%- set prefixes = [] -%}
  {%- for o in vcmt._roles_of('load_table') -%}
    {%- set base = vcmt._generation_object(objs, o.role, none).identifier -%}
    {%- if base not in names -%}{%- do names.append(base) -%}{%- endif -%}
    {%- do prefixes.append(base ~ '_') -%}
  {%- endfor -%}
  {{ return({'names': names, 'prefixes': prefixes}) }}
{% endmacro %}


{#- The condition on system.tables (or system.columns' `table`, with
    `column`) of `schema` and the observed names. -#}
{% macro _observed_tables_condition(schema, observed, column='name') %}
  {%- set starts = [] -%}
  {%- for p in vcmt._sql_string(observed.prefixes, each=true) -%}
    {%- do starts.append(' or startsWith(' ~ column ~ ', ' ~ p ~ ')') -%}
  {%- endfor -%}
  {{ return('database = ' ~ vcmt._sql_string(schema) ~ ' and (' ~ column ~ ' in ('
      ~ vcmt._sql_string(observed.names, each=true) | join(', ') ~ ')' ~ starts | join('') ~ ')') }}
{% endmacro %}


{#- What a vcmt_upsert run observes of its model before it takes the lock
    (`rebuild`: a first run or a --full-refresh): see the top of this file.
    Returns {found, nodes, node, columns, projections, indexes, defaults,
    probes, order_items, create_target, transform_differs, lock, applied},
    read by the checks (check.sql, stored_layout.sql), the swap's state
    (lifecycle.sql), the reconcile (schema_changes.sql), the lock (lock.sql)
    and the load (load.sql). -#}
{% macro _observe_model(cfg, objs, columns, rebuild, probes) %}
  {%- set schema = objs.target.schema -%}
  {%- set observed = vcmt._observed_names(objs) -%}
  {%- set cluster = vcmt._cluster_name() if on_cluster_clause(objs.target) | trim else none -%}
  {%- set tables = 'from system.tables where ' ~ vcmt._observed_tables_condition(schema, observed) -%}
  {%- set parts = [] -%}
  {#- The dbt node's catalog of the model's names. -#}
  {%- do parts.append({'key': 'tables', 'json': true, 'sql': vcmt._json_rows_sql({'name': 'name', 'engine': 'engine',
      'comment': 'comment', 'as_select': 'as_select', 'create_table_query': 'create_table_query',
      'sorting_key': 'sorting_key'}, tables)}) -%}
  {#- Every node's: ON CLUSTER DDL may have run on some nodes only. In _node_tables_sql's order (groupArray keeps a
      small sorted subquery's order), as a re-read after DDL (catalog.sql `_objects_on_every_node`) lists them. -#}
  {%- if cluster -%}
    {%- do parts.append({'key': 'nodes', 'json': true, 'sql': vcmt._json_rows_sql({'node': 'node', 'name': 'name',
        'comment': 'comment', 'engine': 'engine'}, 'from (' ~ vcmt._node_tables_sql(cluster,
        vcmt._observed_tables_condition(schema, observed)) ~ ') settings skip_unavailable_shards = 0')}) -%}
  {%- endif -%}
  {%- do parts.append({'key': 'node', 'json': false, 'sql': 'select ' ~ vcmt._node_label_sql(none)}) -%}
  {%- if cluster -%}
    {#- The cluster's replicas and shards (lifecycle.sql `_check_on_every_node`). -#}
    {%- do parts.append({'key': 'cluster', 'json': true, 'sql': "select toJSONString(map('nodes', toString(count()), "
        ~ "'shards', toString(uniqExact(shard_num)))) from system.clusters where cluster = "
        ~ vcmt._sql_string(cluster)}) -%}
  {%- endif -%}
  {%- set own = [objs.target.identifier, objs.stage.identifier, objs.tombstones.identifier, objs.loads.identifier] -%}
  {%- for role, local in vcmt._distributed_pairs() if role in objs -%}
    {%- do own.append(objs[role].identifier) -%}
  {%- endfor -%}
  {%- set quoted = [] -%}
  {%- for name in own -%}{%- do quoted.append(vcmt._sql_string(name)) -%}{%- endfor -%}
  {%- do parts.append({'key': 'columns', 'json': true, 'sql': vcmt._json_rows_sql({'table': 'table', 'name': 'name',
      'data_type': 'type', 'partition': 'is_in_partition_key', 'sorting': 'is_in_sorting_key',
      'primary': 'is_in_primary_key', 'sampling': 'is_in_sampling_key'}, 'from (select * from system.columns where '
      ~ 'database = ' ~ vcmt._sql_string(schema) ~ ' and table in (' ~ quoted | join(', ') ~ ') order by table, '
      ~ 'position)')}) -%}
  {%- set target = 'database = ' ~ vcmt._sql_string(schema) ~ ' and table = '
      ~ vcmt._sql_string(objs.target.identifier) -%}
  {%- do parts.append({'key': 'projections', 'json': true, 'sql': vcmt._json_rows_sql({'name': 'name',
      'query': 'query', 'type': 'type'}, 'from system.projections where ' ~ target)}) -%}
  {%- do parts.append({'key': 'indexes', 'json': true, 'sql': vcmt._json_rows_sql({'name': 'name', 'expr': 'expr'},
      'from system.data_skipping_indices where ' ~ target)}) -%}
  {#- The engine's defaults of the settings the target's CREATE names (stored_layout.sql). -#}
  {%- do parts.append({'key': 'defaults', 'json': true, 'sql': vcmt._json_rows_sql({'name': 'name', 'value': 'value'},
      "from system.merge_tree_settings where position(ifNull((select any(create_table_query) from system.tables "
      ~ "where database = " ~ vcmt._sql_string(schema) ~ " and name = " ~ vcmt._sql_string(objs.target.identifier)
      ~ "), ''), concat(' ', name, ' = ')) > 0")}) -%}
  {#- The config's SQL, as the engine parses it (check.sql): NULL where it cannot. -#}
  {%- set failed = [] -%}
  {%- for what, sql, fix in probes -%}{%- do failed.append('isNull(formatQueryOrNull(' ~ vcmt._sql_string(sql)
      ~ '))') -%}{%- endfor -%}
  {%- do parts.append({'key': 'probes', 'json': true, 'sql': 'select toJSONString([' ~ failed | join(', ')
      ~ ']::Array(UInt8))'}) -%}
  {%- do parts.append({'key': 'order_items', 'json': false, 'sql': 'select formatQuerySingleLineOrNull('
      ~ vcmt._sql_string('select ' ~ vcmt._user_sql_list(cfg.order_by)) ~ ')'}) -%}
  {%- if not rebuild -%}
    {%- do parts.append({'key': 'create_target', 'json': false, 'sql': 'select formatQuerySingleLineOrNull('
        ~ vcmt._sql_string(vcmt.create_target_sql(cfg, objs.target, columns)) ~ ')'}) -%}
    {#- Whether each view rewritten when its SELECT changes (lifecycle.sql) is stored as this config writes it. -#}
    {%- set same = [] -%}
    {%- for role, to, select_sql in vcmt._views(cfg, objs, columns)
        if vcmt._object(role).get('modify_when_changed') -%}
      {%- do same.append(vcmt._sql_string(role) ~ ', toString(ifNull((select formatQueryOrNull(any(as_select)) '
          ~ 'from system.tables where database = ' ~ vcmt._sql_string(schema) ~ ' and name = '
          ~ vcmt._sql_string(objs[role].identifier) ~ ') = formatQueryOrNull(' ~ vcmt._sql_string(select_sql)
          ~ '), 0))') -%}
    {%- endfor -%}
    {%- do parts.append({'key': 'views_same', 'json': true, 'sql': 'select toJSONString(map(' ~ same | join(', ')
        ~ '))'}) -%}
    {#- Whether each configured projection is stored as configured (schema_changes.sql). -#}
    {%- set same = [] -%}
    {%- for p in cfg.projections -%}
      {%- do same.append(vcmt._sql_string(p['name']) ~ ', toString(ifNull((select formatQueryOrNull(any(query)) '
          ~ 'from system.projections where ' ~ target ~ ' and name = ' ~ vcmt._sql_string(p['name'])
          ~ ') = formatQueryOrNull(' ~ vcmt._sql_string(p['query']) ~ '), 0))') -%}
    {%- endfor -%}
    {%- do parts.append({'key': 'projections_same', 'json': true, 'sql': 'select toJSONString(map('
        ~ same | join(', ') ~ ')::Map(String, String))'}) -%}
    {#- A sharded model's Distributed tables as this config creates them (sharding.sql `_check_stored_routing`). -#}
    {%- set routing = [] -%}
    {%- for role, local in vcmt._distributed_pairs() if role in objs -%}
      {%- do routing.append(vcmt._sql_string(role) ~ ', formatQuerySingleLineOrNull('
          ~ vcmt._sql_string(vcmt._create_distributed_sql(cfg, objs[role], objs[local])) ~ ')') -%}
    {%- endfor -%}
    {%- do parts.append({'key': 'routing', 'json': true, 'sql': 'select toJSONString(map(' ~ routing | join(', ')
        ~ ')::Map(String, String))'}) -%}
  {%- endif -%}
  {#- The lock (lock.sql), on its node; its table exists from a model's first load of this version on. -#}
  {%- set lock = vcmt._lock_relation(vcmt._model_relation(objs.target)) -%}
  {%- if adapter.get_relation(database=lock.database, schema=lock.schema, identifier=lock.identifier) is not none -%}
    {%- set fields = {} -%}
    {%- for f in vcmt._lock_state_fields() -%}{%- do fields.update({f: f}) -%}{%- endfor -%}
    {%- do parts.append({'key': 'lock', 'json': true, 'sql': vcmt._json_rows_sql(fields, 'from ('
        ~ vcmt._lock_state_sql(vcmt._model_relation(objs.target)) ~ ')')}) -%}
  {%- endif -%}
  {#- The applied totals before this run's load (report.sql), valid once it holds the lock (lock.sql). A sharded
      model's are read by the load after its placement check (sharding.sql `_checked_placement`): across the
      shards, a shard added to the cluster lacks the table, and the read would fail before the check names it. -#}
  {%- if not rebuild and not vcmt._sharded(objs) and objs.applied.identifier in vcmt._cached_names(objs) -%}
    {%- do parts.append({'key': 'applied', 'json': true, 'sql': vcmt._json_rows_sql({'inserted': 'inserted',
        'updated': 'updated', 'deleted': 'deleted'}, 'from (' ~ vcmt._applied_totals_sql(objs) ~ ')')}) -%}
  {%- endif -%}
  {%- set obs = vcmt._observe_parts(parts) -%}
  {%- do obs.update({'found': vcmt._found_in(obs.tables, objs)}) -%}
  {%- if not cluster -%}
    {%- set nodes = [] -%}
    {%- for t in obs.tables -%}
      {%- do nodes.append({'node': obs.node, 'name': t.name, 'comment': t.comment, 'engine': t.engine}) -%}
    {%- endfor -%}
    {%- do obs.update({'nodes': nodes}) -%}
  {%- endif -%}
  {%- do obs.update({'lock': vcmt._lock_state_row(obs.lock[0], vcmt._model_relation(objs.target))
                             if obs.get('lock') else none}) -%}
  {{ return(obs) }}
{% endmacro %}


{#- On the model's cluster, who holds `relation`, from the run's observation, as engine/catalog.sql
    `_nodes_holding` reads it: {nodes, shards, holding, shards_holding}. -#}
{% macro _observed_holding(relation, obs) %}
  {%- set holding = obs.nodes | selectattr('name', 'equalto', relation.identifier) | map(attribute='node') | list -%}
  {%- set shards = [] -%}
  {%- for label in holding -%}
    {%- set shard = label.split(' (')[0] -%}
    {%- if shard not in shards -%}{%- do shards.append(shard) -%}{%- endif -%}
  {%- endfor -%}
  {{ return({'nodes': obs.cluster.nodes | int, 'shards': obs.cluster.shards | int, 'holding': holding | sort,
             'shards_holding': shards | length}) }}
{% endmacro %}


{#- The names of `objs` that dbt's relation cache (filled at the run's start) holds. -#}
{% macro _cached_names(objs) %}
  {%- set names = [] -%}
  {%- for rel in objs.values() if adapter.get_relation(database=rel.database, schema=rel.schema,
      identifier=rel.identifier) is not none -%}{%- do names.append(rel.identifier) -%}{%- endfor -%}
  {{ return(names) }}
{% endmacro %}


{#- name -> {engine, comment, as_select, create_table_query, sorting_key}
    of the objects of `objs` among observed catalog rows (`tables`). -#}
{% macro _found_in(tables, objs) %}
  {%- set names = [] -%}
  {%- for rel in objs.values() -%}{%- do names.append(rel.identifier) -%}{%- endfor -%}
  {%- set found = {} -%}
  {%- for t in tables if t.name in names -%}{%- do found.update({t.name: t}) -%}{%- endfor -%}
  {{ return(found) }}
{% endmacro %}


{#- The observed columns of table `name`, in order, as [{name, data_type,
    partition, sorting, primary, sampling}] (flags as '0'/'1'). -#}
{% macro _observed_columns(obs, name) %}
  {{ return(obs.columns | selectattr('table', 'equalto', name) | list) }}
{% endmacro %}


{#- For the lifecycle's fast tests (tests/lifecycle): logs `vcmt_observation {...}`, what a run of the model
    `model` would observe now (its config read as the run reads it, its columns as its target stores them), as
    JSON. Nothing is written.
      dbt run-operation vcmt._log_observation --args '{model: fct_orders}' -#}
{% macro _log_observation(model, rebuild=false) %}
  {%- set nodes = graph.nodes.values() | selectattr('resource_type', 'equalto', 'model')
      | selectattr('name', 'equalto', model) | list -%}
  {%- set cfg = vcmt._read_config(nodes[0].config) -%}
  {%- set objs = vcmt.objects(vcmt._node_target(nodes[0]), cfg.sharding_key) -%}
  {%- set columns = vcmt._catalog_columns(objs.target) -%}
  {%- set cfg = vcmt._sorting_key_default(cfg, columns, none if rebuild else objs.target) -%}
  {%- set obs = vcmt._observe_model(cfg, objs, columns, rebuild, vcmt._syntax_probes(cfg)) -%}
  {%- set shown = {} -%}
  {%- do shown.update(obs) -%}
  {%- if obs.lock -%}
    {%- set lock = {} -%}{%- do lock.update(obs.lock) -%}{%- do lock.pop('relation') -%}
    {%- do shown.update({'lock': lock}) -%}
  {%- endif -%}
  {%- set names = {} -%}
  {%- for role, rel in objs.items() -%}{%- do names.update({role: rel.identifier}) -%}{%- endfor -%}
  {%- set config = {} -%}{%- do config.update(cfg) -%}{%- do config.pop('_run') -%}
  {{ log('vcmt_observation ' ~ tojson({'model': model, 'schema': objs.target.schema, 'objects': names,
      'cfg': config, 'columns': columns, 'obs': shown}), info=true) }}
{% endmacro %}
