{#- The transform: for each event in an insert block, look up the key's live
    row and tombstone, decide, and emit a cancel row (-1, a copy of the live
    row) and/or the new state (+1). Because the target only ever receives such
    pairs, sum(x * sign) is exact without FINAL.

    Positional aliases (_k0, _n0, _o0...) keep user column names, whatever
    they are, out of the expression namespace. Correct only while a key
    appears at most once per INSERT: the loader guarantees it. -#}
{% macro transform_sql(cfg, objs, columns) %}
  {{ return(adapter.dispatch('transform_sql', 'vcmt')(cfg, objs, columns)) }}
{% endmacro %}

{% macro default__transform_sql(cfg, objs, columns) %}
  {%- set q = adapter.quote -%}
  {%- set keys = vcmt._column_list(cfg.key_columns) -%}
  {%- set key_tuple = vcmt._key_tuple(cfg.key_columns) -%}
  {%- set data = vcmt._data_columns(cfg, columns) -%}
  {%- set v = q(cfg.version) -%}
  {%- set s = q(cfg.sign) -%}
  {%- set deletes_apply = '_has_old' if cfg.delete_mode == 'unconditional' else '_has_old and _nv >= _ov' -%}
select
  {%- for k in cfg.key_columns %}
  _k{{ loop.index0 }} as {{ q(k) }},
  {%- endfor %}
  {%- for c in data %}
  if(_s = -1, _o{{ loop.index0 }}, {{ vcmt.merge_expression(cfg.merge.get(c, 'replace'), '_o' ~ loop.index0, '_n' ~ loop.index0, '_has_old') }}) as {{ q(c) }},
  {%- endfor %}
  if(_s = -1, _ov, _nv) as {{ v }},
  _s as {{ s }}
from (
  select
    *,
    arrayJoin(multiIf(
      _ns < 0, if({{ deletes_apply }}, [-1], []),
      (not _has_old or _nv > _ov) and (not _has_tomb or _nv > _tv), if(_has_old, [-1, 1], [1]),
      []
    )) as _s
  from (
    select
      {%- for k in cfg.key_columns %}
      {{ q(k) }} as _k{{ loop.index0 }},
      {%- endfor %}
      {%- for c in data %}
      n.{{ q(c) }} as _n{{ loop.index0 }},
      o.{{ q(c) }} as _o{{ loop.index0 }},
      {%- endfor %}
      n.{{ v }} as _nv,
      o.{{ v }} as _ov,
      n.{{ s }} as _ns,
      o._vcmt_found = 1 as _has_old,
      t._vcmt_found = 1 as _has_tomb,
      t.{{ v }} as _tv
    from {{ objs.stage }} as n
    left join (
      select {{ keys }}, {% for c in data %}{{ q(c) }}, {% endfor %}{{ v }}, toUInt8(1) as _vcmt_found
      from {{ objs.target }} final
      prewhere {{ key_tuple }} in (select {{ keys }} from {{ objs.stage }})
      where {{ s }} = 1
    ) as o using ({{ keys }})
    left join (
      select {{ keys }}, max({{ v }}) as {{ v }}, toUInt8(1) as _vcmt_found
      from {{ objs.tombstones }}
      where {{ key_tuple }} in (select {{ keys }} from {{ objs.stage }})
      group by {{ keys }}
    ) as t using ({{ keys }})
  )
)
settings do_not_merge_across_partitions_select_final = 1
{%- endmacro %}
