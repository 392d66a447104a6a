{#- The round loader (docs/design.md#fold-or-rounds): the batch's events go into
    `m__batch`, numbered per key in apply order, and round r is one INSERT of
    every key's r-th event. The source is read once, by the CREATE of
    `m__batch`, whose rows carry the counts the run report needs.

    `m__batch` columns besides the events': `_vcmt_n` (events read, exact
    duplicates included, 0 on folded rows), `_vcmt_wm` (their highest
    watermark), `_vcmt_folded` (events a folded row stands for, minus one) and
    `_vcmt_round` (0: read but not inserted).

    When every policy folds (_fold_aggregates) and deletes are versioned, a
    key's events are folded first (docs/design.md#hot-keys): at most two
    rounds, whatever the number of events per key. -#}
{% macro _load_in_rounds(cfg, objs, columns, data, events_sql) %}
  {%- set folds = vcmt._fold_aggregates(cfg, columns, data) -%}

  {%- set ran = [vcmt._batch_create_sql(cfg, objs, data, events_sql, folds, vcmt._replace_batch(objs))] -%}
  {%- call statement('vcmt_batch') -%}{{ ran[0] }}{%- endcall -%}
  {%- if folds is not none -%}
    {%- do vcmt._fold_batch(cfg, objs, columns, data, folds) -%}
    {%- do ran.append(vcmt._fold_batch_sql(cfg, objs, columns, data, folds)) -%}
  {%- endif -%}

  {#- Events, deletes and the watermark count every event read, redeliveries
      included; fed what reaches the stage or is skipped there as stale. -#}
  {%- set wm_read = 'if(countIf(_vcmt_n > 0) = 0, null, toString(maxIf(_vcmt_wm, _vcmt_n > 0)))'
      if cfg.watermark else 'cast(null as Nullable(String))' -%}
  {%- set stats = run_query('select sum(_vcmt_n), sumIf(_vcmt_n, _vcmt_sign < 0), '
                            ~ 'countIf(_vcmt_n > 0) - sum(_vcmt_folded), max(_vcmt_round), ' ~ wm_read
                            ~ ' from ' ~ objs.batch ~ ' ' ~ vcmt._read_settings()).rows[0] -%}
  {%- set rounds = stats[3] | int -%}
  {%- set shards = vcmt._virtual_shards_of(cfg, stats[2] | int, false) if rounds > 0 else 1 -%}
  {%- if shards > 1 -%}{%- do ran.extend(vcmt._create_fanout(cfg, objs, data, shards)) -%}{%- endif -%}
  {%- for r in range(1, rounds + 1) -%}
    {%- if r % 50 == 0 -%}
      {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': round ' ~ r ~ ' of ' ~ rounds, info=true) }}
    {%- endif -%}
    {%- set sql = vcmt._round_insert_sql(cfg, objs, data, r, vcmt._hash_shard(cfg, shards) if shards > 1 else none) -%}
    {#- Round 1 on virtual shards follows _create_fanout's check and renewal at once. -#}
    {%- if r > 1 or shards == 1 -%}{%- do vcmt._renew_lock(cfg, objs) -%}{%- endif -%}
    {%- call statement('vcmt_load') -%}{{ sql }}{%- endcall -%}
    {%- if r == 1 -%}
      {%- do ran.append(sql) -%}
      {%- if rounds > 1 -%}{%- do ran.append('-- rounds 2 to ' ~ rounds ~ ': the same INSERT with _vcmt_round = '
          ~ '2, ...') -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if shards > 1 -%}{%- do vcmt._drop_load_table(objs.fanout, shards) -%}{%- endif -%}
  {%- call statement('vcmt_batch_drop') -%}
    {{ vcmt._drop_sql(objs.batch, local=true) }}
  {%- endcall -%}
  {{ return({'events': stats[0] | int, 'deletes': stats[1] | int, 'fed': stats[2] | int,
             'rounds': rounds, 'watermark': stats[4], 'virtual_shards': shards, 'sql': ran}) }}
{% endmacro %}


{#- The head of a load's CREATE of its `m__batch`, which is named by the
    load's lock generation (objects.sql, _generation_object): no other load
    creates, reads or drops it. The CREATE still replaces a table of that
    name, and its SELECT is fenced, so a load taken over creates nothing. -#}
{% macro _replace_batch(objs) %}
  {%- if adapter.can_exchange(objs.target.schema, 'table') -%}
    {{ return('create or replace table ' ~ objs.batch) }}
  {%- endif -%}
  {%- call statement('vcmt_batch_replace') -%}{{ vcmt._drop_sql(objs.batch, local=true) }}{%- endcall -%}
  {{ return('create table ' ~ objs.batch) }}
{% endmacro %}


{#- `m__batch`, on the dbt node only: the batch's events, numbered per key in
    apply order (all in round 0 when they will be folded). Exact duplicates
    (same key, version and sign) are one event: one of them is kept. -#}
{% macro _batch_create_sql(cfg, objs, data, events_sql, folds, create=none) %}
  {%- set create = create or 'create table ' ~ objs.batch -%}
  {%- set keys = vcmt._column_list(cfg.key_columns) -%}
  {%- set v = vcmt._quote(cfg.version) -%}
  {%- set wm = 'max(' ~ vcmt._quote(cfg.watermark) ~ ')' if cfg.watermark else 'toUInt8(0)' -%}
  {%- set row = 'tuple(' ~ (vcmt._column_list(data) if data else '0') ~ ')' -%}
  {%- set ranked = '0' if folds is not none else 'row_number() over (partition by ' ~ keys ~ ' order by ' ~ v
      ~ ' asc, _vcmt_sign desc)' -%}
  {{ create }} engine = MergeTree order by _vcmt_round {{ vcmt._load_table_comment() }} as
  select {{ keys }}{% for c in data %}, _vcmt_row.{{ loop.index }} as {{ vcmt._quote(c) }}{% endfor %},
    {{ v }}, _vcmt_sign,
    _vcmt_n, _vcmt_wm, toUInt64(0) as _vcmt_folded, toUInt64({{ ranked }}) as _vcmt_round
  from (
    select {{ keys }}, {{ v }}, _vcmt_sign, any({{ row }}) as _vcmt_row, count() as _vcmt_n, {{ wm }} as _vcmt_wm
    from ({{ events_sql }})
    group by {{ keys }}, {{ v }}, _vcmt_sign
  )
  where {{ vcmt._fenced(objs.target) }}
  {{ vcmt._read_settings(holder_of=objs.target) }}
{% endmacro %}


{#- Round `r`'s INSERT: every key's r-th event, from `m__batch`, into the
    stage; or, with `shard_of` (virtual shards: the shard of each event),
    into the load's fan-out, whose views send each shard's events on to the
    stage on their own thread. -#}
{% macro _round_insert_sql(cfg, objs, data, r, shard_of=none) %}
  {%- set events = cfg.key_columns + data + [cfg.version] -%}
  {%- if shard_of -%}
  insert into {{ objs.fanout }} ({{ vcmt._column_list(events) }}, _vcmt_sign, _vcmt_shard)
  {%- else -%}
  insert into {{ vcmt._all_shards(objs, 'stage') }} ({{ vcmt._column_list(events + [cfg.sign]) }})
  {%- endif %}
  select {{ vcmt._column_list(events) }}, _vcmt_sign{% if shard_of %}, {{ shard_of }}{% endif %}
  from {{ objs.batch }}
  where _vcmt_round = {{ r }} and {{ vcmt._fenced(objs.target) }}
  {{ vcmt._stage_insert_settings(cfg, fanout=shard_of is not none, holder_of=objs.target) }}
{% endmacro %}


{#- column -> fold aggregate for every loaded data column, or none when the
    batch must go event by event: the model's events do not fold (`cfg.folds`)
    or a policy has no fold aggregate (a custom `{old}/{new}` expression). -#}
{% macro _fold_aggregates(cfg, columns, data) %}
  {%- if not cfg.folds -%}{{ return(none) }}{%- endif -%}
  {%- set folds = {} -%}
  {%- for c in columns if c.name in data -%}
    {%- set agg = vcmt._fold_aggregate(cfg.merge.get(c.name, 'replace'), vcmt._quote(c.name), c.data_type,
        vcmt._quote(cfg.version)) -%}
    {%- if agg is none -%}{{ return(none) }}{%- endif -%}
    {%- do folds.update({c.name: agg}) -%}
  {%- endfor -%}
  {{ return(folds) }}
{% endmacro %}


{#- Add to `m__batch` (whose events sit in round 0) at most two rows per key:
    its last delete (round 1), then its upserts newer than that delete folded
    into one (round 1 without a delete, else 2). Under versioned deletes that
    is exact: a delete removes whatever the earlier events of the batch left
    (it is not older than any of them) and records its version, so those
    events change nothing that lasts. Events the transform would skip are
    dropped first: upserts not newer than the key's state (its live row's
    version, or its tombstone's), deletes older than it; the state is looked
    up once, for the batch's keys only. The upserts left after the last delete
    are then each accepted in turn, which is what makes their fold exact. -#}
{% macro _fold_batch(cfg, objs, columns, data, folds) %}
  {%- call statement('vcmt_batch_fold') -%}{{ vcmt._fold_batch_sql(cfg, objs, columns, data, folds) }}{%- endcall -%}
{% endmacro %}

{#- On a sharded model the state is read from every shard, and the batch's
    keys (in `m__batch`, on this node only) are sent along with GLOBAL IN. -#}
{% macro _fold_batch_sql(cfg, objs, columns, data, folds) %}
  {%- set q = vcmt._quote -%}
  {%- set in_ = 'global in' if vcmt._sharded(objs) else 'in' -%}
  {%- set keys = vcmt._column_list(cfg.key_columns) -%}
  {%- set key_tuple = vcmt._key_tuple(cfg.key_columns) -%}
  {%- set v = q(cfg.version) -%}
  {%- set events = ' from ' ~ objs.batch ~ ' where _vcmt_round = 0' -%}
  {%- set lookup = vcmt._lookup_key(cfg, columns) -%}
    insert into {{ objs.batch }}
      ({{ keys }}{% for c in data %}, {{ q(c) }}{% endfor %}, {{ v }}, _vcmt_sign, _vcmt_folded, _vcmt_round)
    select {{ keys }}{% for c in data %}, _vcmt_f{{ loop.index0 }}{% endfor %}, _vcmt_fv,
      if(_vcmt_after, toInt8(1), toInt8(-1)), _vcmt_folded,
      row_number() over (partition by {{ keys }} order by _vcmt_after asc)
    from (
      {#- Internal aliases: an alias named like a column would be read in its place. #}
      select {{ keys }}, _vcmt_after,
        {%- for c in data %}
        {{ folds[c] }} as _vcmt_f{{ loop.index0 }},
        {%- endfor %}
        max({{ v }}) as _vcmt_fv, count() - 1 as _vcmt_folded
      from (
        select {{ keys }}{% for c in data %}, {{ q(c) }}{% endfor %}, {{ v }},
          countIf(_vcmt_sign < 0) over (partition by {{ keys }}) = 0
            or {{ v }} > maxIf({{ v }}, _vcmt_sign < 0) over (partition by {{ keys }}) as _vcmt_after
        from {{ objs.batch }} as _vcmt_e
        left join (
          select {{ keys }}, {{ v }} as _vcmt_lv, toUInt8(1) as _vcmt_found
          from {{ vcmt._all_shards(objs, 'target') }} final
          prewhere {{ lookup.left }} {{ in_ }} (select {{ lookup.select }}{{ events }})
          where {{ q(cfg.sign) }} = 1
        ) as _vcmt_old using ({{ keys }})
        left join (
          select {{ keys }}, max({{ v }}) as _vcmt_tv, toUInt8(1) as _vcmt_found
          from {{ vcmt._all_shards(objs, 'tombstones') }}
          where {{ key_tuple }} {{ in_ }} (select {{ keys }}{{ events }})
          group by {{ keys }}
        ) as _vcmt_tomb using ({{ keys }})
        where _vcmt_e._vcmt_round = 0 and {{ vcmt._fenced(objs.target) }}
          and (_vcmt_old._vcmt_found = 0 or {{ v }} > _vcmt_old._vcmt_lv
               or (_vcmt_sign < 0 and {{ v }} = _vcmt_old._vcmt_lv))
          and (_vcmt_tomb._vcmt_found = 0 or {{ v }} > _vcmt_tomb._vcmt_tv
               or (_vcmt_sign < 0 and {{ v }} = _vcmt_tomb._vcmt_tv))
      )
      group by {{ keys }}, _vcmt_after
    )
    {{ vcmt._read_settings(holder_of=objs.target) }}
{% endmacro %}
