{#- Sharded models (`sharding_key` with dbt-clickhouse's `cluster`;
    docs/design.md#sharded-clusters): which objects are Distributed, how a
    statement reaches every shard, the key's checks and the routing tables. -#}


{#- Whether `objs` are a sharded model's (docs/design.md#sharded-clusters). -#}
{% macro _sharded(objs) %}
  {%- for o in vcmt._roles_of('distributed') if o.role in objs -%}{{ return(true) }}{%- endfor -%}
  {{ return(false) }}
{% endmacro %}


{#- What a statement names to reach every shard's `role` object: the object
    itself when the model is not sharded; on a sharded model the Distributed
    table for the target and the stage (reads of the target, INSERTs into the
    stage), and `clusterAllReplicas()` for a helper table. Helper tables are
    not replicated: each replica holds what the inserts it received wrote, so
    the union over all replicas is the model's whole record
    (docs/design.md#sharded-clusters). -#}
{% macro _all_shards(objs, role) %}
  {%- if not vcmt._sharded(objs) -%}{{ return(objs[role] | string) }}{%- endif -%}
  {%- for distributed, local in vcmt._distributed_pairs() if local == role -%}
    {{ return(objs[distributed] | string) }}
  {%- endfor -%}
  {{ return(vcmt._every_replica(objs[role])) }}
{% endmacro %}


{#- What a read names to reach `relation`'s table on every replica of the
    profile's cluster: `clusterAllReplicas()` over it. -#}
{% macro _every_replica(relation) %}
  {{ return('clusterAllReplicas(' ~ vcmt._sql_string(vcmt._cluster_name()) ~ ', ' ~ vcmt._sql_string(relation.schema)
            ~ ', ' ~ vcmt._sql_string(relation.identifier) ~ ')') }}
{% endmacro %}


{#- What a read names to reach a table a model creates ON CLUSTER and each
    node writes alone (`relation`): the union over every replica on a
    cluster (`_every_replica`), else the table itself. -#}
{% macro _on_every_node(relation) %}
  {{ return(vcmt._every_replica(relation) if on_cluster_clause(relation) | trim else relation | string) }}
{% endmacro %}


{#- Per node of the model's cluster, {node label: (rows, checksum)} of the
    rows of table `relation` where `condition` holds (run on each node), as
    its engine merges them (`final = 1`; a plain MergeTree or Null table is
    read as it is): the same whatever merges have run. -#}
{% macro _checksums_by_node(relation, columns, condition, holder_of=none) %}
  {%- set node = vcmt._node_label_sql(vcmt._cluster_name()) -%}
  {%- set settings = {'final': 1, 'skip_unavailable_shards': 0} -%}
  {%- do settings.update(vcmt._holder_settings(holder_of)) -%}
  {%- set rows = run_query("select " ~ node ~ " as node, count(), sum(cityHash64(toString(tuple("
      ~ vcmt._column_list(columns | map(attribute='name') | list) ~ ")))) from " ~ vcmt._every_replica(relation)
      ~ " where " ~ condition ~ " group by node " ~ vcmt._settings_clause(settings)).rows -%}
  {%- set out = {} -%}
  {%- for row in rows -%}{%- do out.update({row[0]: (row[1] | int, row[2] | int)}) -%}{%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{#- The profile's dbt-clickhouse `cluster`, unquoted, or none. -#}
{% macro _cluster_name() %}
  {%- set quoted = adapter.get_clickhouse_cluster_name() -%}
  {{ return(quoted[1:-1] if quoted else none) }}
{% endmacro %}


{#- A `sharding_key` decides which shard owns a key, so it must be a function
    of the `unique_key` columns only, and always give a key the same value: a
    key whose events land on two shards has two live rows and collapses on
    neither (docs/design.md#sharded-clusters). The engine parses the
    expression (_explain_ast) and names its identifiers and functions; no
    regex guesses at SQL. Then the value must be an integer (the Distributed
    engine takes it modulo the shards' total weight), and the profile must
    name a cluster. -#}
{% macro _check_sharding_key(cfg, columns, target) %}
  {%- if not cfg.sharding_key -%}{{ return(none) }}{%- endif -%}
  {%- set expr = cfg.sharding_key -%}
  {%- set what = "vcmt_upsert " ~ target.identifier ~ ": `sharding_key` (" ~ expr ~ ")" -%}
  {%- set fix = " Write it over the key only, e.g. sharding_key='cityHash64(" ~ cfg.key_columns | join(', ')
      ~ ")'. Nothing was created or changed." -%}
  {#- The syntax was checked with the rest of the config (_check_syntax). -#}
  {%- set select_list = vcmt._explain_ast('select (' ~ vcmt._user_sql(expr)
      ~ ')').children[0].children[0].children[0].children[0] -%}
  {%- set names = {'Identifier': [], 'Function': []} -%}
  {%- for kind in names.keys() -%}
    {%- set nodes = [] -%}
    {%- do vcmt._ast_find(select_list, kind, none, nodes) -%}
    {%- for node in nodes if node.name not in names[kind] -%}{%- do names[kind].append(node.name) -%}{%- endfor -%}
  {%- endfor -%}
  {%- set others = names.Identifier | reject('in', cfg.key_columns) | list -%}
  {%- if others -%}
    {{ exceptions.raise_compiler_error(what ~ " must be a function of `unique_key` " ~ cfg.key_columns
        ~ " only, but it reads " ~ others ~ ". The shard of a key must never change: when two events of one key are "
        ~ "routed to two shards, each shard keeps a live row and neither can collapse them." ~ fix) }}
  {%- endif -%}
  {%- set varying = vcmt._nondeterministic_functions(names.Function) -%}
  {%- if varying -%}
    {{ exceptions.raise_compiler_error(what ~ " must give a key the same value every time, but " ~ varying
        ~ " can return another value for the same `unique_key` " ~ cfg.key_columns ~ " (the engine does not mark it "
        ~ "deterministic; a SQL function is never marked), which would send events of one key to two shards."
        ~ fix) }}
  {%- endif -%}
  {%- set types = vcmt._types_by_name(columns) -%}
  {%- set keys = [] -%}
  {%- for k in cfg.key_columns -%}
    {%- do keys.append('defaultValueOfTypeName(' ~ vcmt._sql_string(types[k]) ~ ') as ' ~ vcmt._quote(k)) -%}
  {%- endfor -%}
  {%- set type = run_query('select toTypeName((' ~ vcmt._user_sql(expr) ~ ')) from (select ' ~ keys | join(', ')
      ~ ')').rows[0][0] -%}
  {#- The Distributed engine creates a table over a wider integer, then
      refuses every INSERT into it (TYPE_MISMATCH). -#}
  {%- if not modules.re.match('^U?Int(8|16|32|64)$', type) -%}
    {{ exceptions.raise_compiler_error(what ~ " must return an integer of 64 bits at most (the Distributed engine "
        ~ "picks shard number `value % total weight`, and refuses every INSERT when the value is wider); it returns "
        ~ type ~ "." ~ fix) }}
  {%- endif -%}
  {%- if vcmt._cluster_name() is none -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert " ~ target.identifier ~ ": `sharding_key` needs dbt-clickhouse's "
        ~ "`cluster` in the profile: the model becomes a Distributed table over one local table per shard of that "
        ~ "cluster, and without a cluster there is one node and nothing to shard. Set `cluster: "
        ~ "<name>` in the profile target, or remove `sharding_key` from the model. Nothing was created or changed.") }}
  {%- endif -%}
{% endmacro %}


{#- A sharded model's public table over its per-shard `local` one: rows go
    to shard number `sharding_key % total weight` of the profile's cluster,
    reads gather every shard (docs/design.md#sharded-clusters). -#}
{% macro _create_distributed_sql(cfg, relation, local, replace=false) %}
  create {{ 'or replace ' if replace }}table {{ relation }} {{ on_cluster_clause(relation) }} as {{ local }}
  engine = Distributed({{ vcmt._sql_string(vcmt._cluster_name()) }}, {{ vcmt._sql_string(local.schema) }},
                       {{ vcmt._sql_string(local.identifier) }}, {{ vcmt._user_sql(cfg.sharding_key) }})
{% endmacro %}


{#- A sharded model's routing as stored: a new `sharding_key` (or cluster),
    or the cluster's shards placing keys otherwise, would send a stored key's
    next events to another shard (docs/design.md#sharded-clusters). Part of
    _check_stored_layout, and of vcmt.load_stage (`what` names the run). The
    key first: the placement check computes the configured key on each
    shard's rows, so a changed key must be named as such. -#}
{% macro _check_stored_routing(cfg, objs, found, refresh, what=none, obs=none) %}
  {%- set what = what or 'vcmt_upsert ' ~ vcmt._public_relation(objs).identifier -%}
  {%- for role, local in vcmt._distributed_pairs() if role in objs
      and objs[role].identifier in found -%}
    {#- A Distributed table created AS its local table copies its comment (a full refresh's generation). -#}
    {%- set stored_engine = modules.re.sub(" COMMENT '(?:[^'\\\\]|\\\\.)*'$", '',
        found[objs[role].identifier].create_table_query.split(' ENGINE = ')[-1]) -%}
    {%- set wanted_engine = (obs.routing[role] if obs is not none else run_query("select formatQuerySingleLine("
        ~ vcmt._sql_string(vcmt._create_distributed_sql(cfg, objs[role], objs[local]))
        ~ ")").rows[0][0]).split(' ENGINE = ')[-1] -%}
    {%- if stored_engine != wanted_engine -%}
      {{ exceptions.raise_compiler_error(what ~ ": `sharding_key` (or the profile's `cluster`) changed, but "
          ~ objs[role] ~ " routes by what it was created with: stored `" ~ stored_engine ~ "`; got `" ~ wanted_engine
          ~ "`. A key's next events would go to another shard than its stored row." ~ refresh) }}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}


{#- A sharded model's placement: `now`, the profile's cluster's shard
    weights in shard order ('1,1'); `recorded`, the last one its loads
    recorded (`shards` in `<model>__loads`) and `at`, when; and `moved`, the
    shards whose stored rows the cluster no longer routes to them
    (_shards_moved). All '' (`moved` []) when the model is not sharded;
    `recorded` '' when no load recorded one (a model built before vcmt
    recorded it). Records are read on every node that answers and holds the
    table: all agree until the placement changes, since each load checks it
    first, and a node added since holds none. -#}
{% macro _shard_placement(cfg, objs) %}
  {%- if not vcmt._sharded(objs) -%}{{ return({'now': '', 'recorded': '', 'at': '', 'moved': []}) }}{%- endif -%}
  {%- set cluster = vcmt._cluster_name() -%}
  {%- set settings = vcmt._pinned_query_settings() -%}
  {%- do settings.update({'skip_unavailable_shards': 1, 'load_balancing': 'in_order'}) -%}
  {#- One read: the weights, the slots, the last record, and each shard's sample (_shards_moved). -#}
  {%- set row = run_query('select ' ~ vcmt._shard_weights_sql(cluster) ~ ', ' ~ vcmt._shard_slots_sql(cluster)
      ~ ", argMaxIf(shards, loaded_at, shards != ''), toString(maxIf(loaded_at, shards != '')), ("
      ~ vcmt._shard_samples_sql(cfg, objs) ~ ') from ' ~ vcmt._all_shards(objs, 'loads') ~ ' '
      ~ vcmt._settings_clause(settings)).rows[0] -%}
  {{ return({'now': row[0], 'recorded': row[2], 'at': row[3],
             'moved': vcmt._shards_moved(row[1].split(',') if row[1] else [], fromjson(row[4]))}) }}
{% endmacro %}


{#- The shards (labels: _node_label_sql) holding rows the cluster now routes
    elsewhere. Weights alone cannot show shards listed in another order, or a
    shard's nodes swapped for another's, in `remote_servers` (the record
    stays '1,1'), and each stored key's next events would then reach a shard
    that does not hold its live row. So each shard computes the sharding
    value of one row it stores, and the shard that value's slot belongs to
    (`slots`: _shard_slots_sql, read on the node that routes the loads'
    rows) must be that shard. The value is taken as the engine's insert does
    (createBlockSelector): unsigned, on 32 bits for a type of 4 bytes or
    fewer, else on 64. A shard that does not answer gives no row. -#}
{% macro _shard_samples_sql(cfg, objs) %}
  {{ return('select toJSONString(groupArray((' ~ vcmt._node_label_sql(vcmt._cluster_name()) ~ ', _shard_num, '
      ~ 'if(byteSize(_vcmt_value) <= 4, toUInt64(toUInt32(_vcmt_value)), toUInt64(_vcmt_value))))) from cluster('
      ~ vcmt._sql_string(vcmt._cluster_name()) ~ ', view(select (' ~ vcmt._user_sql(cfg.sharding_key)
      ~ ') as _vcmt_value from ' ~ objs.target ~ ' limit 1))') }}
{% endmacro %}

{#- The labels of the shards whose sample (`samples`: [label, shard, value]) falls in another shard's slot. -#}
{% macro _shards_moved(slots, samples) %}
  {%- if not slots -%}{{ return([]) }}{%- endif -%}
  {%- set moved = [] -%}
  {%- for label, shard, value in samples if slots[(value | int) % (slots | length)] | int != shard | int -%}
    {%- do moved.append(label) -%}
  {%- endfor -%}
  {{ return(moved | sort) }}
{% endmacro %}


{#- The Distributed engine sends a key to the shard that owns slot
    `sharding_key % total weight`, so a cluster given another shard, other
    weights or its shards in another order sends a stored key's next events
    to a shard that does not hold its live row: the key would be live twice,
    on two shards, silently. So the placement the model's last load recorded
    must be the cluster's now, and each shard's stored keys must still be
    routed to it (docs/design.md#sharded-clusters). Checked once, under the
    lock and before the run's first DDL or write (the materialization, or
    _load for vcmt.load_stage; `found`: the catalog, where a `<model>__loads`
    made before vcmt recorded it has no record); a refusal gives the lock
    back. Returns the placement, recorded by the load; none where the model
    has no record yet (its load reads the placement then). `what` names the
    run. -#}
{% macro _checked_placement(cfg, objs, found, what) %}
  {%- set loads = found.get(objs.loads.identifier, {}).get('create_table_query') -%}
  {%- if not vcmt._sharded(objs) -%}{{ return(vcmt._shard_placement(cfg, objs)) }}{%- endif -%}
  {%- if not loads or not vcmt._stored_has_column(loads, 'shards') -%}{{ return(none) }}{%- endif -%}
  {%- set placed = vcmt._shard_placement(cfg, objs) -%}
  {%- if vcmt._placement_changed(placed) -%}
    {%- do vcmt._refuse_under_lock(objs, vcmt._placement_refusal(objs, placed, what)) -%}
  {%- endif -%}
  {{ return(placed) }}
{% endmacro %}


{#- Whether the cluster places keys otherwise than the model's last load. -#}
{% macro _placement_changed(placed) %}
  {{ return(placed.moved | length > 0 or (placed.recorded != '' and placed.now != placed.recorded)) }}
{% endmacro %}


{% macro _placement_refusal(objs, placed, what) %}
  {%- set model = vcmt._public_relation(objs).identifier -%}
  {%- set cluster = "the cluster `" ~ vcmt._cluster_name() ~ "` " -%}
  {%- if placed.recorded != '' and placed.now != placed.recorded -%}
    {%- set cause = cluster ~ "now places keys on shards weighted `" ~ placed.now ~ "` (in shard order), but "
        ~ model ~ "'s rows were placed by `" ~ placed.recorded ~ "` (its last load, at " ~ placed.at ~ ")" -%}
  {%- else -%}
    {%- set cause = cluster ~ "no longer routes the rows stored on " ~ placed.moved | join(', ') ~ " there: a key "
        ~ model ~ " holds there now goes to another shard (" ~ ("the shards were reordered, or a shard's nodes "
        ~ "swapped for another's, in `remote_servers`; the weights `" ~ placed.now ~ "` did not change"
        if placed.recorded else "the cluster's shards changed in `remote_servers` since the rows were placed; no load "
        ~ "of the model recorded its shards yet, and they are weighted `" ~ placed.now ~ "` now") ~ ")" -%}
  {%- endif -%}
  {{ return(what ~ ": " ~ cause ~ ". The Distributed engine sends a key to the shard owning `sharding_key % total "
      ~ "weight`, so a stored key's next events would reach a shard that does not hold its live row, and the key "
      ~ "would be live twice. Nothing was loaded. Run `dbt run --select " ~ model ~ " --full-refresh` to rebuild "
      ~ "every shard on the cluster's placement (the model's SELECT must then return every live row), or restore "
      ~ "the cluster's shards.") }}
{% endmacro %}
