"""What a run of a vcmt_upsert model sends (issue 58), counted from dbt's own debug log as `make bench-statements`
counts it: a run with nothing to recover observes the model once, takes and gives back its lock, loads, and
changes no object."""

from __future__ import annotations

from vcmt_lab.bench.statements import VCMT, read_log, sent_verbs

DDL = {"create", "drop", "alter", "rename", "exchange", "truncate", "optimize", "system"}


def test_a_steady_run_sends_ten_statements_and_no_ddl(project):
    project.command(
        "create table src (id UInt64, status String, n Int64, _version UInt64) engine = MergeTree order by id"
    )
    project.command("insert into src select number, 'v1', 1, 1 from numbers(1000)")
    project.model("m", VCMT.replace("{src}", "src"))
    first = project.dbt("run", "--debug")
    assert "create" in sent_verbs(first.log)  # the parser sees a first run's DDL
    project.command("truncate table src")
    project.command("insert into src select number * 7, 'v2', 2, 2 from numbers(100)")
    steady = project.dbt("run", "--debug")
    verbs = sent_verbs(steady.log)
    assert len(verbs) == read_log(steady.log, 0).statements, verbs
    assert len(verbs) <= 10 and not DDL & set(verbs), verbs
    assert project.query("select count(), sum(n) from m final where sign = 1") == [(1000, 1000 - 100 + 200)]
    project.command("truncate table src")
    empty = sent_verbs(project.dbt("run", "--debug").log)
    assert len(empty) <= 8 and not DDL & set(empty), empty
