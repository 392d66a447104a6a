"""The lifecycle's pure macros on observations captured from real runs (tests/lifecycle/captured): what they plan
is what the real run did, in milliseconds and with no engine.

Each capture holds what a run observed right before it ran and what it then sent and logged
(vcmt_lab.lifecycle_capture; `make capture-lifecycle` captures them again). The expected outcome of each test is
read from the capture (the run's statements and messages), never written here.
"""

from __future__ import annotations

import re

import pytest

from tests.lifecycle import capture
from vcmt_lab.faults.inject import statement_label


def _swap_the_run_acted_on(c: capture.Captured) -> tuple[str | None, bool]:
    """What the run did about an interrupted --full-refresh, from its messages (lifecycle.sql
    `_finish_interrupted_swap`, `_refuse_split`, `_refuse_mixed`): the swap state it acted on (none when it found no
    staging object and no mixed generations), and whether it refused nodes serving mixed generations."""
    said = c.messages
    mixed = "the nodes serve different generations of the model, and reads through" in said
    if "stopped before it swapped any table in" in said:
        return "unswapped", mixed
    if re.search(r"its EXCHANGE of .* ran on some nodes only", said):
        return "split", mixed
    if "its swap is finished on every node" in said:
        return "resumable", mixed
    return ("mixed" if mixed else None), mixed


def _ordinary(c: capture.Captured) -> bool:
    return not c.rebuild


@pytest.mark.parametrize("name", capture.every(_ordinary))
def test_interrupted_swap_is_the_state_the_real_run_acted_on(name):
    """`vcmt._interrupted_swap(cfg, objs, columns, nodes)` on the observation's `nodes` classifies the swap as the
    captured run acted on it (rolled back, finished, mended, refused, or nothing to do), finds the mixed roles the
    run refused, and names the tables the run named."""
    c = capture.load(name)
    harness = c.harness()
    objs = c.objects(harness)
    found = harness.call("_interrupted_swap", c.cfg, objs, c.observation["columns"], c.obs["nodes"])
    state, refused_mixed = _swap_the_run_acted_on(c)
    assert (found and found["state"]) == state, (found, c.messages)
    # Mixed generations are refused where nothing is left to mend them from (lifecycle.sql `_refuse_mixed`).
    assert bool(found and found["mixed"] and found["state"] in ("unswapped", "mixed")) == refused_mixed, found
    if state == "split":
        named = re.search(r"its EXCHANGE of (.*?) ran on some nodes only", c.messages).group(1)
        assert [objs[r].identifier for r in found["split"]] == named.split(", ")
    if state == "resumable":
        exchanging = re.search(r"\(exchanging (.*?), then", c.messages)
        assert [objs[r].identifier for r in found["pending"]] == (exchanging.group(1).split(", ") if exchanging else [])


def _first_run(c: capture.Captured) -> bool:
    return c.rebuild and c.observation["objects"]["target"] not in c.obs["found"]


@pytest.mark.parametrize("name", capture.every(_first_run))
def test_create_statements_are_the_first_runs_in_order(name):
    """`vcmt._create_statements(cfg, objs, columns, guarded)` gives, in order and to the byte, the statements that
    created the model's objects in the captured first run (its DDL on the model's and the staging set's names
    from its first CREATE on; `columns` what the model's SELECT returns, `guarded` the adapter's `can_exchange`)."""
    c = capture.load(name)
    harness = c.harness()
    objs = c.objects(harness)
    planned = harness.call("_create_statements", c.cfg, objs, c.wanted, c.context["can_exchange"])
    names = {r.identifier for r in objs.values()} | {
        r.identifier for r in harness.call("_staging_objects", objs).values()
    }
    sent = c.ddl_on(names)
    first = next(i for i, sql in enumerate(sent) if sql.lower().startswith("create"))
    assert [sql.strip() for _, sql in planned] == sent[first:]


