{#- Engine checks that run before the first DDL on a model's objects, so an
    error only ClickHouse can detect (an unparseable `merge` expression, a typo
    in `partition_by`, a column change a projection blocks) fails the run while
    every object is still as it was.

    The checks build scratch copies as TEMPORARY tables: they live only in the
    current session, never appear in the model's database, and vanish with the
    connection even when a check fails (a macro cannot catch the error to clean
    up after itself). -#}


{#- Scratch stand-ins for every role of `objs`, named after the model. -#}
{% macro _check_relations(objs) %}
  {%- set prefix = '_vcmt_check_' ~ local_md5(objs.target.schema ~ '.' ~ objs.target.identifier)[:10] ~ '_' -%}
  {%- set chk = {} -%}
  {%- for role in objs.keys() -%}
    {%- do chk.update({role: api.Relation.create(identifier=prefix ~ role, type='table')}) -%}
  {%- endfor -%}
  {{ return(chk) }}
{% endmacro %}


{#- Every scratch table of `chk` dropped, in one statement (the scratch lock
    of _check_views too). -#}
{% macro _drop_check_relations(chk) %}
  {%- set names = [] -%}
  {%- for role in chk.keys() -%}{%- do names.append(chk[role] | string) -%}{%- endfor -%}
  {%- do names.append(vcmt._lock_relation(chk.target) | string) -%}
  {%- call statement('vcmt_check_drop') -%}drop temporary table if exists {{ names | join(', ') }}{%- endcall -%}
{% endmacro %}


{% macro _as_temporary(create_sql) %}
  {{ return(vcmt._create_head(create_sql, 'create temporary table ')) }}
{% endmacro %}

{#- The same CREATE that does nothing where the table exists. -#}
{% macro _if_not_exists(create_sql) %}
  {{ return(vcmt._create_head(create_sql, 'create table if not exists ')) }}
{% endmacro %}

{#- A `create table ...` statement with its first words replaced by `head`. -#}
{% macro _create_head(create_sql, head) %}
  {{ return(modules.re.sub('(?is)^\\s*create\\s+table\\s', head, create_sql, 1)) }}
{% endmacro %}


{#- Syntax first, before any other check reads the config's SQL: every
    expression of the config through formatQueryOrNull (NULL instead of an
    error), in the run's observation (observe.sql, `probes`: the list of
    _syntax_probes, 1 where it failed), so the message names the setting that
    is wrong rather than showing the statement the expression was spliced
    into. -#}
{% macro _check_syntax(cfg, target, obs) %}
  {%- set probes = vcmt._syntax_probes(cfg) -%}
  {%- for i in range(probes | length) if obs.probes[i] | int == 1 -%}
    {%- set what, fix = probes[i][0], probes[i][2] -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: " ~ what ~ " is not valid SQL: ClickHouse cannot parse it. "
        ~ "Nothing was created or changed for " ~ target ~ "; " ~ fix ~ ".") }}
  {%- endfor -%}
  {#- What the parsed text means (config.sql). -#}
  {%- do vcmt._check_sorting_key(cfg, obs.order_items) -%}
  {%- do vcmt._check_ttl_keeps_rows(cfg.ttl) -%}
{% endmacro %}


{#- The statements that show whether the engine parses the config's SQL, as
    (what, SQL, fix). -#}
{% macro _syntax_probes(cfg) %}
  {%- set probes = [] -%}
  {#- The options with a `probe` (model/options.sql): their text in its statement. -#}
  {%- for opt in vcmt._options() if opt.get('probe') and cfg[opt['name']] -%}
    {%- set value = cfg[opt['name']] -%}
    {%- set shown = value if value is string else value | join(', ') -%}
    {%- do probes.append(('`' ~ opt['name'] ~ '` (' ~ shown ~ ')', opt['probe'] | replace('{}',
        vcmt._user_sql_list(value)), opt['fix'] | replace('{keys}', cfg.key_columns | join(', ')))) -%}
  {%- endfor -%}
  {%- for index in cfg.indexes -%}
    {%- do probes.append(("`indexes` entry `" ~ index.name ~ "` (" ~ index.definition ~ ")", 'create table t (x Int8, '
        ~ 'index i ' ~ vcmt._user_sql(index.definition) ~ ') engine = MergeTree order by tuple()',
                          "fix its `definition`: `<expression> TYPE <type> GRANULARITY <n>`, e.g. "
                              ~ "'id TYPE bloom_filter(0.0001) GRANULARITY 1'")) -%}
  {%- endfor -%}
  {%- for column, policy in cfg.merge.items() if '{old}' in policy or '{new}' in policy -%}
    {%- do probes.append(("`merge` for column `" ~ column ~ "` (" ~ policy ~ ")", 'select ('
        ~ vcmt._user_sql(policy | replace('{old}', 'old') | replace('{new}', 'new')) ~ ')',
                          "fix the expression: any SQL using {old} (the stored value) and {new} (the event's), e.g. "
                              ~ "'{old} + {new}'")) -%}
  {%- endfor -%}
  {%- for p in cfg.projections -%}
    {%- do probes.append(('projection `' ~ p['name'] ~ '` (' ~ p['query'] ~ ')', 'create table t (x Int8, '
        ~ 'projection p (' ~ vcmt._user_sql(p['query']) ~ ')) engine = MergeTree order by tuple()',
        'fix its `query`')) -%}
  {%- endfor -%}
  {{ return(probes) }}
{% endmacro %}


{#- A full build (first run or --full-refresh): the config's expressions, the
    target's DDL and every view's SELECT, on scratch tables. -#}
{% macro _check_build(cfg, objs, columns) %}
  {%- set chk = vcmt._check_relations(objs) -%}
  {%- do vcmt._drop_check_relations(chk) -%}
  {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': checking the table and its views with ClickHouse on temporary '
      ~ 'tables; nothing is created or changed until this passes', info=true) }}
  {%- call statement('vcmt_check_stage') -%}{{ vcmt._as_temporary(vcmt._create_stage_sql(chk.stage,
      columns)) }}{%- endcall -%}
  {%- do vcmt._check_expressions_on(cfg, chk.stage, ['partition_by', 'order_by', 'primary_key', 'merge',
      'truncate_when', 'projections']) -%}
  {%- call statement('vcmt_check_target') -%}{{ vcmt._as_temporary(vcmt.create_target_sql(cfg, chk.target,
      columns)) }}{%- endcall -%}
  {%- do vcmt._check_views(cfg, chk, columns) -%}
  {%- do vcmt._drop_check_relations(chk) -%}
{% endmacro %}


{#- Each expression of the config evaluated alone on the scratch stage (zero
    rows), aliased with the setting's name: an unknown column or function
    then fails with an engine message that names the setting it came from,
    e.g. "Unknown function nofn ... In scope SELECT nofn(...) AS `vcmt_upsert:
    merge for column amount`". -#}
{% macro _check_expressions_on(cfg, stage, options) %}
  {%- set probes = [] -%}
  {%- for opt in ['partition_by', 'order_by', 'primary_key'] if opt in options and cfg[opt] -%}
    {%- do probes.append('(' ~ vcmt._user_sql_list(cfg[opt]) ~ ') as `vcmt_upsert: ' ~ opt ~ '`') -%}
  {%- endfor -%}
  {%- if 'merge' in options -%}
    {%- for column, policy in cfg.merge.items() if '{old}' in policy or '{new}' in policy -%}
      {%- set col = 'n.' ~ vcmt._quote(column) -%}
      {%- do probes.append('(' ~ vcmt._user_sql(policy | replace('{old}', col) | replace('{new}', col))
          ~ ') as `vcmt_upsert: merge for column ' ~ column ~ '`') -%}
    {%- endfor -%}
  {%- endif -%}
  {%- if 'truncate_when' in options and cfg.truncate_when -%}
    {%- do probes.append('(' ~ vcmt._user_sql(cfg.truncate_when) ~ ') as `vcmt_upsert: truncate_when`') -%}
  {%- endif -%}
  {%- if probes -%}
    {%- call statement('vcmt_check_expressions') -%}
      select {{ probes | join(', ') }} from {{ stage }} as n
    {%- endcall -%}
  {%- endif -%}
  {#- A projection's query has no FROM: analysed over the stage's columns
      (FROM first), with the projection's name as its first item, so an
      unknown column or function is reported naming the projection, without
      the engine's "missing FROM" hint that the table's DDL would add. -#}
  {%- for p in cfg.projections if 'projections' in options -%}
    {%- set named = '0 as `vcmt_upsert: projection ' ~ p['name'] ~ '`, ' -%}
    {%- set query = modules.re.sub('(?is)^\\s*select(\\s+distinct\\b)?\\s*', 'select\\1 ' ~ named, p['query'], 1) -%}
    {%- call statement('vcmt_check_projection') -%}
      explain from {{ stage }} as n {{ vcmt._user_sql(query) }}
    {%- endcall -%}
  {%- endfor -%}
{% endmacro %}


{#- An existing model: rehearse the plan's ALTERs on an empty copy of the
    target (same columns, keys, projections, skip indexes, TTL), so anything
    ClickHouse refuses is refused before the real objects are touched; then
    check the views against the result (the scratch stage has the plan's columns). A replicated target cannot be copied
    into a temporary table: it is checked from the config instead, after the
    catalog checks of the plan. -#}
{% macro _check_plan(cfg, objs, found, plan) %}
  {%- set chk = vcmt._check_relations(objs) -%}
  {%- do vcmt._drop_check_relations(chk) -%}
  {%- call statement('vcmt_check_stage') -%}{{ vcmt._as_temporary(vcmt._create_stage_sql(chk.stage,
      plan.columns)) }}{%- endcall -%}
  {%- do vcmt._check_expressions_on(cfg, chk.stage, ['merge', 'truncate_when', 'projections']) -%}
  {%- set create_query = found[objs.target.identifier].create_table_query -%}
  {%- set name = '(`(?:[^`\\\\]|\\\\.)*`|[^\\s`(.]+)' -%}
  {%- set prefix = '^CREATE TABLE ' ~ name ~ '\\.' ~ name ~ '\\s*' -%}
  {%- if 'Replicated' not in found[objs.target.identifier].engine and modules.re.match(prefix, create_query) -%}
    {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': checking ' ~ (plan.before + plan.after) | length
        ~ ' schema step(s) and the views with ClickHouse on a temporary copy of the table; nothing is changed until '
        ~ 'this passes', info=true) }}
    {%- call statement('vcmt_check_target') -%}{{ modules.re.sub(prefix, 'CREATE TEMPORARY TABLE ' ~ chk.target ~ ' ',
        create_query, 1) }}{%- endcall -%}
    {%- for step in plan.before + plan.after if step.on == 'target' -%}
      {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': rehearsing: ' ~ step.name) }}
      {%- call statement('vcmt_check_step') -%}{{ vcmt._plan_step_sql(step, chk.target) }}{%- endcall -%}
    {%- endfor -%}
  {%- else -%}
    {%- call statement('vcmt_check_target') -%}{{ vcmt._as_temporary(vcmt.create_target_sql(cfg, chk.target,
        plan.columns)) }}{%- endcall -%}
  {%- endif -%}
  {%- do vcmt._check_views(cfg, chk, plan.columns) -%}
  {%- do vcmt._drop_check_relations(chk) -%}
{% endmacro %}


{#- With the scratch stage and target in place, every view's SELECT is
    analysed against the scratch tables; the
    transform's result is also inserted into the scratch target by column name,
    as the materialized view does, so a merge expression whose result cannot
    become the column's type fails here too. Zero rows move: the scratch stage
    is a Null table and the scratch target is empty. -#}
{% macro _check_views(cfg, chk, columns) %}
  {%- for role, create_sql in vcmt._helper_tables(cfg, chk, columns) -%}
    {%- call statement('vcmt_check_' ~ role) -%}{{ vcmt._as_temporary(create_sql) }}{%- endcall -%}
  {%- endfor -%}
  {#- The change feed's writer reads the model's lock (load/changes.sql `_load_number_sql`): a scratch one. -#}
  {%- if vcmt._object_wanted(vcmt._object('changes_writer'), cfg) -%}
    {%- call statement('vcmt_check_lock') -%}
      {{ vcmt._as_temporary(vcmt._create_lock_sql(vcmt._lock_relation(chk.target))) }}
    {%- endcall -%}
  {%- endif -%}
  {%- set names = vcmt._column_list(columns | map(attribute='name') | list) -%}
  {%- call statement('vcmt_check_transform') -%}
    insert into {{ chk.target }} ({{ names }}) select {{ names }} from ({{ vcmt.transform_sql(cfg, chk, columns) }})
  {%- endcall -%}
  {%- for role, to, select_sql in vcmt._views(cfg, chk, columns) if role != 'transform' -%}
    {%- call statement('vcmt_check_' ~ role) -%}explain {{ select_sql }}{%- endcall -%}
  {%- endfor -%}
{% endmacro %}


{#- dbt's model contract (`contract: {enforced: true}`), before any DDL: the
    SELECT's column names and types must be the contract's (dbt's own check,
    `get_assert_columns_equivalent`). Constraints are refused: a
    VersionedCollapsingMergeTree target holds cancel rows and old versions
    beside the live ones, so no not_null, unique, primary_key or check
    constraint can hold for its rows. -#}
{% macro _check_contract(sql) %}
  {%- set contract = config.get('contract') -%}
  {%- if not (contract and contract.enforced) -%}{{ return(none) }}{%- endif -%}
  {%- set constrained = [] -%}
  {%- for c in model.get('constraints', []) -%}{%- do constrained.append('model: ' ~ c['type']) -%}{%- endfor -%}
  {%- for name, column in model['columns'].items() -%}
    {%- for c in column.get('constraints', []) -%}{%- do constrained.append(name ~ ': ' ~ c['type']) -%}{%- endfor -%}
  {%- endfor -%}
  {%- if constrained -%}
    {%- do exceptions.raise_compiler_error(
          "vcmt_upsert " ~ this.identifier ~ ": the model's contract declares constraints (" ~ constrained | join(', ')
          ~ "), which a vcmt_upsert model cannot enforce: its table keeps cancel rows and old versions beside the "
          ~ "current rows. Remove the constraints and keep `contract: {enforced: true}` (the SELECT's column names "
          ~ "and types are checked), or test the current rows with data tests (vcmt.single_live_version, "
          ~ "not_null on a model reading it). Nothing was changed.") -%}
  {%- endif -%}
  {{ get_assert_columns_equivalent(sql) }}
{% endmacro %}


{#- The columns the config builds the table `role` with, as DESCRIBE gives
    them: created as the temporary table `chk` (_check_relations), read,
    dropped. -#}
{% macro _built_columns(cfg, role, chk, columns) %}
  {%- call statement('vcmt_check_' ~ role) -%}{{ vcmt._as_temporary(vcmt._create_role_sql(cfg, role, chk,
      columns)) }}{%- endcall -%}
  {%- set built = vcmt._described_columns(chk) -%}
  {%- call statement('vcmt_check_drop') -%}drop temporary table {{ chk }}{%- endcall -%}
  {{ return(built) }}
{% endmacro %}
