{#- The objects one vcmt_upsert model owns, declared once, in the order a
    build creates them: `vcmt.objects` names them, and the lifecycle builds,
    swaps, reconciles, repairs and drops them by looping over this list.
    docs/design.md's Objects table lists the same objects (a test keeps it
    so). Their names are a public contract: external writers insert into
    `<model>__stage`, tests read `<model>`. Each object is a dict:
    - role: how the macros name it (`objs[role]`);
    - suffix: its name after the model's;
    - kind: `table` (the target), `helper` (a table of the model's own
      records), `stage`, `view` (a materialized view), `load_table` (a
      load's own, named by its lock's generation), `distributed` (a sharded model's
      public table over its `local` role's per-shard tables), or a name that
      is not one of `vcmt.objects`: `lock` (the lock's generations), `lake`
      (a mart's record of the lake files it read), `changes` (the change
      feed's next table while a load rebases it), `staging` (the full
      refresh's second set of objects), `guard` (the stage that refuses
      every INSERT while views are attached to its name);
    - of: [set, role]: named as that role of that set, not by a suffix of
      its own (the guard ends as the full refresh set's stage);
    - create: the macro that renders a table's CREATE, (cfg, relation,
      columns);
    - from, to, select: a view's source and destination roles, and the
      macro that renders its SELECT, (cfg, objs, columns);
    - only_with: [option, value]: it exists only when the config has that
      value (a view or a helper that is not wanted is dropped);
    - one_node: never on a cluster (its option is refused there): a full
      refresh drops it, unwanted, only where the observation found it;
    - modify_when_changed: a view rewritten in place (MODIFY QUERY) when its
      SELECT changes; the other views are only created when missing;
    - local_name: named with dbt-clickhouse's local suffix on a sharded model;
    - engine: a load table's engine (its views' is MaterializedView): an
      object of its name with another engine is not the load's, and is never
      dropped as one;
    - unnumbered_in: the vcmt version that named this load table without a
      generation (that name is dropped as an older generation's);
    - views: a load table with views of its own, named after it
      (_load_view), dropped with it (_drop_load_table), never by
      lifecycle/plans.sql `_plan_drop`: the virtual shards' fan-out (virtual_shards.sql);
    - swap: where a --full-refresh exchanges it, in this order;
    - drop: where it is dropped, in this order (views before their stage).
    With a `sharding_key` (on a dbt-clickhouse `cluster`) the target and the
    stage are per-shard tables (`<model>_local`, `<model>__stage_local`) and
    their public names belong to the `distributed` objects
    (docs/design.md#sharded-clusters). Keep this macro a literal: the tests
    render it without dbt. -#}
{% macro _object_roles() %}
  {{ return([
      {'role': 'target', 'suffix': '', 'kind': 'table', 'create': 'create_target_sql', 'local_name': true,
       'swap': 6, 'drop': 9},
      {'role': 'tombstones', 'suffix': '__tombstones', 'kind': 'helper', 'create': '_create_tombstones_sql',
       'swap': 1, 'drop': 10},
      {'role': 'applied', 'suffix': '__applied', 'kind': 'helper', 'create': '_create_applied_sql', 'swap': 2,
       'drop': 11},
      {'role': 'changes', 'suffix': '__changes', 'kind': 'helper', 'create': '_create_changes_sql', 'swap': 3,
       'only_with': ['changes', true], 'one_node': true, 'drop': 12},
      {'role': 'loads', 'suffix': '__loads', 'kind': 'helper', 'create': '_create_loads_sql', 'swap': 4, 'drop': 13},
      {'role': 'truncates', 'suffix': '__truncates', 'kind': 'helper', 'create': '_create_truncates_sql',
       'swap': 5, 'drop': 14},
      {'role': 'applied_writer', 'suffix': '__applied_writer', 'kind': 'view', 'from': 'target', 'to': 'applied',
       'select': '_applied_writer_sql', 'drop': 6},
      {'role': 'cancels_writer', 'suffix': '__tombstones_from_cancels', 'kind': 'view', 'from': 'target',
       'to': 'tombstones', 'select': '_cancels_writer_sql', 'only_with': ['delete_mode', 'unconditional'],
       'drop': 5},
      {'role': 'changes_writer', 'suffix': '__changes_writer', 'kind': 'view', 'from': 'target', 'to': 'changes',
       'select': '_changes_writer_sql', 'only_with': ['changes', true], 'one_node': true, 'drop': 7},
      {'role': 'stage', 'suffix': '__stage', 'kind': 'stage', 'local_name': true, 'swap': 7, 'drop': 8},
      {'role': 'transform', 'suffix': '__transform', 'kind': 'view', 'from': 'stage', 'to': 'target',
       'select': 'transform_sql', 'modify_when_changed': true, 'drop': 3},
      {'role': 'tombstones_writer', 'suffix': '__tombstones_writer', 'kind': 'view', 'from': 'stage',
       'to': 'tombstones', 'select': '_tombstones_writer_sql', 'drop': 4},
      {'role': 'batch', 'suffix': '__batch', 'kind': 'load_table', 'engine': 'MergeTree', 'drop': 15,
       'unnumbered_in': '0.3'},
      {'role': 'fanout', 'suffix': '__fanout', 'kind': 'load_table', 'engine': 'Null', 'views': true},
      {'role': 'distributed', 'suffix': '', 'kind': 'distributed', 'local': 'target', 'drop': 2},
      {'role': 'distributed_stage', 'suffix': '__stage', 'kind': 'distributed', 'local': 'stage', 'drop': 1},
      {'role': 'lock', 'suffix': '__lock', 'kind': 'lock'},
      {'role': 'lake_batches', 'suffix': '__lake_batches', 'kind': 'lake'},
      {'role': 'lake_files', 'suffix': '__lake_files', 'kind': 'lake'},
      {'role': 'changes_next', 'suffix': '__changes_next', 'kind': 'changes'},
      {'role': 'staging', 'suffix': '__vcmt_new', 'kind': 'staging'},
      {'role': 'mend', 'suffix': '__vcmt_mend', 'kind': 'staging'},
      {'role': 'mend_source', 'suffix': '__vcmt_mend_src', 'kind': 'staging'},
      {'role': 'guard', 'kind': 'guard', 'of': ['staging', 'stage']},
  ]) }}
{% endmacro %}


{#- A dict that lives as long as the dbt context rendering this macro (one
    model's execution, one hook, one operation), where vcmt keeps the answers
    of pure macros, keyed by all they depend on: `_object_roles`' lookups,
    `default__objects`, `_settings_clause`. A run asks for them hundreds of times, and
    a macro call costs dbt a copy of its whole context. Kept under `context`
    (dbt's context dict itself); a renderer without one gets a new memo at
    every call, so nothing is kept. Never for anything read from the engine. The hottest
    lookups read it as `context._vcmt_memo` and call this only the first
    time. -#}
{% macro _memo() %}
  {%- set kept = context is defined and context is mapping -%}
  {%- if kept and context.get('_vcmt_memo') is not none -%}{{ return(context._vcmt_memo) }}{%- endif -%}
  {%- set memo = {'roles': vcmt._object_roles(), 'by_kind': {}, 'by_role': {}, 'objects': {}, 'settings': {}} -%}
  {%- for o in memo.roles -%}
    {%- do memo.by_kind.setdefault(o.kind, []).append(o) -%}
    {%- do memo.by_role.update({o.role: o}) -%}
  {%- endfor -%}
  {%- if kept -%}{%- do context.update({'_vcmt_memo': memo}) -%}{%- endif -%}
  {{ return(memo) }}
{% endmacro %}

{#- The declared objects (_object_roles), once per context. -#}
{% macro _declared_roles() %}
  {%- set memo = context._vcmt_memo if context is defined and context._vcmt_memo is defined
                  else vcmt._memo() -%}
  {{ return(memo.roles) }}
{% endmacro %}

{#- The declared objects of kind `kind`, in declaration order (a list of the caller's own). -#}
{% macro _roles_of(kind) %}
  {%- set memo = context._vcmt_memo if context is defined and context._vcmt_memo is defined
                  else vcmt._memo() -%}
  {{ return(memo.by_kind.get(kind, []) | list) }}
{% endmacro %}

{#- The declared object `role`; undefined for an undeclared one, as `first` of nothing is (`by_role[role]`
    would reach the dict's own attributes in dbt's sandbox, `items` for `'items'`). -#}
{% macro _object(role) %}
  {%- set memo = context._vcmt_memo if context is defined and context._vcmt_memo is defined
                  else vcmt._memo() -%}
  {{ return(memo.by_role[role] if role in memo.by_role else [] | first) }}
{% endmacro %}

{#- The declared name of `role` after the model's (a lock's and a batch's
    before their `_<generation>`). -#}
{% macro _object_suffix(role) %}
  {{ return(vcmt._object(role).suffix) }}
{% endmacro %}

{#- The declared objects that `objs` holds, ordered by `field` (swap, drop). -#}
{% macro _roles_by(objs, field) %}
  {%- set roles = vcmt._declared_roles() | selectattr(field, 'defined') | selectattr('role', 'in', objs) -%}
  {{ return(roles | sort(attribute=field) | map(attribute='role') | list) }}
{% endmacro %}

{#- A sharded model's (Distributed role, its local role) pairs. -#}
{% macro _distributed_pairs() %}
  {%- set pairs = [] -%}
  {%- for o in vcmt._roles_of('distributed') -%}{%- do pairs.append((o.role, o.local)) -%}{%- endfor -%}
  {{ return(pairs) }}
{% endmacro %}

{#- Whether the config `cfg` wants the declared object `o` (its `only_with`). -#}
{% macro _object_wanted(o, cfg) %}
  {{ return(not o.get('only_with') or cfg[o.only_with[0]] == o.only_with[1]) }}
{% endmacro %}


{#- The relations of a model's objects, by role (_object_roles: the kinds
    that `objs` holds). Dispatched, so an adapter may rename them. -#}
{% macro objects(target, sharding_key=none) %}
  {{ return(adapter.dispatch('objects', 'vcmt')(target, sharding_key)) }}
{% endmacro %}

{#- Kept per context (_memo), by all it reads: an override of `objects` is not kept. Each caller gets its own
    dict (the lock puts its generation's load tables in its own). -#}
{% macro default__objects(target, sharding_key=none) %}
  {%- set memo = context._vcmt_memo if context is defined and context._vcmt_memo is defined
                  else vcmt._memo() -%}
  {%- set key = [target.database, target.schema, target.identifier, target.can_on_cluster, sharding_key] | string -%}
  {%- if key in memo.objects -%}{{ return(dict(memo.objects[key])) }}{%- endif -%}
  {%- set local = adapter.get_clickhouse_local_suffix() if sharding_key else '' -%}
  {%- set objs = {} -%}
  {%- for o in vcmt._declared_roles() if o.kind in ['table', 'helper', 'view', 'stage', 'load_table']
      or (o.kind == 'distributed' and sharding_key) -%}
    {#- Helpers follow the target onto the cluster (dbt-clickhouse's can_on_cluster). -#}
    {%- do objs.update({o.role: api.Relation.create(database=target.database, schema=target.schema,
        identifier=target.identifier ~ o.suffix ~ (local if o.get('local_name') else ''), type='table',
        can_on_cluster=target.can_on_cluster)}) -%}
  {%- endfor -%}
  {%- do memo.objects.update({key: dict(objs)}) -%}
  {{ return(objs) }}
{% endmacro %}


{#- The load table `role` (kind `load_table`: `m__batch`, `m__fanout`) of
    the load holding the lock's generation `gen` of the model `objs` belong
    to (its full refresh's staging objects too), or the base name when `gen`
    is none. One name per load: a load that was taken over while it was
    stopped, resumed, can create, read and drop only its own, never those of
    the load that took over (DDL takes no fence;
    docs/design.md#one-load-at-a-time). -#}
{% macro _generation_object(objs, role, gen) %}
  {%- set model = vcmt._model_relation(vcmt._public_relation(objs)) -%}
  {%- set base = vcmt.objects(model, sharding_key=vcmt._sharded(objs) or none)[role] -%}
  {{ return(base if gen is none else base.incorporate(path={'identifier': base.identifier ~ '_' ~ gen})) }}
{% endmacro %}

{#- View `i` of a load table that has views (`views` in _object_roles):
    `<name>_<i>`. -#}
{% macro _load_view(relation, i) %}
  {{ return(relation.incorporate(path={'identifier': relation.identifier ~ '_' ~ i})) }}
{% endmacro %}

{#- Drop a load table and, first, its views (i below `views`): nothing is
    left that writes through it. Only on this node, where the load made
    them (older generations' go on every node: _drop_older_load_tables). -#}
{% macro _drop_load_table(relation, views=0) %}
  {%- for i in range(views) -%}
    {%- call statement('vcmt_drop_load_view') -%}
      {{ vcmt._drop_sql(vcmt._load_view(relation, i), local=true) }}
    {%- endcall -%}
  {%- endfor -%}
  {%- call statement('vcmt_drop_load_table') -%}{{ vcmt._drop_sql(relation, local=true) }}{%- endcall -%}
{% endmacro %}

{#- What a load table's CREATE carries after its engine (`comment '...'`):
    the mark of a load's own table. _drop_older_load_tables drops a
    numbered table only with it, so a table merely named like one (a dbt
    `table` model called `x__batch_3`) is never dropped. -#}
{% macro _load_table_marker() %}{{ return('vcmt load table') }}{% endmacro %}

{% macro _load_table_comment() %}
  {{ return('comment ' ~ vcmt._sql_string(vcmt._load_table_marker())) }}
{% endmacro %}


{#- Drop, on every node, the load tables of generations older than `gen`
    (left by a load that was killed or failed), their views first, and those
    an older vcmt named without a generation (`unnumbered_in`). Run by the
    holder of generation `gen`, which fenced every older one out. Only
    objects of the declared engine, and numbered tables only with the load
    table's comment (_load_table_marker): another model may be named like
    one. `nodes`: the run's observation of the catalog (observe.sql), or
    none to read it now. -#}
{% macro _drop_older_load_tables(objs, gen, nodes=none) %}
  {%- set bases = {} -%}
  {%- for o in vcmt._roles_of('load_table') -%}
    {%- do bases.update({vcmt._generation_object(objs, o.role, none).identifier: o}) -%}
  {%- endfor -%}
  {%- set prefixes = [] -%}
  {%- for base in bases -%}{%- do prefixes.append(base ~ '_') -%}{%- endfor -%}
  {%- set older = [] -%}
  {%- set rows = vcmt._objects_on_every_node(objs.target, bases.keys() | list, prefixes=prefixes) if nodes is none
      else nodes -%}
  {%- for row in rows -%}
    {%- for base, o in bases.items() if row.name == base or row.name.startswith(base ~ '_') -%}
      {#- `<gen>`, or `<gen>_<i>` for a view of a load table that has views (_load_view). -#}
      {%- set parts = row.name[(base | length) + 1:].split('_') -%}
      {%- set view = true if parts | length == 2 and o.get('views') and parts[1].isdigit() else false -%}
      {%- set numbered = (parts | length == 1 or view) and parts[0].isdigit() and parts[0] | int < gen -%}
      {%- set unnumbered = row.name == base and o.get('unnumbered_in') -%}
      {%- set marked = view or unnumbered or row.comment == vcmt._load_table_marker() -%}
      {%- if (numbered or unnumbered) and marked and row.engine == ('MaterializedView' if view else o.engine)
          and (view, row.name) not in older -%}
        {%- do older.append((view, row.name)) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {#- Views before the tables they read. -#}
  {%- for view, name in older | sort(reverse=true) -%}
    {%- call statement('vcmt_drop_older_load_table') -%}
      {{ vcmt._drop_sql(objs.target.incorporate(path={'identifier': name})) }}
    {%- endcall -%}
  {%- endfor -%}
{% endmacro %}


{#- The relation users name and read: a sharded model's Distributed table,
    else its target. -#}
{% macro _public_relation(objs) %}
  {{ return(objs.distributed if vcmt._sharded(objs) else objs.target) }}
{% endmacro %}

{#- Where --full-refresh builds a model's new tables before swapping them in
    (`<model>__vcmt_new`, `<model>__vcmt_new__stage`, ...). A sharded
    model's staging set is sharded too (`<model>__vcmt_new_local` under
    `<model>__vcmt_new`, a Distributed table), named from the model's public name. -#}
{% macro _staging_objects(objs) %}
  {{ return(vcmt._set_named(objs, 'staging')) }}
{% endmacro %}

{#- The full set of `objs`' objects under the names of the declared staging
    object `role` (`<model><its suffix>...`). A split swap is mended with
    two such sets (_mend_split): each table's copy of the rebuild
    (`<model>__vcmt_mend...`) and the Merge table it is copied through
    (`<model>__vcmt_mend_src...`). -#}
{% macro _set_named(objs, role) %}
  {%- set model = vcmt._public_relation(objs) -%}
  {{ return(vcmt.objects(model.incorporate(path={'identifier': model.identifier ~ vcmt._object_suffix(role)}),
                         sharding_key=vcmt._sharded(objs) or none)) }}
{% endmacro %}

{#- The mend's two sets, as [copies, Merge tables]. -#}
{% macro _mend_sets(objs) %}
  {%- set sets = [] -%}
  {%- for o in vcmt._roles_of('staging') if o.role != 'staging' -%}
    {%- do sets.append(vcmt._set_named(objs, o.role)) -%}
  {%- endfor -%}
  {{ return(sets) }}
{% endmacro %}


{#- The model's own relation for one of a staging set's targets (itself for
    any other): a full refresh loads its staging objects, and a mend copies
    into its own, under the model's lock. -#}
{% macro _model_relation(relation) %}
  {#- A sharded model's local tables: `<model>__vcmt_new_local` is `<model>_local`'s. -#}
  {%- set local = adapter.get_clickhouse_local_suffix() -%}
  {%- for o in vcmt._roles_of('staging') -%}
    {%- for tail, kept in [(o.suffix, ''), (o.suffix ~ local, local)] if relation.identifier.endswith(tail) -%}
      {{ return(relation.incorporate(path={'identifier': relation.identifier[:-(tail | length)] ~ kept})) }}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(relation) }}
{% endmacro %}


{#- The target relation of a vcmt_upsert model's graph node, as the
    materialization's `this` is: on the profile's cluster unless the model
    sets `disable_on_cluster` (dbt-clickhouse's rule). For loads and hooks
    that run outside the model (vcmt.load_stage, the on-run-end hook). -#}
{% macro _node_target(node) %}
  {%- set on_cluster = adapter.get_clickhouse_cluster_name() is not none
                       and (node.config.get('disable_on_cluster') | string | lower) != 'true' -%}
  {{ return(api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias, type='table',
                                can_on_cluster=on_cluster)) }}
{% endmacro %}


{#- For tools outside dbt (the bench, the demo): logs `vcmt_objects {role: name}`
    for a model, so they find its objects without spelling their names.
      dbt run-operation vcmt._log_object_names --args '{model: fct_orders}' -#}
{% macro _log_object_names(model) %}
  {%- set rel = api.Relation.create(database=target.schema, schema=target.schema, identifier=model) -%}
  {#- A sharded model's names depend on its `sharding_key` (the project's model of that name, if any). -#}
  {%- set sharding_key = [] -%}
  {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.name == model -%}
    {%- do sharding_key.append(node.config.get('sharding_key')) -%}
  {%- endfor -%}
  {%- set names = {} -%}
  {%- for role, r in vcmt.objects(rel,
      sharding_key[0] if sharding_key else none).items() -%}{%- do names.update({role: r.identifier}) -%}{%- endfor -%}
  {{ log('vcmt_objects ' ~ tojson(names), info=true) }}
{% endmacro %}
