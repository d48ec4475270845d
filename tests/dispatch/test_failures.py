"""A failing table's turn: which failures park it and which back off, what lets a parked table
start again, and the budget's share that retries take. Failed runs are Glue's records on moto
(GetJobRuns: state, times, ErrorMessage); the messages are the merge's own."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from cdclake.dispatch import resume_target
from cdclake_merge.dispatch import Decision, Target, dispatch, target_from_job
from cdclake_merge.failures import (
    BACKOFF_CAP_SECONDS,
    Run,
    backoff_seconds,
    failures_of,
    record_local_run,
    resume,
)
from cdclake_merge.hudi_options import hudi_options
from cdclake_merge.schema import SchemaChangeError, promote_stored, widen
from cdclake_merge.storage import LocalFileSystem, S3FileSystem
from tests.dispatch.dispatch_helpers import (
    AGE_STEP_SECONDS,
    BAD_FRACTION_ERROR,
    World,
    create_job,
    end_run,
    job_name,
    put_change_file,
    touch_job,
)

ORDERS, CUSTOMERS, ITEMS, PAYMENTS = (
    "public.orders",
    "public.customers",
    "public.items",
    "public.payments",
)
INTERVAL = 900.0  # the backoff's unit, seconds
# A run's executors lost mid-stage: Spark's words, which no retry can be told to repeat.
LOST_EXECUTORS = "An error occurred while calling o98.save. Executor 3 lost (heartbeat timed out)"


def _targets(world: World, *tables: str) -> list[Target]:
    return [target_from_job(world.glue, create_job(world, t)) for t in tables]


def _turn(world: World, *tables: str, budget: int = 10) -> dict[str, Decision]:
    decisions = dispatch(
        _targets(world, *tables),
        fs=S3FileSystem(world.s3),
        glue=world.glue,
        budget=budget,
        backoff_unit_seconds=INTERVAL,
        environment="dev",
    )
    return {d.table: d for d in decisions}


def _failed(message: str, state: str = "FAILED") -> Run:
    return Run(state, started=100.0, ended=160.0, error=message)


def _when(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")


def _waiting_then_failed(world: World, table: str, error: str) -> float:
    """A change file, then a run that started after it was written and failed with ``error``
    at once; the run's end (epoch seconds)."""
    create_job(world, table)
    put_change_file(world, table, 0)
    started = time.time()
    end_run(world, table, "FAILED", started=started, ended=started + 0.001, error=error)
    return started + 0.001


# --- which failures park -------------------------------------------------------------------------


def test_failures_of_bad_fraction_gate_is_deterministic() -> None:
    failures = failures_of([_failed(BAD_FRACTION_ERROR)])
    assert failures is not None and failures.kind == "TooManyBadRecords"


def test_failures_of_rebuild_refusing_history_table_is_deterministic() -> None:
    # A retry would be refused the same way (history switched on during a rebuild).
    from cdclake_merge.rebuild import HISTORY_REFUSED

    refused = HISTORY_REFUSED.format(table="db.t", change="a rebuild from a snapshot")
    line = f"RunFailed: cdclake merge failed: {refused}"
    failures = failures_of([_failed(line)])
    assert failures is not None and failures.kind == "HistoryRefused"


def test_failures_of_copy_continued_without_history_is_deterministic() -> None:
    from cdclake_merge.rebuild import COPY_WITHOUT_HISTORY

    line = f"RunFailed: cdclake merge failed: {COPY_WITHOUT_HISTORY.format(table='db.t')}"
    failures = failures_of([_failed(line)])
    assert failures is not None and failures.kind == "HistoryRefused"


def test_failures_of_type_that_cannot_widen_is_deterministic() -> None:
    with pytest.raises(SchemaChangeError) as refused:
        widen("public.orders", "amount", "int", "string")
    failures = failures_of([_failed(f"cdclake merge failed:\n{refused.value}")])
    assert failures is not None and failures.kind == "SchemaChangeRejected"


def test_failures_of_type_hudi_cannot_store_needs_a_rebuild() -> None:
    with pytest.raises(SchemaChangeError) as refused:
        promote_stored("public.orders", "amount", "int", "double")
    failures = failures_of([_failed(f"cdclake merge failed:\n{refused.value}")])
    assert failures is not None and failures.kind == "NeedsRebuild"


