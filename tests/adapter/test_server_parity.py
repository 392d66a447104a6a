"""`type: chdb` behaves as a ClickHouse server would, where the embedded engine alone would not.

Regression tests for issue 13: the schema cache across chDB paths, the
database after a dropped schema, multi-statement SQL, grants, query_log.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import yaml
from dbt.adapters.chdb.client import ChdbOpenError, engine_options
from dbt.adapters.chdb.credentials import ChdbCredentials
from dbt.adapters.chdb.statements import multi_statement_message, second_statement_at

# Runs dbt several times in ONE Python process, on two chDB paths with the same schema.
TWO_PATHS_SCRIPT = textwrap.dedent(
    """
    import shutil, sys, pathlib, yaml
    from dbt.cli.main import dbtRunner

    root = pathlib.Path(sys.argv[1])

    def run(name, path):
        proj = root / name
        (proj / "models").mkdir(parents=True, exist_ok=True)
        (proj / "dbt_project.yml").write_text(yaml.safe_dump(
            {"name": "p", "version": "1.0", "config-version": 2, "profile": "p"}))
        target = {"type": "chdb", "path": path, "schema": "same_schema", "threads": 1}
        (proj / "profiles.yml").write_text(yaml.safe_dump({"p": {"target": "t", "outputs": {"t": target}}}))
        (proj / "models" / "m.sql").write_text(
            "{{ config(materialized='table', order_by='id') }} select 1 as id")
        res = dbtRunner().invoke(["run", "--project-dir", str(proj), "--profiles-dir", str(proj),
                                  "--log-level", "none"])
        print(f"{name}: {'ok' if res.success else 'FAILED ' + repr(res.exception)}", flush=True)

    run("first", str(root / "engine_a"))
    run("other_path", str(root / "engine_b"))
    shutil.rmtree(root / "engine_a")
    run("removed_dir", str(root / "engine_a"))
    """
)


def test_same_schema_on_two_paths_in_one_process(tmp_path):
    """Issue 13 bug 1: a second path (or a removed data directory) with a known schema name still gets CREATE DATABASE."""
    script = tmp_path / "two_paths.py"
    script.write_text(TWO_PATHS_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env.update(DBT_SEND_ANONYMOUS_USAGE_STATS="false", DO_NOT_TRACK="1")
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    lines = [line for line in proc.stdout.splitlines() if ": " in line]
    assert lines == ["first: ok", "other_path: ok", "removed_dir: ok"], proc.stdout + proc.stderr


DROP_THEN_UNQUALIFIED = """
{% macro drop_then_unqualified() %}
  {% do adapter.drop_schema(api.Relation.create(schema=target.schema)) %}
  {% do run_query("create table vcmt_after_drop (x UInt8) engine = Memory") %}
  {% set db = run_query("select currentDatabase()").columns[0].values()[0] %}
  {% do run_query("drop table vcmt_after_drop") %}
  {{ log("database after drop: " ~ db, info=True) }}
{% endmacro %}
"""


def test_unqualified_query_after_drop_schema_runs_in_default(project):
    """Issue 13 bug 2: after adapter.drop_schema the connection is not left on the dropped database."""
    project.write("macros/drop_then_unqualified.sql", DROP_THEN_UNQUALIFIED)
    run = project.dbt("run-operation", "drop_then_unqualified")
    assert "database after drop: default" in run.log
    assert project.scalar("select count() from system.tables where name = 'vcmt_after_drop'") == 0


# --- one statement per query -------------------------------------------------

REFUSED = [
    ("set max_threads = 1; create table t (x Int8) engine = Memory", 19),
    ("select 1;\nselect 2", 8),
    ("select ';' as s; select 2", 15),
    ("select 1 /* ; */; -- trailing\n select 2", 16),
    ("insert into t values (1); select 1", 24),
]
ACCEPTED = [
    "select 1",
    "select 1;",
    "select 1 ;; -- done\n  /* really */ ",
    "select 'a;b', \"c;d\", `e;f`, 'it''s; ok', 'esc\\'; still'",
    "select 1 -- ; select 2",
    "select 1 # ; select 2",
    "select 1 /* outer /* nested ; */ still ; */",
    "select $$ ; select 2 $$, $tag$ ; $tag$",
    "insert into t format CSV\n1;2\n3;4",
]


@pytest.mark.parametrize(("sql", "at"), REFUSED)
def test_second_statement_is_found(sql, at):
    """A `;` followed by another statement is where a server stops parsing."""
    assert second_statement_at(sql) == at


@pytest.mark.parametrize("sql", ACCEPTED)
def test_single_statement_is_accepted(sql):
    """Semicolons in literals, identifiers, comments, heredocs, INSERT data, or at the end are not separators."""
    assert second_statement_at(sql) is None


def test_message_matches_server_format():
    """The message is the server's: code 62, 'Multi-statements are not allowed', the position and the rest."""
    sql = "set max_threads=1;\ncreate table t (x Int8)"
    message = multi_statement_message(sql, second_statement_at(sql))
    assert message.startswith(
        "Code: 62. DB::Exception: Syntax error (Multi-statements are not allowed): "
        "failed at position 18 (end of query) (line 1, col 18): ;\ncreate table t (x Int8). (SYNTAX_ERROR)"
    )


