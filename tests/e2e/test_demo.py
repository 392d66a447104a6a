"""The whole pipeline at a small size: generator → Spark staging → ClickHouse marts → report."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.spark
def test_demo_pipeline_matches_oracle_end_to_end(tmp_path):
    """make demo's job on 1,500 events in 2 batches, real encodings through the Python staging models.

    Marts and aggregate equal the oracle (truncates applied, TOASTed values kept), and every line kind
    staged equals what the generator wrote.
    """
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vcmt_lab.demo",
            "--events",
            "1500",
            "--batches",
            "2",
            "--seed",
            "7",
            "--work",
            str(tmp_path / "demo"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-4000:]
    assert "| | staged kinds = generated kinds | | | yes |" in out
    for kind in (
        "truncate",
        "tombstone",
        "heartbeat",
        "transaction",
        "  of which TOAST placeholders",
        "malformed: version_out_of_range",
        "primary-key changes",
    ):
        assert f"| pg.public.orders | {kind}" in out
    assert "| fct_orders |" in out and "| dim_customers |" in out
    assert "downstream aggregate agg_orders_by_tenant_status vs oracle:" in out and ", 0 differ" in out
    assert ", 0 failed" in out.splitlines()[-1]
    assert "marts equal the oracle" in out.splitlines()[-1]
