"""The dispatcher's pure parts, without moto: a run's size, a decision's lag and JSON, the
sizing read from a job definition, the budget, and where a table's commits name their
checkpoint."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdclake_merge.dispatch import Decision, Sizing, decide, one_line, sizing_of
from cdclake_merge.pending import CHECKPOINT_KEY, TablePaths, newest_checkpoint_name

ORDERS = "public.orders"
JOB = "cdclake-dev-merge-public-orders"


def _definition(worker_type: str = "G.1X", **arguments: str) -> dict[str, Any]:
    """A merge job's GetJob Job with the dispatcher's bounds (and ``arguments`` over them)."""
    bounds = {"--dispatch_min_workers": "2", "--dispatch_bytes_per_executor": "1000"}
    return {
        "Name": JOB,
        "WorkerType": worker_type,
        "NumberOfWorkers": 6,
        "DefaultArguments": {**bounds, **arguments},
    }


def test_sizing_nothing_waiting_starts_the_driver_alone() -> None:
    # A run that only registers the last commit in the catalog applies no bytes.
    assert Sizing("G.1X", 1, 6, 1000).workers_for(0) == 1


def test_sizing_whole_shares_get_an_executor_each() -> None:
    assert Sizing("G.1X", 1, 10, 1000).workers_for(2000) == 3


def test_sizing_a_byte_over_a_share_gets_another_executor() -> None:
    assert Sizing("G.1X", 1, 10, 1000).workers_for(2001) == 4


def test_sizing_of_job_read_with_its_bounds() -> None:
    assert sizing_of(_definition("G.2X", **{"--max_bytes_per_run": "5000"})) == Sizing(
        "G.2X", 2, 6, 1000, max_bytes_per_run=5000
    )


def test_sizing_of_standard_workers_starts_as_defined() -> None:
    assert sizing_of(_definition("Standard")) is None


def test_sizing_of_no_worker_count_starts_as_defined() -> None:
    definition = _definition()
    del definition["NumberOfWorkers"]
    assert sizing_of(definition) is None


def test_sizing_of_one_bound_missing_starts_as_defined() -> None:
    definition = _definition()
    del definition["DefaultArguments"]["--dispatch_min_workers"]
    assert sizing_of(definition) is None


def test_sizing_of_byte_cap_zero_names_job_and_argument() -> None:
    with pytest.raises(LookupError) as refused:
        sizing_of(_definition(**{"--max_bytes_per_run": "0"}))
    assert str(refused.value) == (
        f"Glue job {JOB}: --max_bytes_per_run must be a positive whole number: '0'"
    )


def test_sizing_of_bound_of_one_accepted() -> None:
    sizing = sizing_of(_definition(**{"--dispatch_min_workers": "1"}))
    assert sizing is not None and sizing.min_workers == 1


def test_decision_lag_watermark_ahead_of_the_clock_is_zero() -> None:
    decision = Decision(ORDERS, False, "", ("s3://c/a.json",), watermark=1_000.0)
    assert decision.lag_seconds(now=900.0) == 0.0


def test_decision_json_has_every_field() -> None:
    decision = Decision(
        ORDERS,
        True,
        "1 change files wait",
        ("s3://c/a.json",),
        oldest_pending=1_764_288_000.0,  # 2025-11-28T00:00:00Z
        job=JOB,
        run_id="jr_1",
        watermark=1_764_288_000.0,
        workers=3,
    )
    assert decision.as_json(now=1_764_288_090.24) == {
        "table": ORDERS,
        "start": True,
        "reason": "1 change files wait",
        "files_pending": ["s3://c/a.json"],
        "oldest_pending": "2025-11-28T00:00:00+00:00",
        "job": JOB,
        "run_id": "jr_1",
        "failed": False,
        "mode": "merge",
        "workers": 3,
        "lag_seconds": 90.2,
    }


def test_decision_json_unread_table_has_no_times() -> None:
    shown = Decision(ORDERS, False, "not read: boom", failed=True).as_json(now=0.0)
    assert (shown["oldest_pending"], shown["lag_seconds"], shown["failed"]) == (None, None, True)


def test_one_line_joins_lines_cuts_long_messages_and_names_a_silent_exception() -> None:
    assert one_line(RuntimeError("first\n  second")) == "first second"
    assert one_line(RuntimeError("x" * 500)) == "x" * 300
    assert one_line(TimeoutError()) == "TimeoutError"


def test_decide_budget_below_one_refused() -> None:
    with pytest.raises(ValueError, match="at least 1, got 0"):
        decide([], 0)


def test_table_paths_hive_layout_with_sidecar_beside_the_tables() -> None:
    assert TablePaths.of("s3://lake/warehouse/", "cdclake_dev.public_orders") == TablePaths(
        "s3://lake/warehouse/cdclake_dev.db/public_orders",
        "s3://lake/warehouse/cdclake_dev.db/public_orders/.hoodie",
        "s3://lake/warehouse/cdclake_dev.db/_cdclake/public_orders",
    )


@pytest.mark.parametrize("table", ["orders", "a.b.c", ".orders", "db."])
def test_table_paths_not_database_dot_table_refused(table: str) -> None:
    with pytest.raises(ValueError, match=f"table must be DATABASE.TABLE, got '{table}'"):
        TablePaths.of("s3://lake/warehouse/", table)


def _commit(checkpoint: str | None) -> str:
    extra = {CHECKPOINT_KEY: checkpoint} if checkpoint is not None else {}
    return json.dumps({"extraMetadata": extra})


def test_newest_checkpoint_name_newest_completed_commit_wins() -> None:
    timeline = {
        "20260101000000000.commit": _commit("checkpoints/v00000001.json"),
        "20260102000000000.deltacommit": _commit("checkpoints/v00000002.json"),
        "20260103000000000.commit.requested": "",  # not completed: no checkpoint yet
    }
    assert newest_checkpoint_name(timeline) == "checkpoints/v00000002.json"


def test_newest_checkpoint_name_compaction_without_checkpoint_looks_further_back() -> None:
    timeline = {
        "20260101000000000.deltacommit": _commit("checkpoints/v00000001.json"),
        "20260102000000000.commit": _commit(None),  # a compaction's commit
        "20260103000000000.commit": "",  # an empty instant file
    }
    assert newest_checkpoint_name(timeline) == "checkpoints/v00000001.json"


def test_newest_checkpoint_name_no_commit_is_none() -> None:
    assert newest_checkpoint_name({"20260101000000000.commit.inflight": ""}) is None


def test_sizing_compaction_due_adds_its_share_of_executors() -> None:
    sizing = Sizing("G.1X", 2, 10, 1000, compaction_bytes=3000, compaction_bytes_per_executor=1000)
    # 2 executors for the bytes, 3 for the compaction's budget, and the driver
    assert sizing.workers_for(2000, compaction_due=True) == 6


def test_sizing_compaction_not_due_sizes_the_bytes_alone() -> None:
    sizing = Sizing("G.1X", 2, 10, 1000, compaction_bytes=3000, compaction_bytes_per_executor=1000)
    assert sizing.workers_for(2000) == 3


def test_sizing_of_merge_on_read_job_reads_its_compaction_budget() -> None:
    definition = _definition(
        **{"--compaction_io_mb": "3", "--dispatch_compaction_bytes_per_executor": "1000"}
    )
    sizing = sizing_of(definition)
    assert sizing is not None
    assert (sizing.compaction_bytes, sizing.compaction_bytes_per_executor) == (3 * 1024**2, 1000)


def test_sizing_prod_backlog_beyond_min_workers_in_its_objective_gets_more_workers() -> None:
    from environment.config import load_config

    config = load_config("prod")
    table = config.lake_table("public.order_lines")  # up to 8 workers
    job = config.lake.glue_job_of(table)
    arguments = {f"--{k}": str(v) for k, v in config.lake.dispatch_of(table).items()}
    sizing = sizing_of(
        {
            "WorkerType": job.worker_type,
            "NumberOfWorkers": job.number_of_workers,
            "DefaultArguments": arguments,
        }
    )
    assert sizing is not None
    # The 100 GiB catch-up: at 768 KiB a second a vCPU a G.2X executor merges about
    # 21 GiB in prod's hour, so 5 executors and the driver (at the first load's rate, or per
    # half the timeout at 5 MiB/s, it got min_workers).
    assert sizing.workers_for(100 * 1024**3) == 6 > job.min_workers
