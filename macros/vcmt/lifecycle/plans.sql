{#- The lifecycle's planners (docs/design.md#observe-plan-apply): each takes
    what the run observed and returns the statements one step of the run
    sends, in order, as steps (apply.sql `_step`), and runs nothing;
    lifecycle.sql decides which to apply, and apply.sql sends them. They are
    rendered without an engine by tests/lifecycle, on observations captured
    from real runs. -#}


{#- Create every object of `objs` (_create_statements), each after a check
    of the lock's fence. `generation` (a full refresh's): written as the
    comment of each table the swap exchanges, so that each node's catalog
    says which generation its tables belong to (_interrupted_swap). `log`:
    the line the first statement logs. -#}
{% macro _plan_create(cfg, objs, columns, guarded=none, generation=none, log=none) %}
  {%- set guarded = adapter.can_exchange(objs.target.schema, 'table') if guarded is none else guarded -%}
  {%- set marked = [] -%}
  {%- for role in vcmt._swapped_roles(cfg, objs, columns) -%}{%- do marked.append('vcmt_create_'
      ~ role) -%}{%- endfor -%}
  {%- set steps = [] -%}
  {%- for name, create_sql in vcmt._create_statements(cfg, objs, columns, guarded) -%}
    {%- do steps.append(vcmt._step(name, create_sql ~ ('\n  comment ' ~ vcmt._sql_string(generation)
        if generation and name in marked else ''), log=log if loop.first else none)) -%}
  {%- endfor -%}
  {{ return(steps) }}
{% endmacro %}


{#- Drop every object of `objs` (only those named in `found` when given: a
    list of names or a dict by name), in their declared drop order: views
    first, so no writer ever sees a stage without its transform. -#}
{% macro _plan_drop(objs, found=none) %}
  {%- set steps = [] -%}
  {%- for role in vcmt._roles_by(objs, 'drop') if found is none or objs[role].identifier in found -%}
    {%- do steps.append(vcmt._step('vcmt_drop_' ~ role, vcmt._drop_sql(objs[role]))) -%}
  {%- endfor -%}
  {{ return(steps) }}
{% endmacro %}


{#- Drop, on every node where they are (`anywhere`: name -> nodes, observed),
    a full refresh's staging objects and a mend's copies and Merge tables
    (_mend_split): the mend's first, so a run stopped in between still finds
    the staging objects and finishes. -#}
{% macro _plan_drop_leftovers(objs, anywhere) %}
  {%- set steps = [] -%}
  {%- for set in vcmt._mend_sets(objs) + [vcmt._staging_objects(objs)] -%}
    {%- do steps.extend(vcmt._plan_drop(set, anywhere)) -%}
  {%- endfor -%}
  {{ return(steps) }}
{% endmacro %}


{#- First run or --full-refresh, once everything has been checked with the
    engine (check.sql, run before the lock), so a bad config fails with no
    object created or changed. Returns {steps, into}: `into` the objects the
    load writes into. A full refresh builds a complete second set of objects
    under staging names, views included, and loads into it: the old objects
    serve until _swap_in_new_objects swaps it in, once the load has
    succeeded (docs/design.md#lifecycle). A first run creates the objects in
    place. Leftovers of an earlier attempt go first, from every node
    (`anywhere`, the observation: an interrupted swap may have left them on
    some nodes only). -#}
{% macro _plan_build(cfg, objs, columns, found, anywhere) %}
  {%- set steps = vcmt._plan_drop_leftovers(objs, anywhere) -%}
  {%- if vcmt._swaps_on_full_refresh(objs, found) -%}
    {%- set new = vcmt._staging_objects(objs) -%}
    {%- do steps.extend(vcmt._plan_create(cfg, new, columns, guarded=false, generation=vcmt._generation_comment(),
        log='vcmt_upsert ' ~ objs.target.identifier ~ ': full refresh: building and loading new tables beside the old '
        ~ 'ones (' ~ new.target.identifier ~ ', ...); the old ones serve until the load has succeeded')) -%}
    {#- The load's batch and fan-out are its lock generation's (_generation_object). -#}
    {%- for o in vcmt._roles_of('load_table') -%}{%- do new.update({o.role: objs[o.role]}) -%}{%- endfor -%}
    {{ return({'steps': steps, 'into': new}) }}
  {%- endif -%}
  {#- No target: nothing to keep (what an earlier attempt left goes). -#}
  {%- do steps.extend(vcmt._plan_drop(objs, found)) -%}
  {%- do steps.extend(vcmt._plan_create(cfg, objs, columns)) -%}
  {{ return({'steps': steps, 'into': objs}) }}
{% endmacro %}


{#- Each of `roles`' new table exchanged with the model's (renamed to the
    model's name where it has none, by `found`): the one step of a swap
    that is not idempotent (an EXCHANGE run again swaps back). `log`: the
    line the first one logs. -#}
{% macro _plan_exchange(objs, new, roles, found, log=none) %}
  {%- set steps = [] -%}
  {%- for role in roles -%}
    {%- set sql = 'exchange tables ' ~ new[role] ~ ' and ' ~ objs[role] if objs[role].identifier in found
        else 'rename table ' ~ new[role] ~ ' to ' ~ objs[role] -%}
    {%- do steps.append(vcmt._step('vcmt_swap_' ~ role, sql ~ ' ' ~ on_cluster_clause(objs[role]),
        log=log if loop.first else none)) -%}
  {%- endfor -%}
  {{ return(steps) }}
{% endmacro %}


{#- The rest of a swap, once every table is exchanged: each step can run
    again with the same outcome, so a run that finds a swap interrupted
    after its exchanges finishes it with this (lifecycle.sql
    `_finish_interrupted_swap`). `found`: the model's objects before the
    exchanges (views are not exchanged); `anywhere`: the staging and mend
    names on every node after them. -#}
{% macro _plan_finish_swap(cfg, objs, new, columns, found, anywhere) %}
  {%- set steps = [] -%}
  {#- A sharded model's Distributed tables reach every shard's local tables by
      name, so they now serve the new ones; each is replaced (atomically) by
      one with the new tables' columns, which it copies at creation. -#}
  {%- if vcmt._sharded(objs) -%}
    {%- for role, local in vcmt._distributed_pairs() -%}
      {%- do steps.append(vcmt._step('vcmt_replace_' ~ role, vcmt._create_distributed_sql(cfg, objs[role],
          objs[local], replace=true))) -%}
    {%- endfor -%}
  {%- endif -%}
  {#- The transform (the view modified when changed) first: until it is
      rewritten, it applies the old query to the new tables. -#}
  {%- set views = [] -%}
  {%- for view in vcmt._views(cfg, objs, columns) -%}
    {%- if vcmt._object(view[0]).get('modify_when_changed') -%}{%- do views.insert(0,
        view) -%}{%- else -%}{%- do views.append(view) -%}{%- endif -%}
  {%- endfor -%}
  {%- for role, to, select_sql in views -%}
    {%- if found.get(objs[role].identifier, {}).get('engine') == 'MaterializedView' -%}
      {%- do steps.append(vcmt._step('vcmt_modify_' ~ role, vcmt._modify_view_sql(objs[role], select_sql))) -%}
    {%- else -%}
      {%- do steps.append(vcmt._step('vcmt_drop_' ~ role, vcmt._drop_sql(objs[role]))) -%}
      {%- do steps.append(vcmt._step('vcmt_create_' ~ role, vcmt._create_view_sql(objs[role], to, select_sql),
          fence=false)) -%}
    {%- endif -%}
  {%- endfor -%}
  {#- Unwanted views go from every node (on a cluster a view may be on some only); an unwanted helper is not
      swapped: the model's own goes. Objects never on a cluster (`one_node`) go where they were found. -#}
  {%- for role in vcmt._unwanted_views(cfg) if objs[role].identifier in found
      or (vcmt._object(role).kind == 'view' and not vcmt._object(role).get('one_node')) -%}
    {%- do steps.append(vcmt._step('vcmt_drop_' ~ role, vcmt._drop_sql(objs[role]))) -%}
  {%- endfor -%}
  {#- The staging names now hold the old tables, and the staging views (dropped first) serve them. -#}
  {%- do steps.extend(vcmt._plan_drop_leftovers(objs, anywhere)) -%}
  {{ return(steps) }}
{% endmacro %}


{#- Bring an existing model's objects in line with its config without losing
    data, and without ever leaving the stage without its transform, from the
    schema change plan (schema_changes.sql) made whole first: projections
    that block a column change dropped; columns added and retyped (target,
    then stage); missing helpers created; the transform created or changed
    in place (MODIFY QUERY); columns dropped (stage, then target);
    projections added and materialized. `kept`: the views created only when
    missing, which are missing, as (role, to, select); `rewritten`: the views
    rewritten when their SELECT changes, which are missing or changed, as
    (role, to, select, exists); `distributed`: the Distributed tables to
    replace (_repair_distributed). -#}
{% macro _plan_reconcile(cfg, objs, columns, found, plan, kept, rewritten, distributed) %}
  {%- set model = objs.target.identifier -%}
  {%- set steps = [] -%}
  {%- for step in plan.before -%}
    {%- do steps.append(vcmt._step('vcmt_schema_step', vcmt._plan_step_sql(step, objs[step.on]),
        log='vcmt_upsert ' ~ model ~ ': schema step: ' ~ step.name, info=false)) -%}
  {%- endfor -%}
  {%- for role, create_sql in vcmt._helper_tables(cfg, objs, columns) if objs[role].identifier not in found -%}
    {%- do steps.append(vcmt._step('vcmt_create_' ~ role, create_sql, fence=false)) -%}
  {%- endfor -%}
  {%- do steps.extend(vcmt._plan_loads_columns(objs, found)) -%}
  {#- delete_mode: the new writer is attached before the old one goes, so no
      delete is ever left without a tombstone. -#}
  {%- for role, to, select_sql in kept -%}
    {%- do steps.append(vcmt._step('vcmt_create_' ~ role, vcmt._create_view_sql(objs[role], to, select_sql),
        fence=false)) -%}
  {%- endfor -%}
  {%- for role, to, select_sql, exists in rewritten -%}
    {%- if not exists -%}
      {%- do steps.append(vcmt._step('vcmt_create_' ~ role, vcmt._create_view_sql(objs[role], to, select_sql),
          fence=false)) -%}
    {%- else -%}
      {%- do steps.append(vcmt._step('vcmt_modify_' ~ role, vcmt._modify_view_sql(objs[role], select_sql),
          log='vcmt_upsert ' ~ model ~ ': ' ~ role ~ ' changed, updating it in place (MODIFY QUERY)')) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if vcmt._sharded(objs) -%}
    {%- for role, local in vcmt._distributed_pairs() if objs[role].identifier not in found -%}
      {%- do steps.append(vcmt._step('vcmt_create_' ~ role, vcmt._create_distributed_sql(cfg, objs[role],
          objs[local]), fence=false)) -%}
    {%- endfor -%}
    {%- for role, local in distributed -%}
      {%- do steps.append(vcmt._step('vcmt_replace_' ~ role, vcmt._create_distributed_sql(cfg, objs[role],
          objs[local], replace=true), log='vcmt_upsert ' ~ objs[role].identifier ~ ': its columns differ from '
          ~ objs[local].identifier ~ "'s (an interrupted --full-refresh); replacing it", fence=false)) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- for role in vcmt._unwanted_views(cfg) if objs[role].identifier in found -%}
    {%- do steps.append(vcmt._step('vcmt_drop_' ~ role, vcmt._drop_sql(objs[role], if_exists=false), fence=false)) -%}
  {%- endfor -%}
  {%- for step in plan.after -%}
    {%- do steps.append(vcmt._step('vcmt_schema_step', vcmt._plan_step_sql(step, objs[step.on]),
        log='vcmt_upsert ' ~ model ~ ': ' ~ (step.log if step.log is defined else 'schema step: ' ~ step.name),
        info=step.log is defined)) -%}
  {%- endfor -%}
  {{ return(steps) }}
{% endmacro %}


{#- A mend's copy of `role` and its Merge table dropped on every node. -#}
{% macro _plan_drop_mend(objs, role) %}
  {%- set steps = [] -%}
  {%- for set in vcmt._mend_sets(objs) | reverse -%}
    {%- do steps.append(vcmt._step('vcmt_mend_drop', vcmt._drop_sql(set[role]))) -%}
  {%- endfor -%}
  {{ return(steps) }}
{% endmacro %}


{#- The copy a mend makes of the split table `role`
    (docs/design.md#a-full-refresh-interrupted-on-some-nodes): on every node,
    from whichever of the model's and the staging name holds the rebuild
    (`generation`) there (_mend_holder_sql, run on each node), through a
    Merge table over both names, fenced and named as the lock holder's so a
    long one keeps the lock. `rebuild_columns`: the rebuild's columns;
    `built`: the config the copy is sorted by. -#}
{% macro _plan_mend_copy(cfg, built, objs, columns, role, generation, rebuild_columns) %}
  {%- set new = vcmt._staging_objects(objs) -%}
  {%- set copies, sources = vcmt._mend_sets(objs) -%}
  {%- set own = objs[role] -%}
  {%- set names = [own.identifier, new[role].identifier] -%}
  {%- set alternatives = [] -%}
  {%- for name in names -%}{%- do alternatives.append(modules.re.escape(name)) -%}{%- endfor -%}
  {%- set steps = vcmt._plan_drop_mend(objs, role) -%}
  {%- do steps.append(vcmt._step('vcmt_mend_source', 'create table ' ~ sources[role] ~ ' '
      ~ on_cluster_clause(sources[role]) ~ ' (\n    ' ~ vcmt._columns_ddl(rebuild_columns) | join(',\n    ')
      ~ '\n  ) engine = Merge(' ~ vcmt._sql_string(own.schema) ~ ', ' ~ vcmt._sql_string('^(' ~ alternatives | join('|')
      ~ ')$') ~ ')')) -%}
  {%- set copy -%}
    {{ vcmt._create_role_sql(built, role, copies[role], columns) }}
      comment {{ vcmt._sql_string(generation) }}
      as select {{ vcmt._column_list(rebuild_columns | map(attribute='name') | list) }} from {{ sources[role] }}
      where _table in ({{ vcmt._mend_holder_sql(objs, role, generation) }})
        and (select throwIf(count() = 0, {{ vcmt._sql_string('vcmt: no table of the rebuild on this node: '
            ~ names | join(' or ')) }}) {{ vcmt._commented_tables_sql(own.schema, names, generation) }}) = 0
        and {{ vcmt._fenced(objs.target) }}
      {{ vcmt._settings_clause(vcmt._holder_settings(objs.target)) }}
  {%- endset -%}
  {%- do steps.append(vcmt._step('vcmt_mend_copy', copy)) -%}
  {{ return(steps) }}
{% endmacro %}


{#- On each node that runs it, the one of the model's and the staging name
    of `role` that holds the rebuild `generation` there (the first by name,
    as _rebuild_holders lists them): what a mend copies and checks. -#}
{% macro _mend_holder_sql(objs, role, generation) %}
  {%- set names = [objs[role].identifier, vcmt._staging_objects(objs)[role].identifier] -%}
  {{ return('select min(name) ' ~ vcmt._commented_tables_sql(objs[role].schema, names, generation)) }}
{% endmacro %}


{#- Once the copy of `role` matches its source on every node: the Merge table
    dropped, the model's name made where a split RENAME (the model had no
    such table before that --full-refresh) left it on some nodes only (by
    `found_swap`, the observed swap), and one EXCHANGE of the copy with the
    model's table, the same statement on every node, which makes every node
    serve the rebuild. -#}
{% macro _plan_mend_swap(cfg, objs, columns, role, found_swap) %}
  {%- set copies, sources = vcmt._mend_sets(objs) -%}
  {%- set own = objs[role] -%}
  {%- set steps = [vcmt._step('vcmt_mend_drop', vcmt._drop_sql(sources[role]))] -%}
  {%- if found_swap.rows | selectattr('name', 'equalto', own.identifier) | map(attribute='node') | unique | list
      | length < found_swap.swapped | length -%}
    {%- do steps.append(vcmt._step('vcmt_mend_placeholder', vcmt._if_not_exists(vcmt._create_role_sql(cfg, role, own,
        columns)))) -%}
  {%- endif -%}
  {%- do steps.append(vcmt._step('vcmt_mend_swap', 'exchange tables ' ~ copies[role] ~ ' and ' ~ own ~ ' '
      ~ on_cluster_clause(own))) -%}
  {{ return(steps) }}
{% endmacro %}
