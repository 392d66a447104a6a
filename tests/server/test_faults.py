"""The load lock under faults (docs/design.md#one-load-at-a-time): a representative subset of the sweep
that `make faults` runs (vcmt_lab.faults), on a served node over both drivers and on the two-node cluster.

Each schedule pauses, kills or cuts a real `dbt run` at a named statement while another load of the same
model starts, then reruns, and checks the model against the oracle (vcmt_lab.faults.harness).
"""

from __future__ import annotations

import pytest

from tests.conftest import make_project
from vcmt_lab.dbt_project import Engine
from vcmt_lab.faults.harness import (
    Schedule,
    enumerate_statements,
    run_schedule,
    through_other_node,
    unrecorded_loads,
)
from vcmt_lab.faults.inject import sent_statements, statement_label

# `make faults` sweeps every statement of a load x pause/kill/cut x another load over both drivers and on the
# cluster; here, one schedule per kind of fault over HTTP. A load killed while it builds its batch, a
# vcmt.load_stage after it; its connection cut while its stage INSERT runs (the case 3; over HTTP the
# statement goes on on the server); paused right after its lock is recorded, a --full-refresh after it; on two virtual shards, killed while
# its fan-out's INSERT runs, a `dbt run` after it (which drops the fan-out's views and table). A holder
# paused right before its first write to the stage, past its lease (the case 1), is
# test_a_holder_paused_past_its_lease_and_taken_over_writes_nothing_more, over both drivers.
SCHEDULES = [
    Schedule("rounds", "kill", "create m__batch_N#1", "load"),
    Schedule("fold", "cut", "insert m__stage#1", "run"),
    Schedule("rounds", "pause", "insert m__lock acquired#1", "full-refresh"),
    Schedule("shards", "kill", "insert m__fanout_N#1", "run"),
]


# Over native, the holder paused before its stage INSERT past its lease is the holder test's; a cut connection is
# seen by the server (it cancels the statement), unlike over HTTP: the sweep's native leg has the rest (make faults
# ARGS="--targets native"). On the cluster, the holder test's schedule through two nodes (the case 6).


@pytest.mark.engines("http")
@pytest.mark.parametrize("schedule", SCHEDULES, ids=str)
def test_a_faulted_load_and_another_load_leave_the_model_exact(module_project, schedule):
    outcome = run_schedule(module_project, schedule)
    assert outcome.reached, f"the fault never happened: {outcome.notes}"
    assert outcome.exact, "\n".join(outcome.problems)


@pytest.mark.engines("http", "native")
def test_a_holder_paused_past_its_lease_and_taken_over_writes_nothing_more(module_project):
    """The issue's case 1: the paused holder goes on after another load took its lock over and ran. Its
    next write is refused by the server (the fence), so its run fails, saying why; the model is exact."""
    outcome = run_schedule(module_project, Schedule("fold", "pause", "insert m__stage#1", "run"))
    code, out = outcome.outputs["faulted"]
    assert code != 0 and "no longer holds the lock of the model" in out, out[-3000:]
    assert outcome.outputs["other"][0] == 0 and "took over the lock of" in outcome.outputs["other"][1]
    assert outcome.exact, "\n".join(outcome.problems)


@pytest.fixture(scope="module")
def cluster_project(tmp_path_factory, chdb_path, lab_dir, cluster):
    """A project on the two-node cluster (`cluster:` in its profile, over HTTP through the first node's entry):
    the harness shards the model."""
    proj = make_project(
        tmp_path_factory.mktemp("faults_cluster") / "proj",
        "faults_cluster",
        chdb_path,
        lab_dir,
        engine=Engine("http", node=cluster, cluster=cluster.name),
    )
    yield proj
    proj.close()


def test_on_the_cluster_a_holder_paused_past_its_lease_is_fenced_off_by_a_load_through_the_other_node(cluster_project):
    """The issue's case 1 across nodes (case 6): a sharded model's holder, through the first node, paused right
    before its first stage INSERT past its lease; a `dbt run` through the second node takes the lock over and
    loads; the holder goes on and its write is refused. Read through the Distributed table, the model is
    exact."""
    with through_other_node(cluster_project) as via_second:
        outcome = run_schedule(cluster_project, Schedule("fold", "pause", "insert m__stage#1", "run"), via_second)
    code, out = outcome.outputs["faulted"]
    assert code != 0 and "no longer holds the lock of the model" in out, out[-3000:]
    assert outcome.outputs["other"][0] == 0 and "took over the lock of" in outcome.outputs["other"][1], outcome.outputs[
        "other"
    ][1][-3000:]
    assert outcome.exact, "\n".join(outcome.problems)


@pytest.mark.engines("http")
def test_the_sweep_enumerates_the_loads_statements_from_its_log(module_project):
    statements = enumerate_statements(module_project, "rounds")
    # From the lock on, every write of the load is there, each once, by its stable name.
    for name in [
        "insert m__lock acquired#1",
        "create m__batch_N#1",
        "insert m__batch_N#1",
        "insert m__stage#1",
        "insert m__loads#1",
        "insert m__lock released#1",
    ]:
        assert name in statements, statements
    # From its claim: the lock's state read back (its holder is this load); then the load's steps, each renewing the
    # lease (the sweep waits before each statement). The older generations' batch tables were looked for in the
    # run's observation, before the claim: no read for them here. Taking the lock sends no DDL.
    assert statements[:2] == ["insert m__lock acquired#1", "select m__lock#1"], statements
    assert "insert m__lock renewed#1" in statements, statements
    assert not [s for s in statements if s.startswith("select tables#")], statements
    assert not [s for s in statements if s.split()[0] in ("create", "drop") and "__lock" in s], statements
    # The load's own batch table, named by its lock generation, is created once and dropped once.
    assert statements.count("create m__batch_N#1") == 1 and [
        s for s in statements if s.startswith("drop m__batch")
    ] == ["drop m__batch_N#1"], statements


