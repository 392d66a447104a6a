{#- The way out of a refused change of a stored model's layout (here, and
    vcmt.load_stage's routing check). -#}
{% macro _refresh_advice(objs) %}
  {{ return(" Run `dbt run --select " ~ vcmt._public_relation(objs).identifier ~ " --full-refresh` to rebuild it "
      ~ "from its SELECT (the SELECT must then return every live row), or restore the old value.") }}
{% endmacro %}


{#- An existing target keeps the layout it was created with: its key, sorting
    key, partition key, primary key, TTL and table settings. Without
    --full-refresh a changed value was ignored in silence (or, for the key,
    failed deep inside the transform), so compare before any DDL and say
    which setting changed, from what to what, and how to apply it.

    Both sides go through the engine's formatter: the stored CREATE is the
    engine's own text, the wanted one is the DDL this config would run,
    formatted by the same formatQuery (`obs.create_target`: the run's
    observation, observe.sql), so only a real change counts. -#}
{% macro _check_stored_layout(cfg, objs, columns, found, obs) %}
  {%- set target = objs.target -%}
  {%- set refresh = vcmt._refresh_advice(objs) -%}

  {#- The key: the tombstones table is ordered by exactly the key columns. -#}
  {%- if objs.tombstones.identifier in found -%}
    {%- set stored_keys = vcmt._observed_columns(obs, objs.tombstones.identifier) | selectattr('sorting', 'equalto',
        '1') | map(attribute='name') | list -%}
    {%- if stored_keys and stored_keys | sort != cfg.key_columns | sort -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: `unique_key` changed, but " ~ target
          ~ " and its tombstones are keyed by " ~ stored_keys ~ ": rows and deletes recorded under the old key cannot "
          ~ "be matched by the new one; got `" ~ cfg.key_columns ~ "`." ~ refresh) }}
    {%- endif -%}
  {%- endif -%}

  {%- do vcmt._check_stored_routing(cfg, objs, found, refresh, obs=obs) -%}
  {%- do vcmt._check_stored_indexes(cfg, objs, refresh, obs) -%}

  {%- set stored = vcmt._ddl_clauses(found[target.identifier].create_table_query) -%}
  {%- set wanted = vcmt._ddl_clauses(obs.create_target) -%}

  {#- The options stored as a clause of the CREATE (model/options.sql). -#}
  {%- for opt in vcmt._options() if opt.get('clause') -%}
    {%- set clause = opt['clause'] -%}
    {%- set how = " (a TTL can also be changed in place with ALTER TABLE ... MODIFY TTL, keeping the config in step)"
        if clause == 'TTL' else '' -%}
    {%- if stored.get(clause, '') != wanted.get(clause, '') -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: `" ~ opt['name'] ~ "` changed, but the existing table " ~ target
          ~ " keeps the " ~ clause ~ " it was created with: stored `" ~ (stored.get(clause) or 'none') ~ "`; got `"
          ~ (wanted.get(clause) or 'none') ~ "`." ~ refresh ~ how) }}
    {%- endif -%}
  {%- endfor -%}

  {#- Settings: one the engine added with its default value, or the projection
      mode the package manages itself, is not a change the user made. -#}
  {%- set stored_settings = vcmt._parse_settings_clause(stored.get('SETTINGS', '')) -%}
  {%- set wanted_settings = vcmt._parse_settings_clause(wanted.get('SETTINGS', '')) -%}
  {%- set managed = [] if 'deduplicate_merge_projection_mode' in cfg.settings
      else ['deduplicate_merge_projection_mode'] -%}
  {%- set changes = [] -%}
  {%- for name, value in wanted_settings.items() if name not in managed and stored_settings.get(name) != value -%}
    {%- do changes.append([name, stored_settings.get(name), value]) -%}
  {%- endfor -%}
  {%- set dropped = [] -%}
  {%- for name in stored_settings.keys() if name not in wanted_settings
      and name not in managed -%}{%- do dropped.append(name) -%}{%- endfor -%}
  {%- if dropped -%}
    {%- set defaults = {} -%}
    {%- for d in obs.defaults -%}{%- do defaults.update({d.name: d.value}) -%}{%- endfor -%}
    {%- for name in dropped if stored_settings[name] | replace("'", '') != defaults.get(name) -%}
      {%- do changes.append([name, stored_settings[name], none]) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- if changes -%}
    {%- set described = [] -%}
    {%- for name, old, new in changes -%}
      {%- do described.append(name ~ ": " ~ (old if old is not none else 'default') ~ " -> "
          ~ (new if new is not none else 'default')) -%}
    {%- endfor -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `settings` changed, but the existing table " ~ target
        ~ " keeps the settings it was created with; got `" ~ described | join(', ') ~ "`." ~ refresh
        ~ " A setting the engine can change in place may instead be applied with ALTER TABLE ... MODIFY SETTING, "
        ~ "keeping the config in step.") }}
  {%- endif -%}
{% endmacro %}