def test_multi_statement_sql_header_is_refused(project):
    """A `set ...;` sql_header before CREATE fails as on a server, and nothing is created."""
    project.model(
        "with_header",
        """
        {{ config(materialized='table', order_by='id', sql_header='set max_threads = 1;') }}
        select 1 as id
        """,
    )
    run = project.dbt("run", expect_pass=False)
    assert "Syntax error (Multi-statements are not allowed)" in run.log
    assert project.scalar(f"select count() from system.tables where database = '{project.schema}'") == 0


def test_single_statements_with_semicolons_still_run(project):
    """Statements with `;` in literals and a trailing `;` run, as they do on a server."""
    project.write(
        "macros/semis.sql",
        """
        {% macro semis() %}
          {% set v = run_query("select 'a;b' as s -- ; not a statement\\n;").columns[0].values()[0] %}
          {{ log("value: " ~ v, info=True) }}
        {% endmacro %}
        """,
    )
    assert "value: a;b" in project.dbt("run-operation", "semis").log


# --- grants ------------------------------------------------------------------


def test_grants_config_is_skipped_with_a_warning(project):
    """A model with `grants` builds; the log says the grants were not applied and why."""
    project.model(
        "granted",
        """
        {{ config(materialized='table', order_by='id', grants={'select': ['reporter', 'analyst']}) }}
        select 1 as id
        """,
    )
    run = project.dbt("run")
    assert f"chdb adapter: grants not applied to `{project.schema}`.`granted` (select to reporter, analyst)" in run.log
    assert "type: chdb has no users or roles" in run.log
    assert project.query("select id from granted") == [(1,)]


def test_explicit_grant_explains_the_engine(project):
    """A GRANT in a hook still fails, with the engine's error and what type: chdb does not support."""
    project.model(
        "hooked",
        """
        {{ config(materialized='table', order_by='id', post_hook='grant select on {{ this }} to reporter') }}
        select 1 as id
        """,
    )
    run = project.dbt("run", expect_pass=False)
    assert "(UNKNOWN_ROLE)" in run.log
    assert "type: chdb runs ClickHouse in-process without users, roles or access control" in run.log


def test_a_grant_a_server_would_refuse_fails_on_chdb_too(project):
    """0.2 skipped any `grants` on chdb, even a privilege a server refuses with a syntax error."""
    project.model(
        "badgrant",
        """
        {{ config(materialized='table', order_by='id', grants={'select': ['reporter'], 'fake_privilege': 'analyst'}) }}
        select 1 as id
        """,
    )
    run = project.dbt("run", "--select", "badgrant", expect_pass=False)
    assert f"grants: `fake_privilege` on `{project.schema}`.`badgrant` is not a valid grant" in run.log
    assert "grants not applied" not in run.log


# --- query_log ---------------------------------------------------------------

# The singular test fails (returns a row) when the model's CREATE is missing from the log.
QUERY_LOG_TEST = """
select n from (
  select count() as n from system.query_log
  where type = 'QueryFinish' and query_kind = 'Create' and query like '%vcmt_query_log_marker%'
) where n = 0
"""


