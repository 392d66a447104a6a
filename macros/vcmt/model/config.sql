{#- Read and validate the vcmt_upsert config once, before any DDL: every
    option of model/options.sql, checked and normalised, in a plain dict so
    every later step works from the same facts. -#}
{% macro _read_config(node_config=none) %}
  {#- In a materialization the model's `config`; in an operation a node's config dict. -#}
  {%- set source = node_config if node_config is not none else config -%}
  {%- set name = 'vcmt_upsert' -%}
  {%- if node_config is none -%}
    {%- do vcmt._check_config_keys(config.model.config, name) -%}
  {%- endif -%}
  {%- set unrendered = config.model.unrendered_config if node_config is none else {} -%}
  {%- set cfg = vcmt._read_options(source, name, vcmt._options(), unrendered, enforce_required=true) -%}
  {#- Whether one key's events of a batch may be folded before they are
      applied (docs/design.md#hot-keys): not with unconditional deletes (a
      delete of version 0 still removes a row that a later event re-sends),
      nor with unsent columns (each event keeps what it did not send). -#}
  {%- set folds = cfg.delete_mode == 'versioned' and not cfg.unavailable_column -%}
  {#- `_run`: what the run keeps about itself beside its config, shared by every copy of `cfg` (lock.sql
      `_run_state`, columns.sql `_lookup_key`). -#}
  {%- do cfg.update({
      '_run': {},
      'sign_required': source.get('sign') is not none,
      'order_by_set': source.get('order_by') not in [none, '', []],
      'folds': folds,
      'foldable': vcmt._folds_to_last_event(folds, cfg.merge),
  }) -%}
  {{ return(cfg) }}
{% endmacro %}


{#- What a run keeps about itself beside its config (`cfg._run`, shared by
    every copy of `cfg`): when it last wrote a row of its lock (lock.sql
    `_renew_lock`), the engine's reading of its sorting key (columns.sql
    `_lookup_key`). -#}
{% macro _run_state(cfg) %}
  {%- if cfg.get('_run') is none -%}{%- do cfg.update({'_run': {}}) -%}{%- endif -%}
  {{ return(cfg._run) }}
{% endmacro %}


{#- `options` (of _options) read from `source` (a model's config, or a
    generic test's arguments over its model's config), in their order:
    unset means the option's default; a set value must be one of its
    `choices`, a non-blank string where it `expects` text, and pass its
    `read` macro; with `enforce_required`, a `required` option must be set.
    `who` starts every message. `unrendered`: the keys the model itself set
    (dbt fills some keys it does not). -#}
{% macro _read_options(source, who, options, unrendered={}, enforce_required=false) %}
  {%- set cfg = {} -%}
  {%- for opt in options -%}
    {%- set value = source.get(opt['name']) -%}
    {%- if value is none or (opt.get('blank_is_unset') and not value)
        or (opt.get('dbt_fills') is not none and value == opt['dbt_fills'] and opt['name'] not in unrendered) -%}
      {%- set value = opt.get('default') -%}
    {%- endif -%}
    {%- if opt.get('choices') and value not in opt['choices'] -%}
      {{ exceptions.raise_compiler_error(who ~ ": `" ~ opt['name'] ~ "` must be one of " ~ opt['choices'] ~ "; got `"
          ~ value ~ "`.") }}
    {%- endif -%}
    {%- if opt.get('expects') and value is not none and (value is not string or value | trim == '') -%}
      {{ exceptions.raise_compiler_error(who ~ ": `" ~ opt['name'] ~ "` must be " ~ opt['expects'] ~ "; got `" ~ value
          ~ "`.") }}
    {%- endif -%}
    {%- if opt.get('read') -%}
      {%- set value = vcmt[opt['read']](value, cfg, opt, who) -%}
    {%- endif -%}
    {%- if enforce_required and opt.get('required') and not value -%}
      {{ exceptions.raise_compiler_error(who ~ ": `" ~ opt['name'] ~ "` is required: " ~ opt['required']) }}
    {%- endif -%}
    {%- do cfg.update({opt.get('field', opt['name']): value}) -%}
  {%- endfor -%}
  {{ return(cfg) }}
{% endmacro %}


{#- The readers of options that need more than a default, a choice or a
    non-blank text (model/options.sql `read`), each called with (value, the
    config read so far, the option, who). -#}
{% macro _read_unique_key(value, cfg, opt, who) %}
  {{ return(vcmt._column_names(value, who, opt['name'])) }}
{% endmacro %}

{#- `version` or `sign`: a column name that is no key column, and sign is not the version. -#}
{% macro _read_identity_column(value, cfg, opt, who) %}
  {%- if value is not string or value | trim == '' -%}
    {{ exceptions.raise_compiler_error(who ~ ": `" ~ opt['name'] ~ "` must be a column name; got `" ~ value ~ "`.") }}
  {%- endif -%}
  {%- if value in cfg.key_columns -%}
    {{ exceptions.raise_compiler_error(who ~ ": `" ~ opt['name'] ~ "` column `" ~ value
        ~ "` cannot also be part of `unique_key`.") }}
  {%- endif -%}
  {%- if value == cfg.get('version') -%}
    {{ exceptions.raise_compiler_error(who ~ ": `version` and `sign` must be different columns; both are `"
        ~ value ~ "`.") }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}

{% macro _read_merge(value, cfg, opt, who) %}
  {%- if value is not mapping -%}
    {{ exceptions.raise_compiler_error(who ~ ": `merge` must be a dict of column -> policy, e.g. merge={'amount': "
        ~ "'sum'}; got `" ~ value ~ "`.") }}
  {%- endif -%}
  {%- for column, policy in value.items() -%}
    {%- do vcmt._validate_merge_policy(column, policy, cfg.key_columns, cfg.version, cfg.sign) -%}
  {%- endfor -%}
  {{ return(value) }}
{% endmacro %}

{% macro _read_projections(value, cfg, opt, who) %}
  {%- for p in value -%}{%- do vcmt._validate_projection(p, cfg.sign) -%}{%- endfor -%}
  {{ return(value) }}
{% endmacro %}

{#- Unset, the sorting key is the key columns; a string is one expression. -#}
{% macro _read_order_by(value, cfg, opt, who) %}
  {%- if not value -%}
    {%- set value = [] -%}
    {%- for k in cfg.key_columns -%}{%- do value.append(vcmt._quote(k)) -%}{%- endfor -%}
  {%- endif -%}
  {{ return([value] if value is string else value | list) }}
{% endmacro %}

{% macro _read_table_settings(value, cfg, opt, who) %}
  {%- if value is not mapping -%}
    {{ exceptions.raise_compiler_error(who ~ ": `settings` must be a dict of table settings; got `" ~ value ~ "`.") }}
  {%- endif -%}
  {%- do vcmt._refuse_ttl_only_drop_parts(value) -%}
  {{ return(value) }}
{% endmacro %}

{% macro _read_unavailable_column(value, cfg, opt, who) %}
  {%- if value is none -%}{{ return(none) }}{%- endif -%}
  {%- if value in cfg.key_columns or value in [cfg.version, cfg.sign] -%}
    {{ exceptions.raise_compiler_error(who ~ ": `unavailable_column` `" ~ value ~ "` cannot also be the key, "
        ~ "`version` or `sign` column.") }}
  {%- endif -%}
  {%- if value in cfg.merge -%}
    {{ exceptions.raise_compiler_error(who ~ ": `merge` cannot set a policy for `" ~ value
        ~ "`: it is the `unavailable_column`, which always holds the last applied event's list.") }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}


{#- `indexes`, as dbt-clickhouse spells it: a list of {'name': ..., 'definition':
    '<expression> TYPE <type> GRANULARITY <n>'}, created with the target. A
    skip index changes what a query reads, never what it returns. A bloom
    filter on the key lets the lookups skip the granules that hold no batch
    key, which the primary key cannot do when partitions interleave in the
    key's order (docs/design.md#measured-facts, fact 15). -#}
{% macro _validate_indexes(indexes, cfg=none, opt=none, who='vcmt_upsert') %}
  {%- set fix = " e.g. indexes=[{'name': 'key_bf', 'definition': 'id TYPE bloom_filter(0.0001) GRANULARITY 1'}]" -%}
  {%- if indexes is string or indexes is mapping or indexes is not iterable -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `indexes` must be a list of skip indexes," ~ fix ~ "; got `"
        ~ indexes ~ "`.") }}
  {%- endif -%}
  {%- set names = [] -%}
  {%- for index in indexes -%}
    {%- if index is not mapping or (index.keys() | list | sort) != ['definition', 'name'] or index.name is not string
        or index.definition is not string
           or not index.name or not index.definition | trim -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: each entry of `indexes` must be a dict with a `name` and a "
          ~ "`definition`," ~ fix ~ "; got `" ~ index ~ "`.") }}
    {%- endif -%}
    {%- if index.name in names -%}
      {{ exceptions.raise_compiler_error("vcmt_upsert: `indexes` names `" ~ index.name ~ "` twice.") }}
    {%- endif -%}
    {%- do names.append(index.name) -%}
  {%- endfor -%}
  {{ return(indexes | list) }}
{% endmacro %}


{#- A key's events fold to its last one (one INSERT, or on virtual shards one through a batch table) when
    they fold at all and every column's policy is `replace`. -#}
{% macro _folds_to_last_event(folds, merge) %}
  {%- for policy in merge.values() if policy != 'replace' -%}{{ return(false) }}{%- endfor -%}
  {{ return(folds) }}
{% endmacro %}


{#- The key, version and sign columns of `source` (a model's config, or a
    generic test's arguments over its model's config), with the defaults of
    version and sign, checked (the `identity` options); `who` starts every
    message. The key may come back empty: the caller says what is missing,
    and how to give it. -#}
{% macro _identity_columns(source, who) %}
  {%- set options = [] -%}
  {%- for opt in vcmt._options() if opt.get('identity') -%}{%- do options.append(opt) -%}{%- endfor -%}
  {{ return(vcmt._read_options(source, who, options)) }}
{% endmacro %}


{#- A column option (`unique_key`, a test's column list) as a list of names:
    one name or a list of names; [] when not set. Anything else (a blank
    name, a non-string) is refused, naming `who` and the option. -#}
{% macro _column_names(value, who, option) %}
  {%- if value is none or value == '' or value == [] -%}{{ return([]) }}{%- endif -%}
  {%- set names = [value] if value is string else value | list -%}
  {%- for n in names if n is not string or n | trim == '' -%}
    {{ exceptions.raise_compiler_error(who ~ ": `" ~ option ~ "` must be a column name or a list of column names; got `"
        ~ value ~ "`.") }}
  {%- endfor -%}
  {{ return(names) }}
{% endmacro %}


{#- `order_by` holds every `unique_key` column, as the engine reads the
    DDL's text (`formatted`: `select <order_by>` as the engine formats it,
    from the run's observation; a comment cannot hide or fake one). Called
    by the syntax check (check.sql), once the text parses. -#}
{% macro _check_sorting_key(cfg, formatted) %}
  {%- set order_cols = [] -%}
  {%- for item in vcmt._formatted_list_items(formatted) or [] -%}
    {%- do order_cols.append(vcmt._unquote(item | trim)) -%}
  {%- endfor -%}
  {%- for k in cfg.key_columns if k not in order_cols -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `order_by` must contain every `unique_key` column, "
        ~ "because rows of one key collapse only when they share the sorting key; `" ~ k ~ "` is missing from "
        ~ cfg.order_by ~ (" (as ClickHouse reads it: " ~ order_cols | join(', ') ~ ")" if order_cols else "") ~ ".") }}
  {%- endfor -%}
{% endmacro %}


{#- A table TTL may only move or recompress parts, never remove rows.

    A state row (+1) and the cancel row (-1) that retires it live in different
    parts: the cancel is written later. Collapsing is exact only while both
    rows exist or both are gone, and a TTL that removes rows removes them one
    part at a time:
    - `ttl_only_drop_parts = 1` drops a part once all its rows expired; a
      cancel written later shares its part with fresher rows, so the +1 is
      dropped and the -1 stays for good: GROUP BY with sign arithmetic no
      longer equals FINAL (shown on the engine in the tests);
    - a row TTL (`... DELETE`, the default action, with or without WHERE)
      deletes expired rows only in the parts a TTL merge picks, up to
      `merge_with_ttl_timeout` (4 hours by default) apart, so a pair is
      half-gone for that long;
    - `... GROUP BY` rolls rows up and sums away the sign pairing.
    `TO DISK`, `TO VOLUME` and `RECOMPRESS` keep every row and are allowed.
    To remove old data: send deletes (sign = -1) through the model, or drop a
    whole partition (`ALTER TABLE ... DROP PARTITION`: a cancel row always
    lands in its state row's partition, so pairs go together), or put the TTL
    on a downstream table. -#}
{% macro _refuse_ttl_only_drop_parts(settings) %}
  {%- set name = 'vcmt_upsert' -%}
  {%- set fix = vcmt._ttl_fix() -%}
  {%- set drop_parts = settings.get('ttl_only_drop_parts') -%}
  {%- if drop_parts is not none and drop_parts | string | lower not in ['0', 'false'] -%}
    {{ exceptions.raise_compiler_error(name ~ ": `settings` may not set `ttl_only_drop_parts`; got `" ~ drop_parts
        ~ "`. It drops a part once all its rows expired, while the cancel row (-1) of an expired state row (+1) "
        ~ "usually sits in a newer part with fresher rows and survives, so GROUP BY with sign arithmetic no longer "
        ~ "equals FINAL. " ~ fix) }}
  {%- endif -%}
{% endmacro %}


{% macro _ttl_fix() %}
  {{ return("To remove old data, send deletes (sign = -1) through the model, drop whole partitions with ALTER "
      ~ "TABLE ... DROP PARTITION (a cancel row always lands in its state row's partition), "
      ~ "or put the TTL on a downstream table.") }}
{% endmacro %}


{#- The TTL's elements, as the engine reads them (a commented-out `TO VOLUME`
    moves nothing), each a move or a recompression (above). Called by the
    syntax check (check.sql), once the text parses. -#}
{% macro _check_ttl_keeps_rows(ttl) %}
  {%- if ttl is none or ttl == '' or ttl == [] -%}{{ return(none) }}{%- endif -%}
  {%- set keeps_rows = modules.re.compile("(?is)^.*\\s(to\\s+(disk|volume)\\s+'[^']*'"
                                          ~ "|recompress\\s+codec\\s*\\(.*\\))\\s*$") -%}
  {%- set formatted = run_query("select formatQuerySingleLine(" ~ vcmt._sql_string('create table t (x Int8) '
      ~ 'engine = MergeTree order by tuple() ttl ' ~ vcmt._user_sql_list(ttl)) ~ ")").rows[0][0] -%}
  {%- for element in vcmt._split_top_level(formatted.split(' TTL ', 1)[1]) if not keeps_rows.match(element | trim) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `ttl` may only move or recompress parts (`... TO DISK 'name'`, "
        ~ "`... TO VOLUME 'name'`, `... RECOMPRESS CODEC(...)`); got `" ~ element | trim ~ "` (as ClickHouse reads "
        ~ "it), which removes or rolls up rows. A TTL removes rows part by part, so the state row (+1) and its cancel "
        ~ "row (-1), which live in different parts, expire at different times and GROUP BY with sign arithmetic no "
        ~ "longer equals FINAL. " ~ vcmt._ttl_fix()) }}
  {%- endfor -%}
{% endmacro %}


{#- The config keys vcmt_upsert reads: the names of model/options.sql. -#}
{% macro _vcmt_config_keys() %}
  {{ return(vcmt._options() | map(attribute='name') | list) }}
{% endmacro %}


{#- Config keys of dbt-clickhouse's models (its model config's fields and what its materializations
    read), which a vcmt_upsert model may set; a test compares them with the installed dbt-clickhouse. -#}
{% macro _clickhouse_config_keys() %}
  {{ return(['engine', 'force_on_cluster', 'order_by', 'partition_by', 'primary_key', 'sharding_key', 'ttl',
             'settings', 'query_settings', 'indexes', 'projections', 'incremental_predicates', 'inserts_only',
             'sql_security', 'definer', 'refreshable', 'repopulate_from_mvs_on_full_refresh',
             'mv_on_schema_change', 'catchup', 'sql_header']) }}
{% endmacro %}


{#- A key set on a vcmt_upsert model (in config(), its yml or dbt_project.yml) that neither vcmt nor dbt
    nor dbt-clickhouse reads is a typo: `delete_mod='unconditional'` would otherwise run with versioned
    deletes. Refused before any DDL, every such key in one message, each with the nearest known key.
    `node_config` is the model's config object: dbt keeps the keys it does not know itself in its `extra`,
    so dbt's own keys (whatever the dbt version) are never refused; they are the other keys it iterates
    over. -#}
{% macro _check_config_keys(node_config, who) %}
  {%- set extra = node_config.extra -%}
  {%- set vcmt_keys = vcmt._vcmt_config_keys() -%}
  {%- set known = vcmt_keys + vcmt._clickhouse_config_keys() -%}
  {%- set candidates = known + (node_config | reject('in', extra) | list) -%}
  {%- set unknown = [] -%}
  {%- for key in extra | sort if key not in known -%}
    {%- set best = namespace(key=none, distance=999) -%}
    {%- for candidate in candidates -%}
      {%- set d = vcmt._edit_distance(key | string | lower, candidate) -%}
      {%- if d < best.distance -%}{%- set best.key = candidate -%}{%- set best.distance = d -%}{%- endif -%}
    {%- endfor -%}
    {%- set near = best.distance <= [2, (key | string | length) // 3] | max -%}
    {%- do unknown.append({'key': key, 'hint': "did you mean `" ~ best.key ~ "`?" if near else ''}) -%}
  {%- endfor -%}
  {%- if unknown | length == 1 -%}
    {%- set named = "unknown config key `" ~ unknown[0].key ~ "`: " ~ (unknown[0].hint ~ " " if unknown[0].hint
        else '') -%}
  {%- elif unknown -%}
    {%- set listed = [] -%}
    {%- for u in unknown -%}
      {%- do listed.append("`" ~ u.key ~ "`" ~ (" (" ~ u.hint ~ ")" if u.hint else '')) -%}
    {%- endfor -%}
    {%- set named = "unknown config keys " ~ listed | join(', ') ~ ": " -%}
  {%- endif -%}
  {%- if unknown -%}
    {{ exceptions.raise_compiler_error(who ~ ": " ~ named ~ "vcmt_upsert reads " ~ vcmt_keys | join(', ')
        ~ ", besides dbt's and dbt-clickhouse's own keys. A key of your own belongs in `meta`.") }}
  {%- endif -%}
{% endmacro %}


{#- Levenshtein distance between two short strings. -#}
{% macro _edit_distance(a, b) %}
  {%- set row = namespace(prev=range(b | length + 1) | list) -%}
  {%- for i in range(1, a | length + 1) -%}
    {%- set cur = [i] -%}
    {%- for j in range(1, b | length + 1) -%}
      {%- do cur.append([row.prev[j] + 1, cur[j - 1] + 1, row.prev[j - 1] + (0 if a[i - 1] == b[j - 1]
          else 1)] | min) -%}
    {%- endfor -%}
    {%- set row.prev = cur -%}
  {%- endfor -%}
  {{ return(row.prev[b | length]) }}
{% endmacro %}
