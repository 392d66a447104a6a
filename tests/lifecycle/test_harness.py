"""The macro harness itself (tests/lifecycle/harness.py): it reaches every macro of the package as a run does,
refuses every statement, and answers as the captured runs' adapters did."""

from __future__ import annotations

import re

import pytest

from tests.lifecycle import capture
from tests.lifecycle.harness import PACKAGE_ROOT, AdapterFacts, ImpureCall, MacroHarness

_MACRO = re.compile(r"{%-?\s*macro\s+(\w+)\s*\(")


@pytest.fixture(scope="module")
def harness() -> MacroHarness:
    return MacroHarness(AdapterFacts())


def test_every_macro_of_the_package_is_reachable_by_its_name(harness):
    """Each `{% macro x(...) %}` under macros/ is `vcmt.x` in the harness, and no other name is."""
    declared = [
        m for path in sorted((PACKAGE_ROOT / "macros").rglob("*.sql")) for m in _MACRO.findall(path.read_text())
    ]
    assert sorted(harness.macro_names) == sorted(declared)
    assert len(declared) > 300


def test_a_macro_that_sends_a_statement_fails_the_test(harness):
    """`run_query` and `statement` raise ImpureCall, naming what was called: a macro rendered to its end sent
    nothing."""
    target = harness.relation("s", "m")
    with pytest.raises(ImpureCall, match=r"`run_query\(\"select name, type from system.columns where database = 's'"):
        harness.call("_catalog_columns", target)
    with pytest.raises(ImpureCall, match=r"`statement\('vcmt_drop_load_table'"):
        harness.call("_drop_load_table", target)


def test_dbt_clickhouse_macros_render_with_the_profiles_cluster():
    """dbt-clickhouse's own `on_cluster_clause`, as the package's DDL calls it: ON CLUSTER and the profile's cluster
    (in dbt-clickhouse's double quotes) for a relation on the cluster, nothing elsewhere."""
    harness = MacroHarness(AdapterFacts(cluster="c1"))
    on = harness.call("_drop_sql", harness.relation("s", "m", on_cluster=True))
    off = harness.call("_drop_sql", harness.relation("s", "m", on_cluster=False))
    assert " ".join(on.split()) == 'drop table if exists `s`.`m` ON CLUSTER "c1" sync'
    assert " ".join(off.split()) == "drop table if exists `s`.`m` sync"


@pytest.mark.parametrize("name", capture.names())
def test_the_captured_objects_are_the_ones_vcmt_objects_names(name):
    """For each capture, `vcmt.objects` in the harness (its adapter answering as the run's did: local suffix,
    cluster, dispatch) names the objects the run's observation named, as the relations the run rendered."""
    c = capture.load(name)
    harness = c.harness()
    schema, model = c.observation["schema"], c.observation["model"]
    target = harness.relation(schema, model, on_cluster=c.context["cluster"] is not None)
    named = harness.call("objects", target, c.cfg["sharding_key"])
    built = c.objects(harness)
    assert {role: str(rel) for role, rel in named.items()} == {role: str(rel) for role, rel in built.items()}
    # Each relation renders as the run's statements name it.
    sent = "\n".join(c.statements)
    assert str(built["target"]) in sent and str(built["stage"]) in sent


def test_what_a_context_keeps_is_keyed_by_every_input_and_never_shared():
    """vcmt.objects and _settings_clause answer once per context (objects.sql, `_memo`): a second call with other
    inputs (schema, name, cluster, sharding key, a setting's value or type) gets its own answer, and a caller that
    changes what it got (the lock swaps in its generation's load tables) changes no other caller's."""
    harness = MacroHarness(AdapterFacts(cluster="c1"))
    a = harness.relation("s", "m")
    first = harness.call("objects", a)
    first.update({"batch": harness.relation("s", "m__batch_7")})
    kept = harness.call("objects", a)
    assert kept["batch"].identifier == "m__batch"
    kept.update({"batch": harness.relation("s", "m__batch_8")})
    assert harness.call("objects", a)["batch"].identifier == "m__batch"
    harness.call("_roles_of", "load_table").append({"role": "x"})
    assert [o["role"] for o in harness.call("_roles_of", "load_table")] == ["batch", "fanout"]
    assert harness.call("objects", harness.relation("s", "n"))["target"].identifier == "n"
    assert harness.call("objects", harness.relation("t", "m"))["target"].schema == "t"
    assert harness.call("objects", harness.relation("s", "m", on_cluster=True))["target"].can_on_cluster
    assert not harness.call("objects", a)["target"].can_on_cluster
    sharded = harness.call("objects", a, "id")
    assert "distributed" in sharded and "distributed" not in harness.call("objects", a)
    assert harness.call("_settings_clause", {"final": 0}) == "settings final = 0"
    assert harness.call("_settings_clause", {"final": "0"}) == "settings final = '0'"
    assert harness.call("_settings_clause", {"final": 1}) == "settings final = 1"
    assert harness.call("_settings_clause", {}) == ""
    # Kept in the context (else nothing would be kept); an undeclared role is not a dict's attribute.
    assert set(harness.context["_vcmt_memo"]["settings"].values()) >= {"settings final = 0", "settings final = '0'"}
    assert harness.call("_object", "items") is None or not harness.call("_object", "items")