def _dbt_cli(root, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env.update(DBT_USE_COLORS="false", DBT_SEND_ANONYMOUS_USAGE_STATS="false", DO_NOT_TRACK="1")
    dbt = os.path.join(os.path.dirname(sys.executable), "dbt")
    proc = subprocess.run(
        [dbt, *args, "--project-dir", str(root), "--profiles-dir", str(root)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_query_log_profile_key_enables_system_query_log(tmp_path):
    """`query_log: true` starts the engine with system.query_log; the model's CREATE is in it after a flush."""
    root = tmp_path / "proj"
    (root / "models").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "dbt_project.yml").write_text(
        yaml.safe_dump({"name": "ql", "version": "1.0", "config-version": 2, "profile": "ql"})
    )
    target = {"type": "chdb", "path": str(tmp_path / "engine"), "schema": "ql", "threads": 1, "query_log": True}
    (root / "profiles.yml").write_text(yaml.safe_dump({"ql": {"target": "t", "outputs": {"t": target}}}))
    (root / "models" / "m.sql").write_text(
        "{{ config(materialized='table', order_by='id', post_hook='system flush logs') }}"
        " select 1 as id, 'vcmt_query_log_marker' as tag"
    )
    (root / "tests" / "create_is_logged.sql").write_text(QUERY_LOG_TEST)

    rc, out = _dbt_cli(root, "build")
    assert rc == 0, out
    assert "PASS=2 WARN=0 ERROR=0" in out, out


def test_query_log_and_own_config_file_are_refused_together():
    """`query_log: true` with chdb_options `config-file` is a clear profile error, not a silent override."""
    both = ChdbCredentials(schema="s", query_log=True, chdb_options={"config-file": "mine.xml"})
    with pytest.raises(ChdbOpenError, match="add a <query_log> section"):
        engine_options(both)
    only_log = engine_options(ChdbCredentials(schema="s", query_log=True))
    assert open(only_log["config-file"]).read().count("<query_log>") == 1
    assert engine_options(ChdbCredentials(schema="s", chdb_options={"log-level": "error"})) == {"log-level": "error"}


# --- settings ------------------------------------------------------------------

SETTINGS_MACRO = """
{% macro show_settings() %}
  {% for name in ['implicit_select', 'allow_introspection_functions', 'cast_string_to_dynamic_use_inference'] %}
    {% set row = run_query("select value, default from system.settings where name = '" ~ name ~ "'").rows[0] %}
    {{ log("setting " ~ name ~ " = " ~ row[0] ~ " (server default " ~ row[1] ~ ")", info=True) }}
  {% endfor %}
{% endmacro %}

{% macro implicit_select() %}
  {% do run_query("1 + 1") %}
{% endmacro %}
"""


def test_local_only_setting_defaults_are_the_servers(project):
    """Settings chDB changes from the engine default are back at the server default on the adapter's session."""
    project.write("macros/settings.sql", SETTINGS_MACRO)
    log = project.dbt("run-operation", "show_settings").log
    for name in ("implicit_select", "allow_introspection_functions", "cast_string_to_dynamic_use_inference"):
        assert f"setting {name} = 0 (server default 0)" in log, log


def test_query_without_select_is_refused_as_on_a_server(project):
    """`1 + 1` (clickhouse-local's implicit SELECT) is a syntax error on a server, and on type: chdb."""
    project.write("macros/settings.sql", SETTINGS_MACRO)
    run = project.dbt("run-operation", "implicit_select", expect_pass=False)
    assert "SYNTAX_ERROR" in run.log or "Syntax error" in run.log, run.log[-3000:]


# Two dbt commands in ONE Python process: a Memory table and system.query_log survive from one to the next.
KEEP_ENGINE_SCRIPT = textwrap.dedent(
    """
    import sys, pathlib, yaml
    from dbt.cli.main import dbtRunner

    root = pathlib.Path(sys.argv[1])
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "dbt_project.yml").write_text(yaml.safe_dump({"name": "k", "version": "1.0", "config-version": 2,
                                                          "profile": "k"}))
    target = {"type": "chdb", "path": str(root / "engine"), "schema": "k", "threads": 1, "query_log": True}
    (root / "profiles.yml").write_text(yaml.safe_dump({"k": {"target": "t", "outputs": {"t": target}}}))
    (root / "models" / "mem.sql").write_text(
        "{{ config(materialized='table', engine='Memory') }} select 1 as id union all select 2")
    (root / "macros" / "probe.sql").write_text(
        "{% macro probe() %}{% do run_query('system flush logs') %}"
        "{% set rows = run_query('select count() from k.mem').columns[0].values()[0] %}"
        "{% set logged = run_query(\\"select count() from system.query_log where type = 'QueryFinish' "
        "and query_kind = 'Create' and query like '%mem%'\\").columns[0].values()[0] %}"
        "{{ log('probe: ' ~ rows ~ ' rows, ' ~ logged ~ ' logged', info=True) }}{% endmacro %}")
    args = ["--project-dir", str(root), "--profiles-dir", str(root)]
    print("run:", dbtRunner().invoke(["run", *args]).success, flush=True)
    print("probe:", dbtRunner().invoke(["run-operation", "probe", *args]).success, flush=True)
    """
)


def test_the_engine_lives_as_long_as_the_process(tmp_path):
    """0.2 restarted the engine whenever dbt closed its last connection: the next command in the same process
    found the Memory table empty and system.query_log without the earlier queries."""
    script = tmp_path / "keep_engine.py"
    script.write_text(KEEP_ENGINE_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env.update(DBT_SEND_ANONYMOUS_USAGE_STATS="false", DO_NOT_TRACK="1", DBT_USE_COLORS="false")
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "proj")], env=env, capture_output=True, text=True, timeout=300
    )
    assert "run: True" in proc.stdout and "probe: True" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "probe: 2 rows, 1 logged" in proc.stdout, proc.stdout[-3000:]
