{#- The fold (docs/design.md#fold-or-rounds): when every policy is `replace`
    and deletes are versioned, a key's events of a batch fold to its last
    one, and the batch goes in one INSERT (or one per virtual shard). -#}


{#- The fold's INSERT: each key's last event (docs/design.md#fold-or-rounds). -#}
{% macro _fold_insert_sql(cfg, objs, data, events_sql) %}
  insert into {{ vcmt._all_shards(objs, 'stage') }} ({{ vcmt._column_list(cfg.key_columns + data + [cfg.version,
      cfg.sign]) }})
  {{ vcmt._fold_select_sql(cfg, data, events_sql, vcmt._fenced(objs.target)) }}
  {{ vcmt._stage_insert_settings(cfg, holder_of=objs.target) }}
{% endmacro %}


{#- Each key's last event. LIMIT 1 BY over a sort is about twice as fast as
    argMax over a tuple here, and hands the transform its events in key
    order, so the target's part writer finds them (nearly) sorted. A write
    passes the load's `fence` (lock.sql). -#}
{% macro _fold_select_sql(cfg, data, events_sql, fence) %}
  {%- set keys = vcmt._column_list(cfg.key_columns) -%}
  {%- set v = vcmt._quote(cfg.version) -%}
  select {{ keys }}{% for c in data %}, {{ vcmt._quote(c) }}{% endfor %}, {{ v }}, _vcmt_sign
  from ({{ events_sql }})
  where {{ fence }}
  order by {{ keys }}, {{ v }} desc, _vcmt_sign asc
  limit 1 by {{ keys }}
{% endmacro %}


{#- The fold on K virtual shards (docs/design.md#virtual-shards): the folded
    events are written once into `m__batch` as round 1, in key order with
    their position (the SELECT is read once, so a SELECT reading the model
    sees it as before the load); then one INSERT through the load's fan-out
    sends each shard one range of positions, i.e. of keys, from there.
    `keys` is the batch's number of distinct keys (the stats query counted
    it): the folded batch's rows; `k` the load's shards
    (virtual_shards.sql `_virtual_shards_of`). Returns the statements it ran
    (for target/run/). -#}
{% macro _load_folded_in_shards(cfg, objs, data, events_sql, keys, k) %}
  {%- set create = vcmt._replace_batch(objs) -%}
  {%- set batch_sql -%}
    {{ create }} engine = MergeTree order by tuple() {{ vcmt._load_table_comment() }} as
    select *, toUInt64(1) as _vcmt_round, rowNumberInAllBlocks() as _vcmt_pos from ({{ vcmt._fold_select_sql(cfg, data,
        events_sql, vcmt._fenced(objs.target)) }})
    {{ vcmt._stage_insert_settings(cfg, holder_of=objs.target) }}
  {%- endset -%}
  {%- call statement('vcmt_batch') -%}{{ batch_sql }}{%- endcall -%}
  {%- set ran = [batch_sql] + vcmt._create_fanout(cfg, objs, data, k) -%}
  {#- _create_fanout checked and renewed the lock right before its DDL: the INSERT follows at once. -#}
  {%- do ran.append(vcmt._round_insert_sql(cfg, objs, data, 1, vcmt._range_shard(k, keys))) -%}
  {%- call statement('vcmt_load') -%}{{ ran[-1] }}{%- endcall -%}
  {%- do vcmt._drop_load_table(objs.fanout, k) -%}
  {%- call statement('vcmt_batch_drop') -%}{{ vcmt._drop_sql(objs.batch, local=true) }}{%- endcall -%}
  {{ return(ran) }}
{% endmacro %}
