{#- Schema changes are planned in full before anything runs: the plan names
    every DDL step, in the order that keeps each intermediate state correct
    for an INSERT into the stage, and is checked for anything ClickHouse would
    refuse. Planning has no side effects (it only reads the catalog) and never
    edits `cfg`; the caller derives an adjusted copy with _config_for_plan().

    Returns {
      'columns':  the target's column list after the change (stage and
                  transform are built from it),
      'merge':    extra merge policies: a column the SELECT stopped returning
                  but the target keeps is merged with `keep`, so upserts never
                  blank it,
      'changed':  true when anything differs,
      'describe': one line for the log and errors,
      'added': the names of the columns added,
      'before':   steps run before the transform is updated: projections that
                  would block a column change are dropped, then target columns
                  added/retyped, then stage columns added/retyped (an added
                  column exists in the target before the stage can carry it),
      'after':    steps run once the transform no longer reads a dropped
                  column: stage columns dropped, then target columns dropped,
                  then projections (re)added and materialized,
      'refresh_transform': the transform must be rewritten even if its text
                  is unchanged (its stored column types follow the stage),
    }
    Each step is {'on': 'target' | 'stage', 'action': ALTER clause, 'name': text}.
    The catalog is the run's observation (`obs`, observe.sql). -#}
{% macro _schema_change_plan(cfg, objs, wanted, found, obs) %}
  {%- set current = vcmt._observed_columns(obs, objs.target.identifier) -%}
  {%- set current_types = vcmt._types_by_name(current) -%}
  {%- set wanted_types = vcmt._types_by_name(wanted) -%}
  {%- set added = [] -%}{%- set removed = [] -%}{%- set changed = [] -%}
  {%- for c in wanted if c.name not in current_types -%}{%- do added.append(c) -%}{%- endfor -%}
  {%- for c in current if c.name not in wanted_types -%}{%- do removed.append(c.name) -%}{%- endfor -%}
  {%- for c in wanted if c.name in current_types
      and current_types[c.name] != c.data_type -%}{%- do changed.append(c) -%}{%- endfor -%}
  {%- set describe = 'added ' ~ (added | map(attribute='name') | list) ~ ', removed ' ~ removed ~ ', type changed '
      ~ (changed | map(attribute='name') | list) -%}

  {%- set merge = {} -%}
  {%- set result = [] -%}
  {%- if added or removed or changed -%}
    {%- set protected = cfg.key_columns + [cfg.version, cfg.sign] -%}
    {%- for name in (added | map(attribute='name') | list) + removed + (changed | map(attribute='name') | list)
        if name in protected -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: the schema of " ~ objs.target ~ " changed in key, "
          ~ "version or sign column `" ~ name ~ "` (" ~ describe ~ "); that needs a rebuild: "
          ~ "run with --full-refresh.") }}
    {%- endfor -%}
    {%- if cfg.on_schema_change == 'fail' -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: the model's columns no longer match " ~ objs.target ~ " ("
          ~ describe ~ "). Set on_schema_change='append_new_columns' or 'sync_all_columns', "
          ~ "or run with --full-refresh.") }}
    {%- endif -%}
  {%- endif -%}
  {%- set sync = cfg.on_schema_change == 'sync_all_columns' -%}
  {%- if cfg.on_schema_change == 'ignore' -%}
    {%- do result.extend(current) -%}
  {%- else -%}
    {%- for c in current -%}
      {%- if c.name in wanted_types and sync -%}
        {%- do result.append({'name': c.name, 'data_type': wanted_types[c.name]}) -%}
      {%- elif c.name in wanted_types or not sync -%}
        {%- do result.append(c) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- do result.extend(added) -%}
  {%- endif -%}
  {%- if not sync -%}
    {%- for name in removed if name not in cfg.merge -%}{%- do merge.update({name: 'keep'}) -%}{%- endfor -%}
  {%- endif -%}
  {%- set result_types = vcmt._types_by_name(result) -%}
  {%- set dropped = [] -%}{%- set retyped = [] -%}
  {%- for c in current if c.name not in result_types -%}{%- do dropped.append(c.name) -%}{%- endfor -%}
  {%- for c in current if c.name in result_types
      and result_types[c.name] != c.data_type -%}{%- do retyped.append(c.name) -%}{%- endfor -%}

  {#- Projections: which exist, which are configured, which block a column change. -#}
  {%- set existing = {} -%}
  {%- for p in obs.projections -%}{%- do existing.update({p.name: p.query}) -%}{%- endfor -%}
  {%- set wanted_projections = {} -%}
  {%- for p in cfg.projections -%}{%- do wanted_projections.update({p['name']: p['query']}) -%}{%- endfor -%}
  {%- do vcmt._check_column_changes_allowed(cfg, objs, found, dropped, retyped, wanted_projections, describe, obs) -%}

  {%- set before = [] -%}{%- set after = [] -%}
  {%- set q = vcmt._quote -%}
  {%- set drop_projections = [] -%}
  {%- for name, query in existing.items() -%}
    {%- set uses = vcmt._columns_used_by(query, dropped + retyped) -%}
    {%- if name not in wanted_projections -%}
      {%- do drop_projections.append(name) -%}
      {%- do before.append({'on': 'target', 'action': 'drop projection ' ~ q(name), 'name': 'drop projection ' ~ name
          ~ ' (no longer configured)'}) -%}
    {%- elif obs.projections_same.get(name) != '1' or uses -%}
      {%- do drop_projections.append(name) -%}
      {%- set why = 'its query changed' if not uses else 'it uses column(s) ' ~ uses ~ ', which change' -%}
      {%- do before.append({'on': 'target', 'action': 'drop projection ' ~ q(name), 'name': 'drop projection ' ~ name
          ~ ' (' ~ why ~ '; it is rebuilt below)'}) -%}
    {%- endif -%}
  {%- endfor -%}

  {#- Target first for additions and type changes: the transform keeps
      writing the columns it knows, an added column takes its default in both
      the cancel row and the new state, so sums stay exact. -#}
  {%- for c in result if c.name not in current_types -%}
    {%- do before.append({'on': 'target', 'action': 'add column if not exists ' ~ q(c.name) ~ ' ' ~ c.data_type,
        'name': 'add column ' ~ c.name ~ ' to the target'}) -%}
  {%- endfor -%}
  {%- for name in retyped -%}
    {%- do before.append({'on': 'target', 'action': 'modify column ' ~ q(name) ~ ' ' ~ result_types[name],
        'name': 'change the type of ' ~ name ~ ' to ' ~ result_types[name] ~ ' in the target'}) -%}
  {%- endfor -%}

  {#- The stage is compared on its own: an interrupted run may have left it
      different from the target. -#}
  {%- set stage_types = vcmt._types_by_name(vcmt._observed_columns(obs, objs.stage.identifier)) -%}
  {%- set stage_drops = [] -%}
  {%- for c in result -%}
    {%- if c.name not in stage_types -%}
      {%- do before.append({'on': 'stage', 'action': 'add column if not exists ' ~ q(c.name) ~ ' ' ~ c.data_type,
          'name': 'add column ' ~ c.name ~ ' to the stage'}) -%}
    {%- elif stage_types[c.name] != c.data_type -%}
      {%- do before.append({'on': 'stage', 'action': 'modify column ' ~ q(c.name) ~ ' ' ~ c.data_type,
          'name': 'change the type of ' ~ c.name ~ ' to ' ~ c.data_type ~ ' in the stage'}) -%}
    {%- endif -%}
  {%- endfor -%}

  {#- Drops come after the transform stopped reading the column (the caller
      updates it in between): first the stage, then the target. -#}
  {%- for name in stage_types.keys() if name not in result_types -%}
    {%- do stage_drops.append(name) -%}
    {%- do after.append({'on': 'stage', 'action': 'drop column if exists ' ~ q(name), 'name': 'drop column ' ~ name
        ~ ' from the stage'}) -%}
  {%- endfor -%}
  {%- for name in dropped -%}
    {%- do after.append({'on': 'target', 'action': 'drop column if exists ' ~ q(name), 'name': 'drop column ' ~ name
        ~ ' from the target'}) -%}
  {%- endfor -%}

  {%- set create_query = found.get(objs.target.identifier, {}).get('create_table_query', '') -%}
  {%- if wanted_projections and 'deduplicate_merge_projection_mode' not in create_query -%}
    {#- ClickHouse refuses projections on collapsing tables unless merges may rebuild them. -#}
    {%- do after.append({'on': 'target', 'action': "modify setting deduplicate_merge_projection_mode = 'rebuild'",
        'name': 'allow projections on the collapsing target'}) -%}
  {%- endif -%}
  {%- for name, query in wanted_projections.items() if name not in existing or name in drop_projections -%}
    {%- do after.append({'on': 'target', 'action': 'add projection ' ~ q(name) ~ ' (' ~ vcmt._user_sql(query) ~ ')',
        'name': 'add projection ' ~ name, 'log': 'adding projection ' ~ name
        ~ ' and materializing it for existing data'}) -%}
    {%- do after.append({'on': 'target', 'action': 'materialize projection ' ~ q(name) ~ ' settings mutations_sync = 2',
        'name': 'materialize projection ' ~ name}) -%}
  {%- endfor -%}

  {#- The transform's stored column types follow the stage: rewrite it after any column change. -#}
  {%- set column_steps = [] -%}
  {%- for step in before + after if ' column ' in ' '
      ~ step.action -%}{%- do column_steps.append(step) -%}{%- endfor -%}
  {{ return({
      'columns': result,
      'merge': merge,
      'changed': (added or removed or changed) | length > 0,
      'describe': describe,
      'added': added | map(attribute='name') | list,
      'before': before,
      'after': after,
      'refresh_transform': column_steps | length > 0,
      'current_types': current_types,
      'retyped': retyped,
  }) }}
{% endmacro %}


{#- The config the rest of the run works from: a copy of `cfg` with the plan's
    merge policies (a model whose kept columns merge with `keep` no longer
    folds to its last event). `cfg` itself is left as read. -#}
{% macro _config_for_plan(cfg, plan) %}
  {%- if not plan.merge -%}{{ return(cfg) }}{%- endif -%}
  {%- set adjusted = {} -%}
  {%- do adjusted.update(cfg) -%}
  {%- set merge = {} -%}
  {%- do merge.update(cfg.merge) -%}
  {%- do merge.update(plan.merge) -%}
  {%- do adjusted.update({'merge': merge, 'foldable': vcmt._folds_to_last_event(cfg.folds, merge)}) -%}
  {{ return(adjusted) }}
{% endmacro %}


{#- Refuse, before any DDL, a column change ClickHouse would refuse halfway:
    a dropped or retyped column used by a key, a skip index or the TTL, and a
    dropped column still used by a configured projection. -#}
{% macro _check_column_changes_allowed(cfg, objs, found, dropped, retyped, wanted_projections, describe, obs) %}
  {%- if not (dropped or retyped) -%}{{ return(none) }}{%- endif -%}
  {%- for name, keys in vcmt._columns_in_keys(vcmt._observed_columns(obs, objs.target.identifier),
                                             dropped + retyped) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: cannot "
        ~ ('drop' if name in dropped else 'change the type of') ~ " column `" ~ name ~ "` of " ~ objs.target
        ~ " in place: it is part of the table's " ~ keys | join(' and ') ~ " (" ~ describe
        ~ "). Nothing was changed. Keep returning the column with its type, or run with --full-refresh to rebuild "
        ~ "the table.") }}
  {%- endfor -%}
  {%- for ix in obs.indexes -%}
    {%- set index = ix.name -%}
    {%- set uses = vcmt._columns_used_by(ix.expr, dropped + retyped) -%}
    {%- if uses -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: cannot change column(s) " ~ uses ~ " of " ~ objs.target
          ~ ": skip index `" ~ index ~ "` uses them (" ~ describe ~ "). Nothing was changed. "
          ~ "Drop the index first (ALTER TABLE " ~ objs.target ~ " DROP INDEX " ~ index
          ~ "), or run with --full-refresh.") }}
    {%- endif -%}
  {%- endfor -%}
  {%- set create_query = found.get(objs.target.identifier, {}).get('create_table_query', '') -%}
  {%- set ttl = modules.re.search('\\)\\s+ENGINE\\s*=.*?\\sTTL\\s(.*?)(\\sSETTINGS\\s|$)', create_query) -%}
  {%- if ttl -%}
    {%- set uses = vcmt._columns_used_by(ttl.group(1), dropped + retyped) -%}
    {%- if uses -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: cannot change column(s) " ~ uses ~ " of " ~ objs.target
          ~ ": the table's TTL (" ~ ttl.group(1) ~ ") uses them (" ~ describe ~ "). Nothing was changed. "
          ~ "Keep returning the column with its type, or change `ttl` and run with --full-refresh.") }}
    {%- endif -%}
  {%- endif -%}
  {%- for name, query in wanted_projections.items() -%}
    {%- set uses = vcmt._columns_used_by(query, dropped) -%}
    {%- if uses -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: projection `" ~ name ~ "` is still configured but uses "
          ~ "column(s) " ~ uses ~ ", which the model no longer returns (" ~ describe ~ "). Nothing was changed. "
          ~ "Remove the projection from `projections` (it is then dropped before the column) or change its query.") }}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}


{#- The names among `columns` that appear as identifiers in a SQL expression
    (bare or quoted). Over-matching only costs a projection rebuild. -#}
{% macro _columns_used_by(sql, columns) %}
  {%- set used = [] -%}
  {%- for name in columns -%}
    {%- set pattern = '(?<![A-Za-z0-9_`"])' ~ modules.re.escape(name) ~ '(?![A-Za-z0-9_`"])|[`"]'
        ~ modules.re.escape(name) ~ '[`"]' -%}
    {%- if modules.re.search(pattern, sql) -%}{%- do used.append(name) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(used) }}
{% endmacro %}


{#- One plan step as SQL against `relation` (the real object, or a scratch copy). -#}
{% macro _plan_step_sql(step, relation) %}
  {{ return('alter table ' ~ relation ~ ' ' ~ on_cluster_clause(relation) ~ ' ' ~ step.action) }}
{% endmacro %}