@pytest.mark.parametrize("name", capture.every(lambda c: c.rebuild and not _first_run(c)))
def test_a_full_refresh_creates_its_staging_set_as_planned(name):
    """A --full-refresh of an existing model builds the staging set (`_staging_objects`) unguarded, as
    `vcmt._create_statements(cfg, staging, columns, false)` plans it, in order; each table the swap exchanges carries
    the refresh's generation as its comment (lifecycle.sql `_create_objects`), the rest exactly as planned."""
    c = capture.load(name)
    harness = c.harness()
    staging = harness.call("_staging_objects", c.objects(harness))
    planned = [sql.strip() for _, sql in harness.call("_create_statements", c.cfg, staging, c.wanted, False)]
    sent = c.ddl_on({r.identifier for r in staging.values()})
    first = next(i for i, sql in enumerate(sent) if sql.lower().startswith("create"))
    sent = sent[first : first + len(planned)]
    swapped = {staging[role].identifier for role in harness.call("_swapped_roles", c.cfg, staging, c.wanted)}
    for plan, run in zip(planned, sent, strict=True):
        assert run.startswith(plan), (plan, run)
        if statement_label(plan).split(" ")[1] in swapped:
            assert re.fullmatch(r"\s+comment 'vcmt generation [^']+'", run[len(plan) :]), run
        else:
            assert run == plan


def _reconciles(c: capture.Captured) -> bool:
    """An ordinary run that did not finish an interrupted swap: it reconciled the objects it observed."""
    return _ordinary(c) and _swap_the_run_acted_on(c)[0] is None and c.data["success"]


@pytest.mark.parametrize("name", capture.every(_reconciles))
def test_schema_change_plan_gives_the_steps_the_real_run_sent(name):
    """`vcmt._schema_change_plan(cfg, objs, wanted, found, obs)` plans, in order, the ALTERs of the target and the
    stage the captured run sent (none for a run with nothing to change), and describes the change as the run's log
    does."""
    c = capture.load(name)
    harness = c.harness()
    objs = c.objects(harness)
    plan = harness.call("_schema_change_plan", c.cfg, objs, c.wanted, c.obs["found"], c.obs)
    planned = [
        harness.call("_plan_step_sql", step, objs[step["on"]]).strip() for step in plan["before"] + plan["after"]
    ]
    assert planned == c.ddl_on({objs["target"].identifier, objs["stage"].identifier}, verbs=("alter",))
    said = re.search(r"schema change \(\w+\): (.*)$", c.messages, flags=re.M)
    assert (said.group(1) if said else None) == (plan["describe"] if plan["changed"] else None)


@pytest.mark.parametrize("name", capture.every(lambda c: _reconciles(c) and "steady" in c.name))
def test_a_steady_state_run_plans_nothing_and_sent_no_ddl(name):
    """A run of an existing model with nothing to recover or change: no interrupted swap, an empty schema plan,
    and the captured run changed no object (issue 58: a run that changes no object sends no DDL)."""
    c = capture.load(name)
    harness = c.harness()
    objs = c.objects(harness)
    assert harness.call("_interrupted_swap", c.cfg, objs, c.observation["columns"], c.obs["nodes"]) is None
    plan = harness.call("_schema_change_plan", c.cfg, objs, c.wanted, c.obs["found"], c.obs)
    assert not plan["changed"] and not plan["before"] and not plan["after"]
    ddl = [s for s in c.statements if s.split(None, 1)[0].lower() in capture.DDL]
    assert ddl == []
    # docs/performance.md, "Statements": 10 a run (dbt's own catalog reads included), 12 on the sharded model.
    assert len(c.statements) == (12 if c.data["engine"] == "cluster" else 10), c.statements


def _same_but_generation(sql: str) -> str:
    """A statement with a full refresh's generation (lifecycle.sql `_generation_comment`) made comparable."""
    return re.sub(r"'vcmt generation [^']*'", "'vcmt generation'", " ".join(sql.split()))


def _planned(steps: list[dict]) -> list[str]:
    return [_same_but_generation(s["sql"]) for s in steps]


def _leftovers(harness, objs, nodes) -> dict:
    return harness.call("_leftovers_in", objs, nodes)


@pytest.mark.parametrize("name", capture.every(lambda c: c.rebuild))
def test_the_build_plan_is_what_the_real_run_sent(name):
    """`vcmt._plan_build(cfg, objs, columns, found, anywhere)` on a first run's or a --full-refresh's observation
    gives, in order, the statements the run sent to change the catalog before it loaded: leftovers of an earlier
    attempt dropped, then the objects created (in place, or as the staging set beside the model's own)."""
    c = capture.load(name)
    harness = c.harness()
    objs = c.objects(harness)
    build = harness.call(
        "_plan_build", c.cfg, objs, c.wanted, c.obs["found"], _leftovers(harness, objs, c.obs["nodes"])
    )
    names = {r.identifier for r in objs.values()} | {
        r.identifier
        for s in [harness.call("_staging_objects", objs), *harness.call("_mend_sets", objs)]
        for r in s.values()
    }
    sent = [_same_but_generation(s) for s in c.ddl_on(names)]
    planned = _planned(build["steps"])
    assert planned and sent[: len(planned)] == planned
    # A first run loads into the model's own objects, a --full-refresh of an existing model into the staging set.
    assert build["into"]["target"].identifier == (
        harness.call("_staging_objects", objs)["target"].identifier
        if objs["target"].identifier in c.obs["found"] and c.context["can_exchange"]
        else objs["target"].identifier
    )