{#- The table-level clauses of a single-line CREATE TABLE, by keyword:
    {'PARTITION BY': '(toYYYYMM(d))', 'ORDER BY': '(id)', 'SETTINGS': '...', ...}. -#}
{% macro _ddl_clauses(create_sql) %}
  {%- set start = create_sql.rfind(' ENGINE = ') -%}
  {%- set tail = create_sql[start:] if start >= 0 else '' -%}
  {%- set parts = modules.re.split(' (PARTITION BY|PRIMARY KEY|ORDER BY|SAMPLE BY|TTL|SETTINGS|COMMENT) ', tail) -%}
  {%- set clauses = {} -%}
  {%- for i in range(1, parts | length, 2) -%}{%- do clauses.update({parts[i]: parts[i + 1] | trim}) -%}{%- endfor -%}
  {{ return(clauses) }}
{% endmacro %}


{#- `a = 1, b = 'x'` -> {'a': '1', 'b': "'x'"} (values as the engine formatted them). -#}
{% macro _parse_settings_clause(text) %}
  {%- set settings = {} -%}
  {%- for item in vcmt._split_top_level(text) -%}
    {%- set pair = item.split('=', 1) -%}
    {%- if pair | length == 2 -%}{%- do settings.update({pair[0] | trim: pair[1] | trim}) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(settings) }}
{% endmacro %}



{#- A skip index of `indexes` that the existing target lacks is named with the
    statements that add it in place (ALTER TABLE ... ADD INDEX, then MATERIALIZE
    INDEX for the parts already written); it is never added in silence. An
    index the table has and the config does not list is left alone: one added
    by hand is allowed (schema changes check the columns it uses). -#}
{% macro _check_stored_indexes(cfg, objs, refresh, obs) %}
  {%- if not cfg.indexes -%}{{ return(none) }}{%- endif -%}
  {%- set target = objs.target -%}
  {%- set stored = obs.indexes | map(attribute='name') | list -%}
  {%- set missing = [] -%}
  {%- for index in cfg.indexes if index.name not in stored -%}{%- do missing.append(index) -%}{%- endfor -%}
  {%- if missing -%}
    {%- set statements = [] -%}
    {%- for index in missing -%}
      {%- do statements.append('ALTER TABLE ' ~ target ~ ' ' ~ on_cluster_clause(target) ~ ' ADD INDEX '
          ~ vcmt._quote(index.name) ~ ' ' ~ index.definition | trim ~ '; ALTER TABLE ' ~ target ~ ' '
          ~ on_cluster_clause(target) ~ ' MATERIALIZE INDEX ' ~ vcmt._quote(index.name) ~ ';') -%}
    {%- endfor -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `indexes` lists " ~ (missing | map(attribute='name') | list)
        ~ ", which the existing table " ~ target ~ " does not have (skip indexes are created with the table). "
        ~ "Add them in place: " ~ statements | join(' ') ~ refresh) }}
  {%- endif -%}
{% endmacro %}


{#- Refuse, before any DDL, a type change the stored rows cannot take, by the
    loader's own rule for incoming values (event_values.sql): MODIFY COLUMN
    would wrap or round them (a narrower number or decimal scale), or fail
    half-way through its mutation and leave FINAL failing (text that is no
    number). Every stored row counts, cancel rows included. -#}
{% macro _check_stored_values_fit(cfg, objs, current_types, result, retyped) %}
  {%- set checks = vcmt._value_checks(cfg, result | selectattr('name', 'in', retyped) | list, current_types) -%}
  {%- if not checks -%}{{ return(none) }}{%- endif -%}
  {%- set counts = [] -%}
  {%- for ch in checks -%}{%- do counts.append('countIf(' ~ ch.bad ~ ')') -%}{%- endfor -%}
  {%- set found = run_query('select ' ~ counts | join(', ') ~ ' from ' ~ objs.target ~ ' '
      ~ vcmt._read_settings()).rows[0] -%}
  {%- for ch in checks -%}{%- if found[loop.index0] | int > 0 -%}
    {%- set sample = run_query('select toString(' ~ vcmt._quote(ch.name) ~ ') from ' ~ objs.target ~ ' where ' ~ ch.bad
        ~ ' limit 1').rows[0][0] -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: cannot change the type of column `" ~ ch.name ~ "` of `"
        ~ objs.target ~ "` from "
        ~ current_types[ch.name] ~ " to " ~ ch.type ~ ": " ~ found[loop.index0] ~ " stored row(s) "
        ~ "cannot take it without losing or changing their value, e.g. "
        ~ (sample if sample is not none else 'NULL') ~ ". Nothing was changed. Keep returning the column with its type "
        ~ "(cast in the SELECT), or run with --full-refresh to reload it from the SELECT.") }}
  {%- endif -%}{%- endfor -%}
{% endmacro %}