def test_the_statements_a_run_sent_are_read_one_a_line(tmp_path):
    """A name holds spaces: a sweep once split the log on whitespace, never found `insert m__loads#1`, and took a
    run paused after recording its load, then rebuilt over by a full refresh, for one that recorded nothing."""
    log = tmp_path / "sent"
    assert sent_statements(log) == []
    log.write_text("insert m__lock acquired#1\ninsert m__loads#1\nselect m__lock#7\n")
    assert sent_statements(log) == ["insert m__lock acquired#1", "insert m__loads#1", "select m__lock#7"]


def test_statement_names_are_stable_and_drop_comments_databases_and_generations():
    sql = (
        '/* {"app": "dbt"} */\ninsert into `db`.`m__lock` (gen, holder, kind, what) select gen, \'x\' as holder, '
        "'renewed' as kind, '' as what"
    )
    assert statement_label(sql) == "insert m__lock renewed"
    # A sharded model's lock writes its rows to the first shard through a table function: the same name.
    through = sql.replace("into `db`.`m__lock`", "into function cluster('c1', 'db', 'm_local__lock', 0)")
    assert statement_label(through) == "insert m_local__lock renewed"
    assert statement_label("create table if not exists `db`.`m__lock_3` (a Int8)") == "create m__lock_N"
    assert statement_label("drop table if exists `db`.`m__batch_12` sync") == "drop m__batch_N"
    assert (
        statement_label("create materialized view `db`.`m__fanout_12_1` to `db`.`m__stage`") == "create m__fanout_N_1"
    )
    assert statement_label("insert into `db`.`m__fanout_12` (id) select 1") == "insert m__fanout_N"
    assert statement_label("exchange tables `db`.`m__vcmt_new` and `db`.`m`") == "exchange m__vcmt_new"
    assert statement_label("kill query where query_id != queryID() sync") == "kill"


def test_a_load_that_ended_before_a_full_refresh_is_checked_against_the_loads_it_rebuilt():
    """The harness's check of `m__loads` (invocation ids, oldest first) when the faulted run succeeded and ended
    before the other load, a --full-refresh, started."""
    refreshed = [("faulted", 0, "A"), ("other", 0, "F")]
    assert unrecorded_loads("full-refresh", refreshed, ["F", "R"]) == []
    # The rebuilt __loads cannot hold a record of a load that ended before the full refresh started...
    assert unrecorded_loads("full-refresh", refreshed, ["A", "F", "R"]) == [
        "faulted ended before the --full-refresh, whose rebuilt __loads still holds its record"
    ]
    # ... and its oldest record is the full refresh's own.
    assert unrecorded_loads("full-refresh", refreshed, ["R", "F"]) == [
        "the --full-refresh's record is not the oldest of the __loads it rebuilt: ['R', 'F']"
    ]
    # A full refresh that failed swapped nothing in: the faulted run's record must be there.
    failed = [("faulted", 0, "A"), ("other", 1, "F")]
    assert unrecorded_loads("full-refresh", failed, ["A", "R"]) == []
    assert unrecorded_loads("full-refresh", failed, ["R"]) == ["faulted reported success but recorded no load"]
    # Any other load leaves every record where it is; a run that failed records nothing.
    assert unrecorded_loads("run", [("faulted", 0, "A"), ("other", 0, "O")], ["O", "R"]) == [
        "faulted reported success but recorded no load"
    ]
    assert unrecorded_loads("full-refresh", [("other", 0, "F"), ("faulted", 0, "A")], ["F", "R"]) == [
        "faulted reported success but recorded no load"
    ]
    assert unrecorded_loads("run", [("faulted", 1, "A"), ("other", 0, "O")], ["O"]) == []
    # A run paused after it recorded its load (right before its release) ends after the full refresh: its record
    # went with the __loads the full refresh replaced, as if it had ended first.
    late = [("other", 0, "F"), ("faulted", 0, "A")]
    assert unrecorded_loads("full-refresh", late, ["F", "R"], {"faulted"}) == []
    assert unrecorded_loads("full-refresh", late, ["A", "F", "R"], {"faulted"}) == [
        "faulted ended before the --full-refresh, whose rebuilt __loads still holds its record"
    ]


@pytest.mark.engines("http")
def test_a_holder_taken_over_before_it_drops_its_batch_leaves_the_new_holders_batch_alone(module_project):
    """`m__batch` had one name per model. A holder paused past its lease right before its last DROP of it went
    on while the load that took its lock over was about to read its own `m__batch`: that DROP took the new
    holder's batch away and made its load fail. Each load's batch is now named by its lock generation: the
    stale holder, resumed, drops only its own and then fails at its next (fenced) write, and the new holder's
    load succeeds."""
    statements = enumerate_statements(module_project, "rounds")
    own_drop = "drop m__batch_N#1"
    assert statements.count(own_drop) == 1 and statements.index(own_drop) > statements.index("insert m__stage#1")
    outcome = run_schedule(module_project, Schedule("rounds", "pause", own_drop, "run", overlap=True))
    assert outcome.reached, f"the fault never happened: {outcome.notes}"
    code, out = outcome.outputs["faulted"]
    assert code != 0 and "no longer holds the lock of the model" in out, out[-3000:]
    code, out = outcome.outputs["other"]
    assert code == 0, out[-3000:]
    assert outcome.exact, "\n".join(outcome.problems)