@pytest.mark.parametrize("name", capture.every(lambda c: c.rebuild and c.obs["found"] and c.data["success"]))
def test_a_full_refresh_swaps_and_finishes_as_planned(name):
    """Once its load succeeded, a --full-refresh exchanges (or renames) its new tables in and finishes the swap:
    `vcmt._plan_exchange` then `vcmt._plan_finish_swap`, the statements the run sent after its build, in order
    (the staging names left after the exchanges: every one the build created, but a RENAME's)."""
    c = capture.load(name)
    harness = c.harness()
    objs = c.objects(harness)
    found = c.obs["found"]
    build = harness.call("_plan_build", c.cfg, objs, c.wanted, found, _leftovers(harness, objs, c.obs["nodes"]))
    new = build["into"]
    roles = harness.call("_swapped_roles", c.cfg, new, c.wanted)
    exchange = harness.call("_plan_exchange", objs, new, roles, found)
    renamed = {new[r].identifier for r in roles if objs[r].identifier not in found}
    created = [statement_label(s["sql"]).split(" ")[1] for s in build["steps"] if s["name"].startswith("vcmt_create")]
    nodes = {n["node"] for n in c.obs["nodes"]} or {"node"}
    anywhere = {name: sorted(nodes) for name in created if name not in renamed}
    finish = harness.call("_plan_finish_swap", c.cfg, objs, new, c.wanted, found, anywhere)
    names = {r.identifier for r in objs.values()} | {r.identifier for r in new.values()}
    sent = [_same_but_generation(s) for s in c.ddl_on(names)]
    after_build = sent[len(build["steps"]) :]
    assert after_build[: len(exchange) + len(finish)] == _planned(exchange + finish)


def _acted_on(state: str):
    return lambda c: _ordinary(c) and _swap_the_run_acted_on(c) == (state, False)


@pytest.mark.parametrize("name", capture.every(_acted_on("resumable")))
def test_a_resumable_swap_is_finished_as_planned(name):
    """A --full-refresh stopped after its load, while every node serves the same tables: the next run exchanges
    the tables no node swapped yet and finishes the swap, the statements the run sent, in order."""
    c = capture.load(name)
    harness = c.harness()
    objs = c.objects(harness)
    found_swap = harness.call("_interrupted_swap", c.cfg, objs, c.observation["columns"], c.obs["nodes"])
    new = harness.call("_staging_objects", objs)
    exchange = harness.call("_plan_exchange", objs, new, found_swap["pending"], c.obs["found"])
    finish = harness.call("_plan_finish_swap", c.cfg, objs, new, c.wanted, c.obs["found"], found_swap["leftovers"])
    names = {r.identifier for r in objs.values()} | {r.identifier for r in new.values()}
    assert [_same_but_generation(s) for s in c.ddl_on(names)] == _planned(exchange + finish)


@pytest.mark.parametrize("name", capture.every(_acted_on("unswapped")))
def test_an_unswapped_full_refresh_is_rolled_back_as_planned(name):
    """A --full-refresh stopped before it swapped anything in: the next run drops what it left on every node
    (`vcmt._plan_drop_leftovers` on the swap's leftovers), the statements the run sent before it loaded."""
    c = capture.load(name)
    harness = c.harness()
    objs = c.objects(harness)
    found_swap = harness.call("_interrupted_swap", c.cfg, objs, c.observation["columns"], c.obs["nodes"])
    planned = _planned(harness.call("_plan_drop_leftovers", objs, found_swap["leftovers"]))
    names = {r.identifier for s in [harness.call("_staging_objects", objs), *harness.call("_mend_sets", objs)]
             for r in s.values()}  # fmt: skip
    assert planned and [_same_but_generation(s) for s in c.ddl_on(names)] == planned