def test_failures_of_argument_the_entry_refuses_is_deterministic() -> None:
    # glue_jobs/merge_job.py's line (tests/merge/test_glue_entry.py holds its words).
    message = "cdclake merge failed: --max_files_per_run must be a positive whole number, not '10k'"
    failures = failures_of([_failed(message)])
    assert failures is not None and failures.kind == "ConfigError"


def test_failures_of_key_column_not_in_the_data_is_deterministic() -> None:
    # cdclake_merge.job's key check, as the entry prints it.
    message = "cdclake merge failed: table public.orders: key column(s) ['id'] not in the data"
    failures = failures_of([_failed(message)])
    assert failures is not None and failures.kind == "SchemaChangeRejected"


def test_failures_of_table_type_the_writer_refuses_is_deterministic() -> None:
    with pytest.raises(ValueError) as refused:
        hudi_options(database="d", table="t", record_key=["id"], table_type="MOR")
    failures = failures_of([_failed(f"cdclake merge failed: {refused.value}")])
    assert failures is not None and failures.kind == "ConfigError"


def test_failures_of_timeout_is_transient() -> None:
    failures = failures_of([_failed("", state="TIMEOUT")])
    assert failures is not None and failures.kind is None


def test_failures_of_lost_executors_is_transient() -> None:
    failures = failures_of([_failed(LOST_EXECUTORS)])
    assert failures is not None and failures.kind is None


def test_failures_of_counts_failures_since_the_last_success_past_stopped_runs() -> None:
    runs = [
        _failed(LOST_EXECUTORS),
        Run("STOPPED", started=90.0, ended=95.0),  # an operator's, not a failure
        _failed("", state="TIMEOUT"),
        Run("SUCCEEDED", started=50.0, ended=60.0),
        _failed(LOST_EXECUTORS),
    ]
    failures = failures_of(runs)
    assert failures is not None and failures.count == 2


def test_failures_of_newest_run_succeeded_is_none() -> None:
    assert failures_of([Run("SUCCEEDED", 200.0, 210.0), _failed(BAD_FRACTION_ERROR)]) is None


def test_backoff_seconds_doubles_with_each_failure() -> None:
    assert [backoff_seconds(n, INTERVAL) for n in (1, 2, 3)] == [900.0, 1800.0, 3600.0]


def test_backoff_seconds_capped_at_six_hours() -> None:
    assert backoff_seconds(40, INTERVAL) == BACKOFF_CAP_SECONDS == 6 * 3600


# --- parked ----------------------------------------------------------------------------------


def test_dispatch_deterministic_failure_parks_the_table(world: World) -> None:
    ended = _waiting_then_failed(world, ORDERS, BAD_FRACTION_ERROR)
    decision = _turn(world, ORDERS)[ORDERS]
    assert (decision.start, decision.reason) == (
        False,
        f"parked: TooManyBadRecords at {_when(ended)}; "
        "resume with cdclake dispatch --env dev --resume public.orders",
    )
    assert len(world.glue.get_job_runs(JobName=job_name(ORDERS))["JobRuns"]) == 1


def test_dispatch_parked_table_newer_change_file_starts_it(world: World) -> None:
    _waiting_then_failed(world, ORDERS, BAD_FRACTION_ERROR)
    time.sleep(AGE_STEP_SECONDS)  # S3 keeps LastModified to the second
    put_change_file(world, ORDERS, 60)  # written after the failed run started
    decision = _turn(world, ORDERS)[ORDERS]
    assert decision.start, decision.reason


def test_dispatch_parked_table_job_redeployed_starts_it(world: World) -> None:
    ended = _waiting_then_failed(world, ORDERS, BAD_FRACTION_ERROR)
    touch_job(world, ORDERS, at=ended + 1)
    decision = _turn(world, ORDERS)[ORDERS]
    assert decision.start, decision.reason


def test_dispatch_parked_table_resumed_by_an_operator_starts_it(world: World) -> None:
    ended = _waiting_then_failed(world, ORDERS, "cdclake merge failed: --mode must be one of merge")
    (target,) = _targets(world, ORDERS)
    resume(S3FileSystem(world.s3), target, ended + 1)
    decision = _turn(world, ORDERS)[ORDERS]
    assert decision.start, decision.reason


