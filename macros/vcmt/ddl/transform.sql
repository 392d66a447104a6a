{#- The transform: for each event in an insert block, look up the key's live
    row and tombstone, decide, and emit a cancel row (-1, a copy of the live
    row) and/or the new state (+1). Because the target only ever receives such
    pairs, sum(x * sign) is exact without FINAL.

    Every name the transform introduces (columns, aliases, table aliases)
    starts with `_vcmt_`, a prefix a model's columns may not use, so no user
    column can shadow one. Its settings are pinned (see settings.sql).
    Correct only while a key appears at most once per INSERT: the loader
    guarantees it. -#}
{% macro transform_sql(cfg, objs, columns) %}
  {{ return(adapter.dispatch('transform_sql', 'vcmt')(cfg, objs, columns)) }}
{% endmacro %}

{% macro default__transform_sql(cfg, objs, columns) %}
  {%- set keys = vcmt._column_list(cfg.key_columns) -%}
  {%- set key_tuple = vcmt._key_tuple(cfg.key_columns) -%}
  {%- set lookup = vcmt._lookup_key(cfg, columns) -%}
  {%- set data = vcmt._data_columns(cfg, columns) -%}
  {#- Every name this SELECT quotes, quoted in one call: q(name) is its identifier. `names` must hold every name
      the template passes to q (a name not in it would render as `None`; the harness's build plans compare this
      view's text with captured runs). -#}
  {%- set names = cfg.key_columns + data + [cfg.version, cfg.sign] -%}
  {%- set quoted = vcmt._quote(names, each=true) -%}
  {%- set identifiers = {} -%}
  {%- for n in names -%}{%- do identifiers.update({n: quoted[loop.index0]}) -%}{%- endfor -%}
  {%- set q = identifiers.get -%}
  {%- set v = q(cfg.version) -%}
  {%- set s = q(cfg.sign) -%}
  {%- set deletes_apply = '_vcmt_has_old' if cfg.delete_mode == 'unconditional'
      else '_vcmt_has_old and _vcmt_nv >= _vcmt_ov' -%}
select
  {%- for k in cfg.key_columns %}
  _vcmt_k{{ loop.index0 }} as {{ q(k) }},
  {%- endfor %}
  {%- set unsent = '_vcmt_n' ~ data.index(cfg.unavailable_column) if cfg.unavailable_column in data else none %}
  {%- for c in data %}
  {%- set merged = vcmt.merge_expression(cfg.merge.get(c, 'replace'), '_vcmt_o' ~ loop.index0, '_vcmt_n' ~ loop.index0,
      '_vcmt_has_old') %}
  {%- if unsent and c != cfg.unavailable_column %}
    {#- A column the event did not send keeps the stored value. -#}
    {%- set merged = 'if(has(' ~ unsent ~ ', ' ~ vcmt._sql_string(c) ~ '), _vcmt_o' ~ loop.index0 ~ ', ' ~ merged
        ~ ')' %}
  {%- endif %}
  if(_vcmt_s = -1, _vcmt_o{{ loop.index0 }}, {{ merged }}) as {{ q(c) }},
  {%- endfor %}
  if(_vcmt_s = -1, _vcmt_ov, _vcmt_nv) as {{ v }},
  _vcmt_s as {{ s }}
from (
  select
    *,
    arrayJoin(multiIf(
      _vcmt_ns < 0, if({{ deletes_apply }}, [-1], []),
      (not _vcmt_has_old or _vcmt_nv > _vcmt_ov) and (not _vcmt_has_tomb or _vcmt_nv > _vcmt_tv),
      if(_vcmt_has_old, [-1, 1], [1]),
      []
    )) as _vcmt_s
  from (
    select
      {%- for k in cfg.key_columns %}
      {{ q(k) }} as _vcmt_k{{ loop.index0 }},
      {%- endfor %}
      {%- for c in data %}
      _vcmt_new.{{ q(c) }} as _vcmt_n{{ loop.index0 }},
      _vcmt_old.{{ q(c) }} as _vcmt_o{{ loop.index0 }},
      {%- endfor %}
      _vcmt_new.{{ v }} as _vcmt_nv,
      _vcmt_old.{{ v }} as _vcmt_ov,
      _vcmt_new.{{ s }} as _vcmt_ns,
      _vcmt_old._vcmt_found = 1 as _vcmt_has_old,
      _vcmt_tomb._vcmt_found = 1 as _vcmt_has_tomb,
      _vcmt_tomb.{{ v }} as _vcmt_tv
    from {{ objs.stage }} as _vcmt_new
    left join (
      select {{ keys }}, {% for c in data %}{{ q(c) }}, {% endfor %}{{ v }}, toUInt8(1) as _vcmt_found
      from {{ objs.target }} final
      prewhere {{ lookup.left }} in (select {{ lookup.select }} from {{ objs.stage }})
      where {{ s }} = 1
    ) as _vcmt_old using ({{ keys }})
    left join (
      select {{ keys }}, max({{ v }}) as {{ v }}, toUInt8(1) as _vcmt_found
      from {{ objs.tombstones }}
      where {{ key_tuple }} in (select {{ keys }} from {{ objs.stage }})
      group by {{ keys }}
    ) as _vcmt_tomb using ({{ keys }})
  )
)
{{ vcmt._transform_settings_clause() }}
{%- endmacro %}


{#- The transform runs inside each INSERT into the stage and inherits its
    settings; its own SETTINGS clause pins what it computes for inserts that
    do not come from vcmt's loader. -#}
{% macro _transform_settings_clause() %}
  {%- set settings = {} -%}
  {#- A view definition may not carry query-construction settings (limit, offset):
      for those the INSERT's own settings, which the view inherits, decide. -#}
  {%- for k, v in vcmt._pinned_query_settings().items() if k not in ['limit', 'offset']
      and not k.startswith('input_format') -%}
    {%- do settings.update({k: v}) -%}
  {%- endfor -%}
  {%- do settings.update({'do_not_merge_across_partitions_select_final': 1}) -%}
  {{ return(vcmt._settings_clause(settings)) }}
{% endmacro %}