def test_the_swap_sweeps_statements_are_the_sharded_full_refreshs_plan():
    """`make swap-sweep` (tests/materialization/test_sharded.py) loses a node at each ON CLUSTER statement of a
    sharded --full-refresh, from a list of those statements: the list is the plan's (its build, exchanges and
    finish, as the planners give them for a sharded model's observation), so no statement is left out of the
    sweep when the plan changes."""
    from tests.materialization.test_sharded import REFRESH_STATEMENTS

    c = capture.load("cluster_steady_state")
    harness = c.harness()
    objs = c.objects(harness)
    found = c.obs["found"]
    build = harness.call("_plan_build", c.cfg, objs, c.wanted, found, {})
    new = build["into"]
    exchange = harness.call("_plan_exchange", objs, new, harness.call("_swapped_roles", c.cfg, new, c.wanted), found)
    created = [statement_label(s["sql"]).split(" ")[1] for s in build["steps"]]
    nodes = sorted({n["node"] for n in c.obs["nodes"]})
    finish = harness.call("_plan_finish_swap", c.cfg, objs, new, c.wanted, found, {n: nodes for n in created})
    planned = [statement_label(s["sql"]) for s in build["steps"] + exchange + finish if "ON CLUSTER" in s["sql"]]
    model = objs["distributed"].identifier
    assert planned == [s.format(m=model) for s in REFRESH_STATEMENTS]


def _merge_table_columns(sql: str) -> list[dict[str, str]]:
    """The columns a mend's Merge table declares (`vcmt._columns_ddl`: one "`name` type" a line)."""
    body = sql[sql.index("(\n") + 2 : sql.rindex("\n  ) engine = Merge(")]
    columns = []
    for line in body.split(",\n"):
        name, data_type = re.fullmatch(r"\s*`([^`]+)` (.+)", line, flags=re.S).groups()
        columns.append({"name": name, "data_type": data_type.strip()})
    return columns


@pytest.mark.parametrize("name", capture.every(_acted_on("split")))
def test_a_split_swap_is_mended_as_planned(name):
    """A --full-refresh whose EXCHANGE (or RENAME) of a table ran on some nodes only: for each such table the next
    run copies the rebuild on every node and swaps the copy in (`vcmt._plan_mend_copy`, then `vcmt._plan_mend_swap`,
    with an empty table of the model's name first where a split RENAME left it on some nodes only), the statements
    the run sent on the mend's names, in order, to the byte but the generation.

    The rebuild's columns are what the run read from the dbt node's catalog, a read the capture keeps as the
    statement that echoes it (the Merge table's column list); everything else is planned from the observation.
    The real-engine proof that a mend makes every node serve the rebuild is test_sharded's node lost at the
    local target's EXCHANGE (make test); the split RENAME and a mend split again by a lost node are these
    captures here, and real runs of them in `make swap-sweep`."""
    c = capture.load(name)
    harness = c.harness()
    objs = c.objects(harness)
    found_swap = harness.call("_interrupted_swap", c.cfg, objs, c.observation["columns"], c.obs["nodes"])
    assert found_swap["split"], found_swap
    copies, sources = harness.call("_mend_sets", objs)
    mend_names = {copies[r].identifier for r in found_swap["split"]} | {
        sources[r].identifier for r in found_swap["split"]
    }
    split_names = {objs[r].identifier for r in found_swap["split"]}
    # What the run sent on the mend's names, and on the split tables' own (a placeholder's CREATE), in order.
    sent = [_same_but_generation(s) for s in c.ddl_on(mend_names | split_names)]
    planned: list[str] = []
    for role in found_swap["split"]:
        merge_table = next(s for s in c.ddl_on({sources[role].identifier}, verbs=("create",)))
        built = harness.call("_sorting_key_default", c.cfg, c.observation["columns"])
        planned += _planned(
            harness.call(
                "_plan_mend_copy", c.cfg, built, objs, c.observation["columns"], role, found_swap["generation"],
                _merge_table_columns(merge_table),
            )
        )  # fmt: skip
        swap = harness.call("_plan_mend_swap", c.cfg, objs, c.observation["columns"], role, found_swap)
        # The capture of a split RENAME, and only it, leaves the model's name on some nodes only.
        assert ("vcmt_mend_placeholder" in [s["name"] for s in swap]) == ("rename" in name), swap
        planned += _planned(swap)
    assert planned and sent[: len(planned)] == planned
    # Then only the finish of the swap, which drops what is left of the mend.
    assert [s for s in sent[len(planned) :] if not s.startswith("drop table if exists")] == []