def test_dispatch_parked_table_resumed_before_its_failure_stays_parked(world: World) -> None:
    ended = _waiting_then_failed(world, ORDERS, BAD_FRACTION_ERROR)
    (target,) = _targets(world, ORDERS)
    resume(S3FileSystem(world.s3), target, ended - 1)  # an earlier park's resume
    decision = _turn(world, ORDERS)[ORDERS]
    assert decision.reason.startswith("parked: TooManyBadRecords")


def test_resume_target_records_what_the_dispatcher_reads(world: World) -> None:
    _waiting_then_failed(world, ORDERS, BAD_FRACTION_ERROR)
    resume_target(S3FileSystem(world.s3), _targets(world, ORDERS), ORDERS)
    decision = _turn(world, ORDERS)[ORDERS]
    assert decision.start, decision.reason


# --- backing off --------------------------------------------------------------------------------


def test_dispatch_transient_failures_back_off(world: World) -> None:
    create_job(world, ORDERS)
    put_change_file(world, ORDERS, 0)
    ended = time.time() - 100
    for back in (2, 1, 0):
        end_run(world, ORDERS, "FAILED", ended=ended - back * 10, error=LOST_EXECUTORS)
    decision = _turn(world, ORDERS)[ORDERS]
    assert (decision.start, decision.reason) == (
        False,
        f"backoff: 3 failures, next try after {_when(ended + 4 * INTERVAL)}",
    )


def test_dispatch_transient_failure_past_its_backoff_retries(world: World) -> None:
    create_job(world, ORDERS)
    put_change_file(world, ORDERS, 0)
    end_run(world, ORDERS, "TIMEOUT", ended=time.time() - INTERVAL - 1)
    decision = _turn(world, ORDERS)[ORDERS]
    assert (decision.start, decision.reason) == (
        True,
        "retry after 1 failures; 1 change files wait",
    )


# --- healthy first, retries within their share ----------------------------------------------------


def test_dispatch_healthy_table_starts_before_an_older_retry(world: World) -> None:
    create_job(world, ORDERS)
    put_change_file(world, ORDERS, 0)  # waits longer
    end_run(world, ORDERS, "TIMEOUT", ended=time.time() - 2 * INTERVAL)
    time.sleep(AGE_STEP_SECONDS)
    put_change_file(world, CUSTOMERS, 0)
    decisions = _turn(world, ORDERS, CUSTOMERS, budget=1)
    assert [t for t, d in decisions.items() if d.start] == [CUSTOMERS]


def test_dispatch_retries_take_at_most_their_share_of_the_budget(world: World) -> None:
    for table in (ORDERS, CUSTOMERS, ITEMS, PAYMENTS):
        create_job(world, table)
        put_change_file(world, table, 0)
        time.sleep(AGE_STEP_SECONDS)
        end_run(world, table, "TIMEOUT", ended=time.time() - 2 * INTERVAL)
    decisions = _turn(world, ORDERS, CUSTOMERS, ITEMS, PAYMENTS, budget=4)
    # Half of 4: the two oldest waiting retry, the others wait for the next turn.
    assert {t: d.start for t, d in decisions.items()} == {
        ORDERS: True,
        CUSTOMERS: True,
        ITEMS: False,
        PAYMENTS: False,
    }
    assert decisions[ITEMS].reason == (
        "retry after 1 failures; 1 change files wait; "
        "retries take at most 2 of the 4 concurrent runs"
    )


# --- the local stack's run log ------------------------------------------------------------------


def test_dispatch_local_run_log_failure_parks_the_table(tmp_path: Path) -> None:
    # The local stack's layout: change files and warehouse in folders, no Glue job.
    topic = "cdclake-local.public.orders"
    changes = tmp_path / "changes" / topic
    (changes / "partition=0").mkdir(parents=True)
    (changes / "partition=0" / f"{topic}+0+0000000000.json").write_text('{"payload": {}}\n')
    target = Target(ORDERS, "cdclake.public_orders", str(tmp_path / "warehouse"), str(changes))
    fs = LocalFileSystem()
    record_local_run(
        fs, target, Run("FAILED", time.time() + 1, time.time() + 2, BAD_FRACTION_ERROR)
    )
    (decision,) = dispatch([target], fs=fs, glue=None, budget=1, dry_run=True, environment="local")
    assert decision.reason.startswith("parked: TooManyBadRecords at ")
