{#- The objects one vcmt_upsert model owns. Their names are a public contract:
    external writers insert into `<model>__stage`, tests read `<model>`.

    With a `sharding_key` (on a dbt-clickhouse `cluster`) the target and the
    stage are per-shard tables named with dbt-clickhouse's local suffix
    (`<model>_local`, `<model>__stage_local`), and the public names belong to
    Distributed tables over them, roles `distributed` and `distributed_stage`
    (docs/design.md#sharded-clusters). The views and helper tables are per
    shard under their usual names.

    `batch` is the base of a load's batch table: each load's is named by its
    lock's generation, `<model>__batch_<n>` (_generation_batch). -#}
{% macro objects(target, sharding_key=none) %}
  {{ return(adapter.dispatch('objects', 'vcmt')(target, sharding_key)) }}
{% endmacro %}

{% macro default__objects(target, sharding_key=none) %}
  {%- set names = {
      'stage': 'stage',
      'transform': 'transform',
      'tombstones': 'tombstones',
      'tombstones_writer': 'tombstones_writer',
      'cancels_writer': 'tombstones_from_cancels',
      'applied': 'applied',
      'applied_writer': 'applied_writer',
      'loads': 'loads',
      'truncates': 'truncates',
      'batch': 'batch',
  } -%}
  {%- set local = adapter.get_clickhouse_local_suffix() if sharding_key else '' -%}
  {%- set identifiers = {'target': target.identifier ~ local} -%}
  {%- for role, suffix in names.items() -%}
    {%- do identifiers.update({role: target.identifier ~ '__' ~ suffix ~ (local if role == 'stage' else '')}) -%}
  {%- endfor -%}
  {%- if sharding_key -%}
    {%- do identifiers.update({'distributed': target.identifier, 'distributed_stage': target.identifier ~ '__'
        ~ names.stage}) -%}
  {%- endif -%}
  {%- set objs = {} -%}
  {%- for role, identifier in identifiers.items() -%}
    {#- Helpers follow the target onto the cluster (dbt-clickhouse's can_on_cluster). -#}
    {%- set rel = api.Relation.create(database=target.database, schema=target.schema,
                                      identifier=identifier, type='table',
                                      can_on_cluster=target.can_on_cluster) -%}
    {%- do objs.update({role: rel}) -%}
  {%- endfor -%}
  {{ return(objs) }}
{% endmacro %}


{#- Drop every object of the model (only those in `found` when given), views
    first so no writer ever sees a stage without its transform. -#}
{% macro _drop_objects(objs, found=none) %}
  {%- set order = ['distributed_stage', 'distributed', 'transform', 'tombstones_writer', 'cancels_writer',
      'applied_writer', 'stage'] -%}
  {%- for role in objs.keys() if role not in order -%}{%- do order.append(role) -%}{%- endfor -%}
  {%- for role in order if role in objs and (found is none or objs[role].identifier in found) -%}
    {%- do vcmt._check_fence(objs.target) -%}
    {%- call statement('vcmt_drop_' ~ role) -%}
      {{ vcmt._drop_sql(objs[role]) }}
    {%- endcall -%}
  {%- endfor -%}
{% endmacro %}


{#- The batch table of the load holding the lock's generation `gen` of
    the model `objs` belong to (its full refresh's staging objects too), or
    the base name when `gen` is none. One name per load: a load that was
    taken over while it was stopped, resumed, can create, read and drop
    only its own batch, never the batch of the load that took over (DDL
    takes no fence; docs/design.md#one-load-at-a-time). -#}
{% macro _generation_batch(objs, gen) %}
  {%- set model = vcmt._model_relation(vcmt._public_relation(objs)) -%}
  {%- set base = vcmt.objects(model, sharding_key=vcmt._sharded(objs) or none).batch -%}
  {{ return(base if gen is none else base.incorporate(path={'identifier': base.identifier ~ '_' ~ gen})) }}
{% endmacro %}

{#- Drop, on every node, the batch tables of generations older than `gen`
    (left by a load that was killed or failed), and vcmt 0.3's `m__batch`.
    Run by the holder of generation `gen`, which fenced every older one out. -#}
{% macro _drop_older_batches(objs, gen) %}
  {%- set base = vcmt._generation_batch(objs, none) -%}
  {%- set older = [] -%}
  {%- for row in vcmt._objects_on_every_node(objs.target, [base.identifier], prefix=base.identifier ~ '_') -%}
    {%- set tail = row.name[(base.identifier | length) + 1:] -%}
    {%- if row.name not in older and (row.name == base.identifier or (tail.isdigit() and tail | int < gen)) -%}
      {%- do older.append(row.name) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for name in older -%}
    {%- call statement('vcmt_drop_older_batch') -%}
      {{ vcmt._drop_sql(base.incorporate(path={'identifier': name})) }}
    {%- endcall -%}
  {%- endfor -%}
{% endmacro %}


{#- Where --full-refresh builds a model's new tables before swapping them in
    (`<model>__vcmt_new`, `<model>__vcmt_new__stage`, ...). -#}
{% macro _staging_suffix() %}{{ return('__vcmt_new') }}{% endmacro %}

{#- The relation users name and read: a sharded model's Distributed table,
    else its target. -#}
{% macro _public_relation(objs) %}
  {{ return(objs.distributed if vcmt._sharded(objs) else objs.target) }}
{% endmacro %}

{#- A sharded model's staging set is sharded too (`<model>__vcmt_new_local` under
    `<model>__vcmt_new`, a Distributed table), named from the model's public name. -#}
{% macro _staging_objects(objs) %}
  {%- set model = vcmt._public_relation(objs) -%}
  {{ return(vcmt.objects(model.incorporate(path={'identifier': model.identifier ~ vcmt._staging_suffix()}),
                         sharding_key=vcmt._sharded(objs) or none)) }}
{% endmacro %}


{#- The model's own relation for one of `_staging_objects`' (itself for any
    other): a full refresh loads its staging objects under the model's lock. -#}
{% macro _model_relation(relation) %}
  {%- set suffix = vcmt._staging_suffix() -%}
  {#- A sharded model's local tables: `<model>__vcmt_new_local` is `<model>_local`'s. -#}
  {%- set local = adapter.get_clickhouse_local_suffix() -%}
  {%- for tail, kept in [(suffix, ''), (suffix ~ local, local)] if relation.identifier.endswith(tail) -%}
    {{ return(relation.incorporate(path={'identifier': relation.identifier[:-(tail | length)] ~ kept})) }}
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