HOSTILE_TEXTS = ["plain", "it's", "back\\slash", "tick`", "\\'", "", "été", "new\nline", 7, None]


def test_auto_virtual_shards_take_two_on_a_fold_from_the_threshold_and_else_one(harness):
    """virtual_shards.sql `_virtual_shards_of`: a number is kept whatever the load; `'auto'` gives 2 to a folded
    load from 100,000 events fed on, at most its `max_threads`, and 1 below, to a load in rounds, to a first run or
    full refresh, and on a sharded model (not measured there).
    `tests/materialization/test_virtual_shards.py` loads both sides of the threshold on an engine."""
    auto = harness.call("_auto_virtual_shards")
    assert auto == {"shards": 2, "from_events": 100_000}
    plain, sharded = {"virtual_shards": "auto", "sharding_key": None}, {"virtual_shards": "auto", "sharding_key": "k"}
    for fed, want in ((0, 1), (99_999, 1), (100_000, 2), (10_000_000, 2)):
        assert harness.call("_virtual_shards_of", plain, fed, True) == want
        assert harness.call("_virtual_shards_of", plain, fed, False) == 1
        assert harness.call("_virtual_shards_of", sharded, fed, True) == 1
        for folded in (True, False):
            assert harness.call("_virtual_shards_of", {"virtual_shards": 3, "sharding_key": None}, fed, folded) == 3
    # A first run or a full refresh loads into an empty table: not measured, so one stream.
    assert harness.call("_virtual_shards_of", plain, 100_000, True, True) == 1
    # Never more shards than the load's threads: its `max_threads`, or the model's insert_settings' own.
    for threads, want in ((1, 1), (2, 2), (16, 2), (0, 2), (None, 2), ("", 2), ("auto", 2), ("1", 1)):
        assert harness.call("_virtual_shards_of", plain, 100_000, True, False, threads) == want
    capped = {**plain, "insert_settings": {"max_threads": 1}}
    assert harness.call("_virtual_shards_of", capped, 100_000, True, False, 8) == 1
    assert harness.call("_virtual_shards_of", {**plain, "insert_settings": {}}, 100_000, True, False, 8) == 2
    assert harness.call("_validate_virtual_shards", "auto") == "auto"


def test_a_list_quoted_in_one_call_is_each_value_quoted_alone(harness):
    """_sql_string and _quote with `each` (sql_text.sql: one macro call for many values) give, in order, what each
    value alone gives; an empty list gives an empty list. The hot callers quote through it: a settings clause,
    a column list."""
    for macro in ("_sql_string", "_quote"):
        alone = [harness.call(macro, v) for v in HOSTILE_TEXTS]
        assert harness.call(macro, HOSTILE_TEXTS, each=True) == alone
        assert harness.call(macro, [], each=True) == []
    assert harness.call("_sql_string", "it's") == "'it\\'s'"
    assert harness.call("_quote", "tick`") == "`tick\\``"
    clause = harness.call("_settings_clause", {"log_comment": "a'b", "max_threads": 1, "final": "x\\y"})
    assert clause == "settings log_comment = 'a\\'b', max_threads = 1, final = 'x\\\\y'"
    assert harness.call("_column_list", ["a", "b`c"]) == "`a`, `b\\`c`"
