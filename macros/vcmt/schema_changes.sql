{#- Compare the SELECT's columns with the target's and apply on_schema_change.
    Returns the target's column list after the change (the transform and the
    stage are built from it). Columns the SELECT no longer returns but the
    target keeps are merged with `keep`, so upserts never blank them. -#}
{% macro _apply_schema_changes(cfg, objs, wanted) %}
  {%- set current = [] -%}
  {%- set current_types = {} -%}
  {%- for c in adapter.get_columns_in_relation(objs.target) -%}
    {%- do current.append({'name': c.name, 'data_type': c.data_type}) -%}
    {%- do current_types.update({c.name: c.data_type}) -%}
  {%- endfor -%}
  {%- set wanted_types = {} -%}
  {%- for c in wanted -%}{%- do wanted_types.update({c.name: c.data_type}) -%}{%- endfor -%}
  {%- set added = [] -%}{%- set removed = [] -%}{%- set changed = [] -%}
  {%- for c in wanted if c.name not in current_types -%}{%- do added.append(c) -%}{%- endfor -%}
  {%- for c in current if c.name not in wanted_types -%}{%- do removed.append(c.name) -%}{%- endfor -%}
  {%- for c in wanted if c.name in current_types and current_types[c.name] != c.data_type -%}{%- do changed.append(c) -%}{%- endfor -%}

  {%- if not (added or removed or changed) -%}
    {{ return(current) }}
  {%- endif -%}
  {%- set describe = 'added ' ~ (added | map(attribute='name') | list) ~ ', removed ' ~ removed ~ ', type changed ' ~ (changed | map(attribute='name') | list) -%}
  {%- set protected = cfg.key_columns + [cfg.version, cfg.sign] -%}
  {%- for name in (added | map(attribute='name') | list) + removed + (changed | map(attribute='name') | list) if name in protected -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: the schema of `" ~ objs.target ~ "` changed in key, version or sign column `" ~ name ~ "` (" ~ describe ~ "); that needs a rebuild: run with --full-refresh.") }}
  {%- endfor -%}
  {%- if cfg.on_schema_change == 'fail' -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: the model's columns no longer match `" ~ objs.target ~ "` (" ~ describe ~ "). Set on_schema_change='append_new_columns' or 'sync_all_columns', or run with --full-refresh.") }}
  {%- endif -%}
  {%- if cfg.on_schema_change == 'ignore' -%}
    {%- for name in removed if name not in cfg.merge -%}{%- do cfg.merge.update({name: 'keep'}) -%}{%- endfor -%}
    {%- do cfg.update({'foldable': cfg.foldable and not removed}) -%}
    {{ return(current) }}
  {%- endif -%}
  {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': schema change (' ~ cfg.on_schema_change ~ '): ' ~ describe, info=true) }}

  {%- set result = [] -%}
  {%- for c in current -%}
    {%- if c.name in wanted_types and cfg.on_schema_change == 'sync_all_columns' -%}
      {%- do result.append({'name': c.name, 'data_type': wanted_types[c.name]}) -%}
    {%- elif c.name in wanted_types or cfg.on_schema_change == 'append_new_columns' -%}
      {%- do result.append(c) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- do result.extend(added) -%}

  {%- for rel in [objs.target, objs.stage] -%}
    {%- for c in added -%}
      {%- call statement('vcmt_add_column') -%}
        alter table {{ rel }} {{ on_cluster_clause(rel) }} add column if not exists {{ vcmt._quote(c.name) }} {{ c.data_type }}
      {%- endcall -%}
    {%- endfor -%}
    {%- if cfg.on_schema_change == 'sync_all_columns' -%}
      {%- for c in changed -%}
        {%- call statement('vcmt_modify_column') -%}
          alter table {{ rel }} {{ on_cluster_clause(rel) }} modify column {{ vcmt._quote(c.name) }} {{ c.data_type }}
        {%- endcall -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}

  {%- if cfg.on_schema_change == 'sync_all_columns' and removed -%}
    {#- The transform must stop reading a column before the stage loses it. -#}
    {%- call statement('vcmt_modify_transform') -%}
      alter table {{ objs.transform }} {{ on_cluster_clause(objs.transform) }} modify query {{ vcmt.transform_sql(cfg, objs, result) }}
    {%- endcall -%}
    {%- for rel in [objs.stage, objs.target] -%}
      {%- for name in removed -%}
        {%- call statement('vcmt_drop_column') -%}
          alter table {{ rel }} {{ on_cluster_clause(rel) }} drop column if exists {{ vcmt._quote(name) }}
        {%- endcall -%}
      {%- endfor -%}
    {%- endfor -%}
  {%- elif removed -%}
    {%- for name in removed if name not in cfg.merge -%}{%- do cfg.merge.update({name: 'keep'}) -%}{%- endfor -%}
    {%- do cfg.update({'foldable': false}) -%}
  {%- endif -%}
  {{ return(result) }}
{% endmacro %}
