{#- The materialized views the config wants (model/objects.sql), in creation
    order, as (role, TO relation, SELECT). The stage's own views come last,
    the transform first among them. -#}
{% macro _views(cfg, objs, columns) %}
  {%- set views = [] -%}
  {%- for o in vcmt._roles_of('view') if vcmt._object_wanted(o, cfg) -%}
    {%- do views.append((o.role, objs[o.to], vcmt[o.select](cfg, objs, columns))) -%}
  {%- endfor -%}
  {{ return(views) }}
{% endmacro %}


{#- The declared views and helper tables the config does not want (an
    earlier config's), by role, in their drop order (a view before the
    table it writes). -#}
{% macro _unwanted_views(cfg) %}
  {%- set roles = [] -%}
  {%- for o in vcmt._declared_roles() | selectattr('drop', 'defined') | sort(attribute='drop')
      if o.kind in ['view', 'helper'] and not vcmt._object_wanted(o, cfg) -%}
    {%- do roles.append(o.role) -%}
  {%- endfor -%}
  {{ return(roles) }}
{% endmacro %}


{#- The model's helper tables the config wants (model/objects.sql), as
    (role, CREATE statement), for the relations in `objs`. Create, full
    refresh and reconcile all build them from this list. -#}
{% macro _helper_tables(cfg, objs, columns) %}
  {%- set tables = [] -%}
  {%- for o in vcmt._roles_of('helper') if vcmt._object_wanted(o, cfg) -%}
    {%- do tables.append((o.role, vcmt._create_role_sql(cfg, o.role, objs[o.role], columns))) -%}
  {%- endfor -%}
  {{ return(tables) }}
{% endmacro %}


{#- First run or --full-refresh (plans.sql `_plan_build`), applied.
    Returns the objects the load writes into. -#}
{% macro _build_objects(cfg, objs, columns, found, anywhere) %}
  {%- set build = vcmt._plan_build(cfg, objs, columns, found, anywhere) -%}
  {%- do vcmt._apply(cfg, objs, build.steps) -%}
  {{ return(build.into) }}
{% endmacro %}


{% macro _swaps_on_full_refresh(objs, found) %}
  {{ return(objs.target.identifier in found and adapter.can_exchange(objs.target.schema, 'table')) }}
{% endmacro %}


{#- The tables a full refresh swaps in (EXCHANGE, or RENAME where the model
    had none), in the order it swaps them (model/objects.sql `swap`): those
    the config wants. -#}
{% macro _swapped_roles(cfg, objs, columns) %}
  {%- set roles = [] -%}
  {%- for role in vcmt._roles_by(objs, 'swap') if vcmt._object_wanted(vcmt._object(role), cfg) -%}
    {%- do roles.append(role) -%}
  {%- endfor -%}
  {{ return(roles) }}
{% endmacro %}


{#- A full refresh's generation: the time this invocation started (UTC,
    so generations sort by age) and its invocation id. -#}
{% macro _generation_comment() %}
  {{ return(vcmt._generation_prefix() ~ run_started_at.strftime('%Y%m%dT%H%M%S.%fZ') ~ ' ' ~ invocation_id) }}
{% endmacro %}

{% macro _generation_prefix() %}{{ return('vcmt generation ') }}{% endmacro %}


{#- The statements that create every object of a model, in order, as
    (statement name, SQL). ClickHouse cannot create a view before its source
    table, so where tables can be exchanged (`guarded`) the views are first
    attached to a guard stage that refuses every INSERT (a CHECK 0
    constraint, loud rather than lost), and the real stage is then exchanged
    in: views are bound to their source by name, so they serve it from its
    first moment, and `m__stage` is never a stage without its transform.
    Elsewhere the stage is created right before its views, the transform
    first. A sharded model's Distributed tables come last, the stage's very
    last: writers reach the shards only once every shard's transform is
    attached (docs/design.md#sharded-clusters). -#}
{% macro _create_statements(cfg, objs, columns, guarded) %}
  {%- set views = {} -%}
  {%- for role, to, select_sql in vcmt._views(cfg, objs, columns) -%}
    {%- do views.update({role: vcmt._create_view_sql(objs[role], to, select_sql)}) -%}
  {%- endfor -%}
  {%- set statements = [] -%}
  {%- set guard = {} -%}
  {%- for o in vcmt._declared_roles() if o.role in objs -%}
    {%- set name = 'vcmt_create_' ~ o.role -%}
    {%- if o.kind in ['table', 'helper'] and vcmt._object_wanted(o, cfg) -%}
      {%- do statements.append((name, vcmt._create_role_sql(cfg, o.role, objs[o.role], columns))) -%}
    {%- elif o.kind == 'stage' and guarded -%}
      {#- The guard holds the stage's name; the real stage is built under the staging set's name. -#}
      {%- do guard.update({'role': o.role, 'new': vcmt._staging_objects(objs)[o.role]}) -%}
      {%- do statements.append((name, vcmt._guard_stage_sql(objs[o.role], columns))) -%}
    {%- elif o.kind == 'stage' -%}
      {%- do statements.append((name, vcmt._create_role_sql(cfg, o.role, objs[o.role], columns))) -%}
    {%- elif o.kind == 'view' and o.role in views -%}
      {%- do statements.append((name, views[o.role])) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if guard -%}
    {%- set stage = objs[guard.role] -%}
    {%- do statements.append(('vcmt_create_' ~ guard.role, vcmt._create_stage_sql(guard.new, columns))) -%}
    {%- do statements.append(('vcmt_swap_' ~ guard.role, 'exchange tables ' ~ guard.new ~ ' and ' ~ stage ~ ' '
        ~ on_cluster_clause(stage))) -%}
    {%- do statements.append(('vcmt_drop_guard', vcmt._drop_sql(guard.new, if_exists=false))) -%}
  {%- endif -%}
  {%- for role, local in vcmt._distributed_pairs() if role in objs -%}
    {%- do statements.append(('vcmt_create_' ~ role, vcmt._create_distributed_sql(cfg, objs[role], objs[local]))) -%}
  {%- endfor -%}
  {{ return(statements) }}
{% endmacro %}


{#- A stage that refuses every INSERT, holding the stage's name while its
    views are attached; the message tells a writer what is going on. -#}
{% macro _guard_stage_sql(relation, columns) %}
  create table {{ relation }} {{ on_cluster_clause(relation) }} (
    {{ (vcmt._columns_ddl(columns) + ['constraint vcmt_upsert_stage_not_ready_yet_run_dbt_run '
        ~ 'check 0']) | join(',\n    ') }}
  ) engine = Null
{% endmacro %}


{#- --full-refresh of an existing model, once `new` (built and loaded by
    `_build_objects` and the load) holds the new data: its tables are exchanged
    with the old ones (EXCHANGE TABLES, atomic per pair). ClickHouse binds a
    materialized view to its source, its TO table and the tables it reads by
    name, so the model's views keep firing on whatever table holds the model's
    names: after the exchange they serve the new tables, and the stage is never
    without its transform. The views are then rewritten in place (MODIFY QUERY)
    for the new config, and the old tables, now under the staging names, are
    dropped with the staging views. Until the first exchange a failure leaves
    the old objects and data untouched. -#}
{% macro _swap_in_new_objects(cfg, objs, new, columns, found) %}
  {%- do vcmt._apply(cfg, objs, vcmt._plan_exchange(objs, new, vcmt._swapped_roles(cfg, new, columns), found,
      log='vcmt_upsert ' ~ objs.target.identifier ~ ': full refresh: new tables loaded, swapping them in')) -%}
  {%- do vcmt._finish_swap(cfg, objs, new, columns, found) -%}
{% endmacro %}


{#- The rest of a swap (plans.sql `_plan_finish_swap`), applied once the
    staging and mend names left on every node are read again: the exchanges
    changed the catalog. -#}
{% macro _finish_swap(cfg, objs, new, columns, found) %}
  {%- do vcmt._apply(cfg, objs, vcmt._plan_finish_swap(cfg, objs, new, columns, found,
      vcmt._existing_anywhere(vcmt._mend_sets(objs) + [new]))) -%}
{% endmacro %}


{#- The staging and mend names of the model `objs` and the nodes holding
    each, from the run's observation of every node (`nodes`). -#}
{% macro _leftovers_in(objs, nodes) %}
  {%- set names = [] -%}
  {%- for set in vcmt._mend_sets(objs) + [vcmt._staging_objects(objs)] -%}
    {%- for rel in set.values() -%}{%- do names.append(rel.identifier) -%}{%- endfor -%}
  {%- endfor -%}
  {%- set anywhere = {} -%}
  {%- for row in nodes if row.name in names -%}
    {%- do anywhere.setdefault(row.name, []).append(row.node) -%}
  {%- endfor -%}
  {{ return(anywhere) }}
{% endmacro %}


{#- What each node serves after a --full-refresh that stopped while it
    swapped its new tables in (a node lost at one of its ON CLUSTER
    statements, the run killed): none when no staging object is left on any
    node; else {state, generation, pending, nodes, leftovers}, `generation`
    the newest a full refresh wrote (_generation_comment) and `state`
    - 'unswapped': no node serves it (a load that failed, or a swap that had
      not begun): the model's own tables serve everywhere; the staging
      objects are dropped (a rollback);
    - 'resumable': every node serves it for the same tables: its load had
      succeeded (a swap begins only then), and the rest of the swap
      (`pending` exchanges, then _finish_swap) is the same on every node;
    - 'split': an EXCHANGE ran on some nodes only. ON CLUSTER DDL names
      tables, the same on every node, and an EXCHANGE run again swaps back
      where it had run, so each `split` table is first mended (_mend_split);
    - 'mixed': no staging object is left, yet the model's own tables (its
      `mixed` roles) carry different generations on different nodes (a
      --full-refresh that dropped a split swap's staging tables, then
      failed): nothing is left to mend from.
    `rows` is what it read: every node's catalog rows for the model's,
    the staging and the mend's names (`nodes`: the run's observation of them,
    observe.sql; none: read now). Leftovers of a mend count as staging
    objects (docs/design.md#sharded-clusters). -#}
{% macro _interrupted_swap(cfg, objs, columns, nodes=none) %}
  {%- set leftover_sets = [vcmt._staging_objects(objs)] + vcmt._mend_sets(objs) -%}
  {%- set names = [] -%}
  {%- set staging = [] -%}
  {%- for rel in objs.values() -%}{%- do names.append(rel.identifier) -%}{%- endfor -%}
  {%- for set in leftover_sets -%}
    {%- for rel in set.values() -%}{%- do names.append(rel.identifier) -%}{%- do staging.append(rel.identifier)
        -%}{%- endfor -%}
  {%- endfor -%}
  {%- set rows = vcmt._objects_on_every_node(objs.target, names) if nodes is none
      else nodes | selectattr('name', 'in', names) | list -%}
  {%- set st = namespace(generation='') -%}
  {%- set leftovers = {} -%}
  {%- set serving = {} -%}
  {%- for row in rows -%}
    {%- do serving.setdefault(row.node, {}) -%}
    {%- if row.name in staging -%}{%- do leftovers.setdefault(row.name, []).append(row.node) -%}{%- endif -%}
    {%- if row.comment.startswith(vcmt._generation_prefix())
        and row.comment > st.generation -%}{%- set st.generation = row.comment -%}{%- endif -%}
  {%- endfor -%}
  {%- set roles = vcmt._swapped_roles(cfg, objs, columns) -%}
  {#- The tables whose comment (generation) is not the same on every node (or that some nodes lack). -#}
  {%- set mixed = [] -%}
  {%- for role in roles -%}
    {%- set seen = [] -%}
    {%- for node in serving -%}
      {%- set here = rows | selectattr('node', 'equalto', node) | selectattr('name', 'equalto', objs[role].identifier)
          | map(attribute='comment') | list -%}
      {%- if (here or [none])[0] not in seen -%}{%- do seen.append((here or [none])[0]) -%}{%- endif -%}
    {%- endfor -%}
    {%- if seen | length > 1 -%}{%- do mixed.append(role) -%}{%- endif -%}
  {%- endfor -%}
  {%- if not leftovers and not mixed -%}{{ return(none) }}{%- endif -%}
  {#- node -> role -> whether the model's name holds the newest generation there. -#}
  {%- set swapped = {} -%}
  {%- for node in serving -%}
    {%- do swapped.update({node: {}}) -%}
    {%- for role in roles -%}
      {%- set here = rows | selectattr('node', 'equalto', node) | selectattr('name', 'equalto',
          objs[role].identifier) | list -%}
      {%- do swapped[node].update({role: st.generation != '' and here | length > 0
          and here[0].comment == st.generation}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- set done = [] -%}
  {%- set pending = [] -%}
  {%- set split = [] -%}
  {%- for role in roles -%}
    {%- set on = [] -%}
    {%- for node in swapped if swapped[node][role] -%}{%- do on.append(node) -%}{%- endfor -%}
    {%- if on | length == 0 -%}{%- do pending.append(role) -%}
    {%- elif on | length == swapped | length -%}{%- do done.append(role) -%}
    {%- else -%}{%- do split.append(role) -%}{%- endif -%}
  {%- endfor -%}
  {%- set state = 'mixed' if not leftovers else 'split' if split else ('unswapped' if not done else 'resumable') -%}
  {{ return({'state': state, 'generation': st.generation, 'pending': pending, 'split': split, 'swapped': swapped,
      'leftovers': leftovers, 'rows': rows, 'mixed': mixed}) }}
{% endmacro %}


{#- Before an ordinary run loads (under the lock, before any write to the
    model): a swap interrupted after its load succeeded is finished on every
    node, a split one mended first (_mend_split); staging objects no node
    swapped in are dropped. A split that cannot be mended fails the run,
    naming each node, what it serves, why, and what to run. `nodes` and
    `found`: the run's observation of the catalog (observe.sql).
    Returns whether it finished a swap. -#}
{% macro _finish_interrupted_swap(cfg, objs, columns, nodes, found) %}
  {%- set found_swap = vcmt._interrupted_swap(cfg, objs, columns, nodes) -%}
  {%- if found_swap is none -%}{{ return(false) }}{%- endif -%}
  {%- set new = vcmt._staging_objects(objs) -%}
  {%- set model = vcmt._public_relation(objs).identifier -%}
  {%- if found_swap.state == 'unswapped' -%}
    {#- Rolled back: the model's own tables serve on every node; what the
        full refresh built (on some nodes, or loaded on all) goes. -#}
    {{ log('vcmt_upsert ' ~ model ~ ': a --full-refresh stopped before it swapped any table in; '
        ~ 'the model serves its own tables on every node, and the staging objects it left ('
        ~ found_swap.leftovers | list | join(', ') ~ ') are dropped on every node', info=true) }}
    {%- do vcmt._apply(cfg, objs, vcmt._plan_drop_leftovers(objs, found_swap.leftovers)) -%}
  {%- endif -%}
  {%- if found_swap.state in ['unswapped', 'mixed'] and found_swap.mixed -%}
    {%- do vcmt._refuse_mixed(objs, found_swap) -%}
  {%- endif -%}
  {%- if found_swap.state == 'unswapped' -%}{{ return(false) }}{%- endif -%}
  {%- if found_swap.state == 'split' -%}
    {%- set why = vcmt._why_split_stays(cfg, objs, columns, found_swap) -%}
    {%- if why -%}{%- do vcmt._refuse_split(objs, found_swap, why) -%}{%- endif -%}
    {%- set named = [] -%}
    {%- for role in found_swap.split -%}{%- do named.append(objs[role].identifier) -%}{%- endfor -%}
    {{ log('vcmt_upsert ' ~ model ~ ': a --full-refresh (`' ~ found_swap.generation ~ '`) stopped after its load, '
        ~ 'and its EXCHANGE of ' ~ named | join(', ') ~ ' ran on some nodes only; mending: each node copies the '
        ~ 'rebuild of ' ~ named | join(', ') ~ ' from the table that holds it there, and the copy is swapped in on '
        ~ 'every node', info=true) }}
    {%- do vcmt._mend_split(cfg, objs, columns, found_swap) -%}
    {#- The mend changed the catalog: read again, once. -#}
    {%- set found_swap = vcmt._interrupted_swap(cfg, objs, columns) -%}
    {%- set found = vcmt._existing_objects(objs) -%}
    {%- if found_swap is none or found_swap.state != 'resumable' -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert " ~ model ~ ": after mending the swap of " ~ named | join(', ')
          ~ ", the nodes' catalogs read '" ~ (found_swap.state if found_swap else 'no staging object') ~ "' where "
          ~ "every node should serve the rebuild for those tables: a node ran one of the mend's statements late "
          ~ "(its DDL queue replaying it), or another process changed them meanwhile. Run `dbt run --select "
          ~ model ~ "` again: it reads the nodes again and goes on from there.") }}
    {%- endif -%}
  {%- endif -%}
  {%- set named = [] -%}
  {%- for role in found_swap.pending -%}{%- do named.append(objs[role].identifier) -%}{%- endfor -%}
  {{ log('vcmt_upsert ' ~ model ~ ': a --full-refresh (`' ~ found_swap.generation ~ '`) stopped after its load, '
      ~ 'while it swapped its new tables in; every node serves the same tables, so its swap is finished on every node ('
         ~ ('exchanging ' ~ named | join(', ') ~ ', then ' if found_swap.pending else '')
         ~ 'its Distributed tables and views, and its staging objects dropped)', info=true) }}
  {%- do vcmt._apply(cfg, objs, vcmt._plan_exchange(objs, new, found_swap.pending, found)) -%}
  {%- do vcmt._finish_swap(cfg, objs, new, columns, found) -%}
  {{ return(true) }}
{% endmacro %}


{#- For each node and each table of the swap: the names among the model's
    own and the staging one that hold the newest generation there, as
    {node: {role: [names]}}. -#}
{% macro _rebuild_holders(objs, found_swap) %}
  {%- set new = vcmt._staging_objects(objs) -%}
  {%- set holders = {} -%}
  {%- for node, roles in found_swap.swapped.items() -%}
    {%- do holders.update({node: {}}) -%}
    {%- for role in roles -%}
      {%- do holders[node].update({role: found_swap.rows | selectattr('node', 'equalto', node)
          | selectattr('name', 'in', [objs[role].identifier, new[role].identifier])
          | selectattr('comment', 'equalto', found_swap.generation) | map(attribute='name') | list}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(holders) }}
{% endmacro %}


{#- Why a split swap cannot be mended (_mend_split), or '' when it can:
    - a node holds the rebuild of a split table under neither name (its
      staging table dropped by hand, say): there is nothing to copy there;
    - the table the config builds for a split role (the copy's DDL) has
      other columns than the rebuild: the model changed since the
      --full-refresh that stopped (checked on a temporary table, as the
      build's checks are: check.sql);
    - a split table is replicated and a shard of the cluster has more than
      one replica: each replica would copy the rebuild into a replicated
      copy, so the copy would hold it once per replica. -#}
{% macro _why_split_stays(cfg, objs, columns, found_swap) %}
  {%- set holders = vcmt._rebuild_holders(objs, found_swap) -%}
  {%- set why = [] -%}
  {%- set replicated = [] -%}
  {%- for role in found_swap.split -%}
    {%- for node in holders if not holders[node][role] -%}
      {%- do why.append(node ~ ' holds the rebuild of ' ~ objs[role].identifier ~ ' under no name') -%}
    {%- endfor -%}
    {%- for row in found_swap.rows if row.name == objs[role].identifier and row.engine.startswith('Replicated')
        and objs[role].identifier not in replicated -%}
      {%- do replicated.append(objs[role].identifier) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- if why -%}{{ return(why | join('; ')) }}{%- endif -%}
  {%- set chk = vcmt._check_relations(objs) -%}
  {%- for role in found_swap.split -%}
    {%- set rebuild = vcmt._rebuild_columns(objs, role, found_swap.generation) -%}
    {%- if not rebuild -%}
      {{ return('the node dbt connects to holds the rebuild of ' ~ objs[role].identifier ~ ' under no name') }}
    {%- endif -%}
    {%- set built = vcmt._built_columns(cfg, role, chk[role], columns) -%}
    {%- if built != rebuild -%}
      {%- do why.append('the model changed since that --full-refresh: its config now builds '
          ~ objs[role].identifier ~ ' with columns ' ~ vcmt._columns_ddl(built) | join(', ')
          ~ ' where the rebuild has ' ~ vcmt._columns_ddl(rebuild) | join(', ')) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if why -%}{{ return(why | join('; ')) }}{%- endif -%}
  {%- if replicated -%}
    {%- set replicas = vcmt._most_replicas(vcmt._cluster_name()) -%}
    {%- if replicas > 1 -%}
      {{ return(replicated | join(', ') ~ ' is replicated and a shard of cluster ' ~ vcmt._cluster_name() ~ ' has '
          ~ replicas ~ ' replicas: a copy made on every node would hold the rebuild once per replica') }}
    {%- endif -%}
  {%- endif -%}
  {{ return('') }}
{% endmacro %}


{#- The rebuild of `role` (generation `generation`) on the dbt node: the
    one of the model's and the staging name that holds it there (an
    identifier '' when neither does). -#}
{% macro _rebuild_relation(objs, role, generation) %}
  {%- set names = [objs[role].identifier, vcmt._staging_objects(objs)[role].identifier] -%}
  {{ return(objs[role].incorporate(path={'identifier': vcmt._first_commented_table(objs[role].schema, names,
      generation)})) }}
{% endmacro %}

{#- Its columns, as the dbt node's catalog has them (none when it has none). -#}
{% macro _rebuild_columns(objs, role, generation) %}
  {{ return(vcmt._catalog_columns(vcmt._rebuild_relation(objs, role, generation))) }}
{% endmacro %}


{#- The run fails naming each node, what it serves, why the split swap
    cannot be mended (`why`), the staging objects left and the fix. -#}
{% macro _refuse_split(objs, found_swap, why) %}
  {%- set model = vcmt._public_relation(objs).identifier -%}
  {%- set named = [] -%}
  {%- for role in found_swap.split -%}{%- do named.append(objs[role].identifier) -%}{%- endfor -%}
  {%- set lines = [] -%}
  {%- for node, roles in found_swap.swapped.items() -%}
    {%- set newer = [] -%}{%- set older = [] -%}
    {%- for role, yes in roles.items() -%}
      {%- if yes -%}{%- do newer.append(objs[role].identifier) -%}{%-
          else -%}{%- do older.append(objs[role].identifier) -%}{%- endif -%}
    {%- endfor -%}
    {%- do lines.append(node ~ ' serves the rebuild for ' ~ (newer | join(', ') or 'no table')
        ~ ' and the previous tables for ' ~ (older | join(', ') or 'no table')) -%}
  {%- endfor -%}
  {#- The staging objects left, by the nodes they are on. -#}
  {%- set where = {} -%}
  {%- for name, nodes in found_swap.leftovers.items() -%}{%- do where.setdefault(nodes | join(', '),
      []).append(name) -%}{%- endfor -%}
  {%- set left = [] -%}
  {%- for nodes, names in where.items() -%}{%- do left.append(names | join(', ') ~ ' on ' ~ nodes) -%}{%- endfor -%}
  {{ exceptions.raise_compiler_error("vcmt_upsert " ~ model ~ ": a --full-refresh stopped while it swapped its new "
      ~ "tables in, and its EXCHANGE of "
      ~ named | join(', ') ~ " ran on some nodes only: the nodes serve different generations of the model ("
      ~ "the rebuild is `" ~ found_swap.generation ~ "`), and reads through " ~ model ~ " mix them. "
      ~ lines | join('; ')
      ~ ". Staging objects left: " ~ left | join('; ')
      ~ ". Nothing was changed. The swap cannot be mended here: " ~ why ~ ". Run `dbt run --select "
      ~ model ~ " --full-refresh`, which drops the staging objects on every node and rebuilds the model from its "
      ~ "SELECT on every node.") }}
{% endmacro %}


{#- The run fails before any write: the model's own tables carry different
    generations on different nodes (`mixed`), with no staging table left
    to mend them from. -#}
{% macro _refuse_mixed(objs, found_swap) %}
  {%- set model = vcmt._public_relation(objs).identifier -%}
  {%- set lines = [] -%}
  {%- for role in found_swap.mixed -%}
    {%- set serves = [] -%}
    {%- for node in found_swap.swapped -%}
      {%- set here = found_swap.rows | selectattr('node', 'equalto', node) | selectattr('name', 'equalto',
          objs[role].identifier) | map(attribute='comment') | list -%}
      {%- do serves.append(node ~ ' ' ~ ('has no such table' if not here else 'serves `' ~ here[0] ~ '`'
          if here[0] else 'serves its first build')) -%}
    {%- endfor -%}
    {%- do lines.append(objs[role].identifier ~ ': ' ~ serves | join(', ')) -%}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error("vcmt_upsert " ~ model ~ ": the nodes serve different generations of the model, "
      ~ "and reads through " ~ model ~ " mix them. " ~ lines | join('; ') ~ ". No staging table of a --full-refresh is "
      ~ "left to mend them from (a --full-refresh run after an interrupted one dropped them, then failed; or a node "
      ~ "missed the model's first build). The model's tables were not changed. Run `dbt run --select " ~ model
      ~ " --full-refresh`, which rebuilds the model from its SELECT on every node; keep writers into " ~ model
      ~ "__stage paused until it has run.") }}
{% endmacro %}


{#- A split swap mended (docs/design.md#a-full-refresh-interrupted-on-some-nodes):
    for each table whose EXCHANGE ran on some nodes only, every node copies
    the rebuild from whichever of the two names holds it there
    (`<model>__vcmt_mend...`, read through a Merge table over both names,
    `..._src`, that each node filters by its own catalog), the copies are
    checked against what they were copied from on every node, and one
    EXCHANGE of the copy with the model's table, the same statement on every
    node, makes every node serve the rebuild. Every step is ON CLUSTER, and
    a run stopped anywhere in it finds a split again (the copies go first)
    or a swap every node agrees on. The copy is fenced and names the lock's
    holder, so a long one keeps the lock (lock.sql, `_holder_busy`). -#}
{% macro _mend_split(cfg, objs, columns, found_swap) %}
  {%- set generation = found_swap.generation -%}
  {%- for role in found_swap.split -%}
    {%- do vcmt._renew_lock(cfg, objs) -%}
    {%- set rebuild_columns = vcmt._rebuild_columns(objs, role, generation) -%}
    {#- Sorted as the rebuild is (_sorting_key_default: a table from before keeps the key alone). -#}
    {%- set built = vcmt._sorting_key_default(cfg, columns, vcmt._rebuild_relation(objs, role, generation)) -%}
    {%- do vcmt._apply(cfg, objs, vcmt._plan_mend_copy(cfg, built, objs, columns, role, generation,
        rebuild_columns)) -%}
    {%- set problems = vcmt._mend_copy_problems(objs, found_swap, role, rebuild_columns) -%}
    {%- if problems -%}
      {%- do vcmt._apply(cfg, objs, vcmt._plan_drop_mend(objs, role)) -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert " ~ vcmt._public_relation(objs).identifier ~ ": mending the "
          ~ "split swap of " ~ objs[role].identifier ~ ": the copy of the rebuild `" ~ found_swap.generation
          ~ "` does not match it: " ~ problems | join('; ') ~ ". That copy was dropped and not swapped in. Run `dbt "
          ~ "run --select " ~ vcmt._public_relation(objs).identifier ~ "` again to mend it again; if it fails the "
          ~ "same way, run it with --full-refresh, which drops the staging objects on every node and rebuilds the "
          ~ "model.") }}
    {%- endif -%}
    {%- do vcmt._apply(cfg, objs, vcmt._plan_mend_swap(cfg, objs, columns, role, found_swap)) -%}
  {%- endfor -%}
{% endmacro %}


{#- The copy a mend made of `role`'s rebuild, checked before it is swapped
    in: on every node, its rows and the rows of the table it was copied from
    (_mend_holder_sql, run on each node) give the same count and checksum as their
    engine merges them (`final = 1`: a collapsing, summing or aggregating
    table reads the same whatever its merges have done; the copy may have
    been merged on insert). Returns the differences, one line per node. -#}
{% macro _mend_copy_problems(objs, found_swap, role, rebuild_columns) %}
  {%- set copies, sources = vcmt._mend_sets(objs) -%}
  {#- Fenced, so each read also names the lock's holder while it runs (a long one keeps the lock). -#}
  {%- set fenced = vcmt._fenced(objs.target) -%}
  {%- set made = vcmt._checksums_by_node(copies[role], rebuild_columns, fenced, objs.target) -%}
  {%- set holder = vcmt._mend_holder_sql(objs, role, found_swap.generation) -%}
  {%- set held = vcmt._checksums_by_node(sources[role], rebuild_columns, '_table in (' ~ holder ~ ') and ' ~ fenced,
                                        objs.target) -%}
  {%- set problems = [] -%}
  {%- for node in found_swap.swapped if made.get(node) != held.get(node) -%}
    {%- do problems.append(node ~ ' has ' ~ vcmt._checksum_text(made.get(node)) ~ ' in the copy where the rebuild has '
        ~ vcmt._checksum_text(held.get(node))) -%}
  {%- endfor -%}
  {{ return(problems) }}
{% endmacro %}

{% macro _checksum_text(sums) %}
  {{ return('no table' if sums is none else sums[0] ~ ' rows (checksum ' ~ sums[1] ~ ')') }}
{% endmacro %}


{#- The CREATE of the table `role` of a model under the relation `relation`. -#}
{% macro _create_role_sql(cfg, role, relation, columns) %}
  {%- set o = vcmt._object(role) -%}
  {{ return(vcmt[o.create](cfg, relation, columns) if o.get('create') else vcmt._create_stage_sql(relation, columns)) }}
{% endmacro %}


{#- An external load (`what`, under the model's lock) meets a --full-refresh
    that stopped while it swapped its tables in: it refuses, releasing the
    lock first. Loaded beside it, its events would land in tables that the
    finish of the swap (_finish_interrupted_swap, by the next `dbt run`)
    swaps out, or in tables the nodes do not all serve. A rollback
    ('unswapped') leaves the model's own tables serving: that load goes on. -#}
{% macro _refuse_interrupted_swap(cfg, objs, columns, what) %}
  {%- set found_swap = vcmt._interrupted_swap(cfg, objs, columns) -%}
  {%- if found_swap is none or (found_swap.state == 'unswapped' and not found_swap.mixed) -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set model = vcmt._public_relation(objs).identifier -%}
  {{ vcmt._refuse_under_lock(objs, what ~ " " ~ model ~ ": a --full-refresh (`" ~ found_swap.generation
      ~ "`) stopped while it swapped its new tables in, so "
      ~ model ~ "'s tables are of two generations. Nothing was loaded. Run `dbt run --select " ~ model
      ~ "` first: it finishes the swap on every node (or says what to run), then loads the model's own SELECT; "
      ~ "then run this load again.") }}
{% endmacro %}

{#- On a cluster a model lives on every shard: its tables are created ON
    CLUSTER. Where its target is on some shards only (the model was built
    without `cluster` in the profile, a shard joined the cluster since, or
    missed the target's CREATE), a load would leave the other shards without
    its rows, and a --full-refresh cannot swap tables in where there are
    none: refused before any DDL, naming the nodes that hold it (`what`
    names the run). A replica without it, in a shard that has it, is not
    this check's: a replica added to a shard fetches the target's data by
    replication. -#}
{% macro _check_on_every_node(objs, what, obs=none) %}
  {%- if not on_cluster_clause(objs.target) | trim -%}{{ return(none) }}{%- endif -%}
  {%- set found = vcmt._nodes_holding(objs.target) if obs is none else vcmt._observed_holding(objs.target, obs) -%}
  {#- On no shard: not built under this name (a model given a `sharding_key`, whose target becomes per-shard). -#}
  {%- if 0 < found.shards_holding < found.shards -%}
    {{ exceptions.raise_compiler_error(what ~ ": the profile's cluster `" ~ vcmt._cluster_name() ~ "` has "
        ~ found.shards ~ " shards, but " ~ objs.target.identifier ~ " is on " ~ found.shards_holding ~ " of them ("
        ~ found.holding | join(', ') ~ "): the model was built without `cluster` in the profile, or a shard joined "
        ~ "the cluster since, or missed the model's CREATE. A load would leave the other shards without its rows, "
        ~ "and a --full-refresh cannot swap tables in where there are none. Nothing was changed. If another run is "
        ~ "building the model right now, wait for it and run again. Else drop the model's objects on every node "
        ~ "and run it again, which rebuilds it from its SELECT on every shard (the SELECT must then return every "
        ~ "live row; docs/servers.md, when the cluster's shards change or a model joins a cluster), or keep it on "
        ~ "one node by running it with a profile without `cluster`.") }}
  {%- endif -%}
{% endmacro %}


{% macro _check_existing_is_vcmt(objs, found) %}
  {%- set engine = found.get(objs.target.identifier, {}).get('engine', 'unknown') -%}
  {%- set has_stage = objs.stage.identifier in found -%}
  {%- if 'VersionedCollapsingMergeTree' not in engine or not has_stage -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: " ~ objs.target ~ " exists but was not built by vcmt_upsert "
        ~ "(engine " ~ engine ~ ", stage " ~ objs.stage.identifier ~ (" present" if has_stage else " missing") ~ ")"
        ~ ("; a `dbt clone` copies a vcmt model's table only, not its stage, transform and helpers"
        if 'VersionedCollapsingMergeTree' in engine else "")
        ~ ". Nothing was changed. Run once with --full-refresh to rebuild it from the model's SELECT.") }}
  {%- endif -%}
{% endmacro %}


{#- Bring an existing model's objects in line with its config without losing
    data, and without ever leaving the stage without its transform. The
    schema change plan is made and rehearsed before any DDL, then run in its
    order: projections that block a column change dropped; columns added and
    retyped (target, then stage); missing helpers created; the transform
    created or changed in place (MODIFY QUERY); columns dropped (stage, then
    target); projections added and materialized.
    Returns {cfg, columns}: the config the load runs with (with the plan's
    merge policies) and the target's columns. `obs`: the run's observation
    (observe.sql), which compared each view with what this config would
    write, for the run's own columns and policies: a plan that changes
    either compares again. -#}
{% macro _reconcile_objects(cfg, objs, columns, found, obs) %}
  {%- set plan = vcmt._schema_change_plan(cfg, objs, columns, found, obs) -%}
  {%- do vcmt._check_stored_values_fit(cfg, objs, plan.current_types, plan.columns, plan.retyped) -%}
  {%- set observed = not plan.changed and not plan.merge -%}
  {%- set cfg = vcmt._config_for_plan(cfg, plan) -%}
  {%- set columns = plan.columns -%}
  {%- if plan.changed and cfg.on_schema_change != 'ignore' -%}
    {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': schema change (' ~ cfg.on_schema_change ~ '): ' ~ plan.describe,
        info=true) }}
    {%- if plan.added -%}
      {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': the rows already stored hold the default of new column(s) '
          ~ plan.added | join(', ') ~ " (0, '' or NULL for a Nullable type) until an event of their key sets it; "
          ~ "to fill every key now, run with --full-refresh (it rebuilds the table from the SELECT)", info=true) }}
    {%- endif -%}
  {%- endif -%}

  {#- The views: the ones created only when missing, and the ones rewritten in
      place when their SELECT changed (the transform), which are missing or
      changed. -#}
  {%- set kept = [] -%}
  {%- set rewritten = [] -%}
  {%- for role, to, select_sql in vcmt._views(cfg, objs, columns) -%}
    {%- set exists = objs[role].identifier in found -%}
    {%- if not vcmt._object(role).get('modify_when_changed') -%}
      {%- if not exists -%}{%- do kept.append((role, to, select_sql)) -%}{%- endif -%}
    {%- elif not exists or plan.refresh_transform or (obs.views_same.get(role) != '1' if observed
        else vcmt._sql_differs(found[objs[role].identifier].as_select, select_sql)) -%}
      {%- do rewritten.append((role, to, select_sql, exists)) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if plan.before or plan.after or rewritten -%}
    {%- do vcmt._check_plan(cfg, objs, found, plan) -%}
  {%- endif -%}
  {#- The Distributed tables copy their local table's columns at creation (docs/design.md#sharded-clusters). -#}
  {%- if vcmt._sharded(objs) and plan.changed and cfg.on_schema_change != 'ignore' -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert " ~ vcmt._public_relation(objs).identifier
        ~ ": a sharded model (`sharding_key`) does not change its tables in place; this run would apply: "
        ~ plan.describe ~ ". Nothing was changed. Run with --full-refresh to rebuild every shard from the SELECT.") }}
  {%- endif -%}
  {%- do vcmt._apply(cfg, objs, vcmt._plan_reconcile(cfg, objs, columns, found, plan, kept, rewritten,
      vcmt._distributed_to_repair(objs, found, obs))) -%}
  {{ return({'cfg': cfg, 'columns': columns}) }}
{% endmacro %}


{#- A sharded model's Distributed tables copy their local tables' columns at
    creation. A `--full-refresh` that failed after swapping the local tables
    in and before replacing the Distributed ones (a node lost in between)
    leaves them with the old columns: each is replaced again, as that full
    refresh would have, so the rerun repairs it (docs/design.md#sharded-clusters).
    The (Distributed role, local role) pairs whose columns differ, from the
    run's observation. -#}
{% macro _distributed_to_repair(objs, found, obs) %}
  {%- set pairs = [] -%}
  {%- if not vcmt._sharded(objs) -%}{{ return(pairs) }}{%- endif -%}
  {%- for role, local in vcmt._distributed_pairs() if objs[role].identifier in found -%}
    {%- set mine = [] -%}{%- set theirs = [] -%}
    {%- for c in vcmt._observed_columns(obs, objs[role].identifier) -%}{%- do mine.append((c.name,
        c.data_type)) -%}{%- endfor -%}
    {%- for c in vcmt._observed_columns(obs, objs[local].identifier) -%}{%- do theirs.append((c.name,
        c.data_type)) -%}{%- endfor -%}
    {%- if mine != theirs -%}{%- do pairs.append((role, local)) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(pairs) }}
{% endmacro %}
