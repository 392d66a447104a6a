{#- The config options of a vcmt_upsert model, in the order they are read:
    the one list that _read_config (config.sql), the unknown-key check, the
    syntax check (check.sql) and the stored-layout check (stored_layout.sql)
    loop over. tests/test_layout.py keeps the README's "Configuration
    reference" table, and its list of options that need --full-refresh,
    equal to it. Each option is a dict:
    - name: the config key;
    - field: the key of the read config when it is not `name`;
    - default: the value when the model does not set it (none: unset);
    - blank_is_unset: any empty or false value ('', [], {}, 0, false) also
      means the default;
    - dbt_fills: the value dbt gives the key when the model does not set
      it, which therefore also means the default;
    - shown: the default as the README's table shows it;
    - required: unset, the model fails with this fix (a generic test reading
      the option says what is missing itself);
    - choices: the only values allowed;
    - expects: what a text option must be, for its message (it must be a
      non-blank string);
    - read: the macro that checks a set value and returns it normalised,
      called as (value, the config read so far, the option, who);
    - identity: one of the key, version and sign columns, which the generic
      tests read too (_identity_columns);
    - clause: the CREATE TABLE clause that stores it;
    - probe: the statement the syntax check has the engine parse, `{}`
      standing for its text, and `fix` what its message tells the user;
    - full_refresh: an existing table keeps it as it was created, so a change
      fails the run before any DDL and needs --full-refresh.
    Keep this macro a literal: the tests render it without dbt. -#}
{% macro _options() %}
  {{ return([
      {'name': 'unique_key', 'field': 'key_columns', 'shown': '*required*', 'read': '_read_unique_key',
       'identity': true, 'full_refresh': true,
       'required': "set it to the column (or list of columns) that identifies a row, e.g. unique_key=['tenant_id', "
           ~ "'order_id']."},
      {'name': 'version', 'default': '_version', 'shown': '`_version`', 'read': '_read_identity_column',
       'identity': true},
      {'name': 'sign', 'default': 'sign', 'shown': '`sign`', 'read': '_read_identity_column', 'identity': true},
      {'name': 'merge', 'default': {}, 'blank_is_unset': true, 'shown': '`{}`', 'read': '_read_merge'},
      {'name': 'delete_mode', 'default': 'versioned', 'shown': '`versioned`',
       'choices': ['versioned', 'unconditional']},
      {'name': 'projections', 'default': [], 'blank_is_unset': true, 'shown': '`[]`', 'read': '_read_projections'},
      {'name': 'partition_by', 'shown': 'none', 'clause': 'PARTITION BY', 'full_refresh': true,
       'probe': 'create table t (x Int8) engine = MergeTree partition by ({}) order by tuple()',
       'fix': 'fix `partition_by`'},
      {'name': 'order_by', 'shown': '`partition_by`, `unique_key`', 'read': '_read_order_by', 'clause': 'ORDER BY',
       'full_refresh': true, 'probe': 'create table t (x Int8) engine = MergeTree order by ({})',
       'fix': 'fix `order_by`'},
      {'name': 'primary_key', 'shown': 'none', 'clause': 'PRIMARY KEY', 'full_refresh': true,
       'probe': 'create table t (x Int8) engine = MergeTree order by tuple() primary key ({})',
       'fix': 'fix `primary_key`'},
      {'name': 'indexes', 'default': [], 'shown': '`[]`', 'read': '_validate_indexes', 'full_refresh': true},
      {'name': 'settings', 'default': {}, 'blank_is_unset': true, 'shown': '`{}`', 'read': '_read_table_settings',
       'full_refresh': true},
      {'name': 'ttl', 'shown': 'none', 'clause': 'TTL', 'full_refresh': true,
       'probe': 'create table t (x Int8) engine = MergeTree order by tuple() ttl {}', 'fix': 'fix `ttl`'},
      {'name': 'on_schema_change', 'default': 'fail', 'blank_is_unset': true, 'dbt_fills': 'ignore',
       'shown': '`fail`', 'choices': ['fail', 'append_new_columns', 'sync_all_columns', 'ignore']},
      {'name': 'watermark', 'shown': 'none', 'expects': "the name of an input column (e.g. '_batch_id')"},
      {'name': 'truncate_when', 'shown': 'none',
       'expects': "a SQL condition over the SELECT's columns that marks truncate events (e.g. `_kind = 'truncate'`)",
       'probe': 'select ({})', 'fix': "fix the condition: any SQL over the SELECT's columns, e.g. `_op = 't'`"},
      {'name': 'unavailable_column', 'shown': 'none', 'read': '_read_unavailable_column',
       'expects': "the name of an Array(String) column of the SELECT listing the columns an event did not send (e.g. "
           ~ "'_unavailable')"},
      {'name': 'sharding_key', 'shown': 'none', 'full_refresh': true,
       'expects': "a SQL expression over the `unique_key` columns that gives each key its shard, e.g. "
           ~ "'cityHash64(id)'",
       'probe': 'select ({})', 'fix': "write it over the key only, e.g. sharding_key='cityHash64({keys})'"},
      {'name': 'insert_settings', 'default': {}, 'blank_is_unset': true, 'shown': '`{}`',
       'read': '_validate_insert_settings'},
      {'name': 'lock_timeout', 'default': 600, 'shown': '600', 'read': '_validate_lock_timeout'},
      {'name': 'virtual_shards', 'default': 'auto', 'shown': "`'auto'`", 'read': '_validate_virtual_shards'},
      {'name': 'changes', 'default': false, 'shown': '`false`', 'read': '_read_changes'},
  ]) }}
{% endmacro %}
