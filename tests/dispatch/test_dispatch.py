"""The dispatcher's decision against moto: S3 change files and the merge's commits, Glue jobs
and their runs (CreateJob, GetJob, GetJobRuns, StartJobRun)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from cdclake_merge.dispatch import (
    Decision,
    dispatch,
    run_in_progress,
    sizing_of,
    start_runs,
    target_from_job,
)
from cdclake_merge.failures import recent_runs
from cdclake_merge.storage import S3FileSystem
from tests.dispatch.dispatch_helpers import (
    AGE_STEP_SECONDS,
    DATABASE,
    LAKE,
    REGION,
    World,
    changes_of,
    commit_everything_listed,
    commit_legacy,
    commit_standalone,
    create_job,
    create_mor_job,
    create_sized_job,
    hold_runs,
    job_name,
    mark_catalog_unsynced,
    put_change_bytes,
    put_change_file,
    write_delta_commits,
)

pytestmark = pytest.mark.moto

ORDERS, CUSTOMERS, ITEMS = "public.orders", "public.customers", "public.items"
PAYMENTS, REFUNDS = "public.payments", "public.refunds"


def _dispatch(world: World, *tables: str, budget: int = 10) -> dict[str, Decision]:
    targets = [target_from_job(world.glue, create_job(world, t)) for t in tables]
    decisions = dispatch(targets, fs=S3FileSystem(world.s3), glue=world.glue, budget=budget)
    return {d.table: d for d in decisions}


def _runs(world: World, table: str) -> list[dict[str, object]]:
    return list(world.glue.get_job_runs(JobName=job_name(table))["JobRuns"])


def test_dispatch_nothing_pending_starts_nothing(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    decision = _dispatch(world, ORDERS)[ORDERS]
    assert (decision.start, decision.files_pending, decision.reason) == (
        False,
        (),
        "no change files wait",
    )
    assert _runs(world, ORDERS) == []


def test_dispatch_files_after_the_commit_start_the_job(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    waiting = put_change_file(world, ORDERS, 60)
    decision = _dispatch(world, ORDERS)[ORDERS]
    assert decision.start and decision.files_pending == (waiting,)
    (run,) = _runs(world, ORDERS)
    assert run["Id"] == decision.run_id


def test_dispatch_table_without_commit_starts_with_every_file(world: World) -> None:
    files = [put_change_file(world, ORDERS, 0), put_change_file(world, ORDERS, 0, partition=1)]
    decision = _dispatch(world, ORDERS)[ORDERS]
    assert decision.start and sorted(decision.files_pending) == sorted(files)


def test_dispatch_run_in_progress_starts_nothing(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    with hold_runs():
        create_job(world, ORDERS)
        world.glue.start_job_run(JobName=job_name(ORDERS))
        decision = _dispatch(world, ORDERS)[ORDERS]
        assert not decision.start and decision.reason == "a run is in progress (STARTING)"
        assert len(_runs(world, ORDERS)) == 1


def test_dispatch_budget_starts_oldest_waiting_first(world: World) -> None:
    for table in (ORDERS, CUSTOMERS, ITEMS):  # oldest first; not the names' order
        put_change_file(world, table, 0)
        time.sleep(AGE_STEP_SECONDS)
    decisions = _dispatch(world, CUSTOMERS, ITEMS, ORDERS, budget=2)
    started = {t for t, d in decisions.items() if d.start}
    assert started == {ORDERS, CUSTOMERS}
    assert "budget of 2" in decisions[ITEMS].reason and _runs(world, ITEMS) == []


def test_dispatch_budget_counts_runs_in_progress(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    put_change_file(world, CUSTOMERS, 0)
    with hold_runs():
        create_job(world, ORDERS)
        world.glue.start_job_run(JobName=job_name(ORDERS))
        decisions = _dispatch(world, ORDERS, CUSTOMERS, budget=1)
    assert not decisions[CUSTOMERS].start and "budget of 1" in decisions[CUSTOMERS].reason


def test_dispatch_more_runs_in_progress_than_budget_starts_nothing(world: World) -> None:
    # Two runs in progress against a budget of 1 (a console rerun, a replay, a lowered budget):
    # the budget is over already, and none of the three waiting tables may start.
    for table in (ORDERS, CUSTOMERS, ITEMS, PAYMENTS, REFUNDS):
        put_change_file(world, table, 0)
    with hold_runs():
        for table in (ORDERS, CUSTOMERS):
            world.glue.start_job_run(JobName=create_job(world, table))
        decisions = _dispatch(world, ORDERS, CUSTOMERS, ITEMS, PAYMENTS, REFUNDS, budget=1)
    assert [t for t, d in decisions.items() if d.start] == []
    assert all(_runs(world, t) == [] for t in (ITEMS, PAYMENTS, REFUNDS))


def test_run_in_progress_waiting_run_counts() -> None:
    # moto's runs never wait: botocore's Stubber answers GetJobRuns with Glue's own model.
    import boto3
    from botocore.stub import Stubber

    glue = boto3.client("glue", region_name=REGION)
    job = job_name(ORDERS)
    with Stubber(glue) as stub:
        runs = [{"Id": "jr_2", "JobRunState": "WAITING"}, {"Id": "jr_1", "JobRunState": "FAILED"}]
        stub.add_response("get_job_runs", {"JobRuns": runs}, {"JobName": job, "MaxResults": 25})
        assert run_in_progress(recent_runs(glue, job)) == "WAITING"


def test_dispatch_start_refused_by_glue_fails_the_table(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    targets = [target_from_job(world.glue, create_job(world, ORDERS))]
    fs = S3FileSystem(world.s3)
    decided = dispatch(targets, fs=fs, glue=world.glue, budget=1, dry_run=True)
    with hold_runs():
        # A run started between the decision and its start (another turn, the console):
        # the job's MaxConcurrentRuns of 1 makes Glue refuse the dispatcher's start.
        world.glue.start_job_run(JobName=job_name(ORDERS))
        (decision,) = start_runs(world.glue, decided)
    assert decision.failed and not decision.start and decision.run_id is None
    assert decision.reason.startswith("not started: ") and "ConcurrentRunsExceeded" in (
        decision.reason
    )


def test_dispatch_dry_run_starts_nothing(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    targets = [target_from_job(world.glue, create_job(world, ORDERS))]
    (decision,) = dispatch(
        targets, fs=S3FileSystem(world.s3), glue=world.glue, budget=1, dry_run=True
    )
    assert decision.start and decision.run_id is None and _runs(world, ORDERS) == []


def test_dispatch_unreadable_table_fails_alone(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    world.s3.put_object(  # a Hudi table the merge did not write: its commit names no checkpoint
        Bucket="cdclake-dev-lake",
        Key="warehouse/cdclake_dev.db/public_customers/.hoodie/20260101000000000.commit",
        Body=b"{}",
    )
    decisions = _dispatch(world, ORDERS, CUSTOMERS)
    assert decisions[ORDERS].start
    assert decisions[CUSTOMERS].failed and "did not write" in decisions[CUSTOMERS].reason


def test_dispatch_standalone_checkpoint_only_later_files_wait(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    commit_standalone(world, ORDERS)  # applied, though the table has no commit yet
    waiting = put_change_file(world, ORDERS, 60)
    decision = _dispatch(world, ORDERS)[ORDERS]
    assert decision.start and decision.files_pending == (waiting,)


def test_dispatch_old_checkpoint_naming_its_files_only_others_wait(world: World) -> None:
    applied = put_change_file(world, ORDERS, 0)
    commit_legacy(world, ORDERS, [applied.removeprefix(changes_of(ORDERS))])
    waiting = put_change_file(world, ORDERS, 60)
    decision = _dispatch(world, ORDERS)[ORDERS]
    assert decision.start and decision.files_pending == (waiting,)


def test_dispatch_commit_missing_from_catalog_starts_without_files(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS, version=1)
    mark_catalog_unsynced(world, ORDERS, version=1)  # the commit of v1 did not finish its sync
    decision = _dispatch(world, ORDERS)[ORDERS]
    assert decision.start and decision.files_pending == ()
    assert decision.reason == "the last commit is not registered in the catalog yet"


def test_dispatch_marker_of_an_uncommitted_version_starts_nothing(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS, version=1)
    mark_catalog_unsynced(world, ORDERS, version=2)  # a run killed before its commit
    assert not _dispatch(world, ORDERS)[ORDERS].start


def test_dispatch_standalone_checkpoint_with_a_marker_starts_nothing(world: World) -> None:
    # No table, so no commit a marker could name (one left by a table deleted by hand).
    put_change_file(world, ORDERS, 0)
    commit_standalone(world, ORDERS, version=1)
    mark_catalog_unsynced(world, ORDERS, version=1)
    assert not _dispatch(world, ORDERS)[ORDERS].start


def test_dispatch_commit_missing_from_catalog_goes_before_waiting_files(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS, version=1)
    mark_catalog_unsynced(world, ORDERS, version=1)
    put_change_file(world, CUSTOMERS, 0)
    decisions = _dispatch(world, CUSTOMERS, ORDERS, budget=1)
    assert decisions[ORDERS].start and not decisions[CUSTOMERS].start


# --- right-sized runs: each run's workers from the bytes waiting, within the job's bounds ------


def _sized_dispatch(world: World, *sizes: int, **bounds: Any) -> Decision:
    """ORDERS with files of ``sizes`` bytes waiting, its job bounded by ``bounds``, dispatched."""
    for offset, size in enumerate(sizes):
        put_change_bytes(world, ORDERS, offset, size)
    target = target_from_job(world.glue, create_sized_job(world, ORDERS, **bounds))
    (decision,) = dispatch([target], fs=S3FileSystem(world.s3), glue=world.glue, budget=1)
    return decision


def _run_workers(world: World, decision: Decision) -> tuple[object, object]:
    run = world.glue.get_job_run(JobName=job_name(ORDERS), RunId=decision.run_id)["JobRun"]
    return run.get("WorkerType"), run.get("NumberOfWorkers")


def test_dispatch_small_backlog_starts_with_min_workers(world: World) -> None:
    decision = _sized_dispatch(world, 100, min_workers=2, max_workers=6, bytes_per_executor=1000)
    assert decision.workers == 2
    assert _run_workers(world, decision) == ("G.1X", 2)


def test_dispatch_large_backlog_starts_with_max_workers(world: World) -> None:
    decision = _sized_dispatch(
        world, 4000, 4000, 4000, min_workers=2, max_workers=6, bytes_per_executor=1000
    )
    assert decision.workers == 6
    assert _run_workers(world, decision) == ("G.1X", 6)


def test_dispatch_backlog_between_bounds_gets_an_executor_per_share_and_a_driver(
    world: World,
) -> None:
    # 2,500 bytes at 1,000 an executor: 3 executors and the driver.
    decision = _sized_dispatch(
        world, 1500, 1000, min_workers=2, max_workers=10, bytes_per_executor=1000
    )
    assert _run_workers(world, decision) == ("G.1X", 4)


def test_dispatch_byte_cap_bounds_the_workers(world: World) -> None:
    # The run applies 2,000 of the 9,000 bytes waiting: 2 executors and the driver.
    decision = _sized_dispatch(
        world,
        3000,
        3000,
        3000,
        min_workers=2,
        max_workers=10,
        bytes_per_executor=1000,
        max_bytes_per_run=2000,
    )
    assert _run_workers(world, decision) == ("G.1X", 3)


def test_dispatch_min_workers_raise_a_small_run(world: World) -> None:
    decision = _sized_dispatch(world, 100, min_workers=4, max_workers=6, bytes_per_executor=1000)
    assert _run_workers(world, decision) == ("G.1X", 4)


def test_dispatch_job_without_bounds_starts_with_its_own_workers(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    decision = _dispatch(world, ORDERS)[ORDERS]
    assert decision.start and decision.workers is None
    run = world.glue.get_job_run(JobName=job_name(ORDERS), RunId=decision.run_id)["JobRun"]
    assert "NumberOfWorkers" not in run


def test_dispatch_decision_json_reports_the_workers(world: World) -> None:
    decision = _sized_dispatch(world, 2500, min_workers=2, max_workers=10, bytes_per_executor=1000)
    assert decision.as_json(time.time())["workers"] == 4


def test_sizing_of_bound_not_a_number_names_job_and_argument(world: World) -> None:
    name = create_sized_job(world, ORDERS, min_workers=2, max_workers=4, bytes_per_executor=1)
    job = world.glue.get_job(JobName=name)["Job"]
    job["DefaultArguments"]["--dispatch_min_workers"] = "two"
    with pytest.raises(LookupError) as excinfo:
        sizing_of(job)
    assert str(excinfo.value) == (
        f"Glue job {name}: --dispatch_min_workers must be a positive whole number: 'two'"
    )


def _mor_dispatch(
    world: World, table: str, delta_commits: int, *extra: str, compacted: bool = True
) -> Decision:
    """A MERGE_ON_READ table with ``delta_commits`` after its last compaction (``compacted``
    False: delta commits alone, a table that never compacted) and 100 bytes waiting, its job's
    compaction budget 3 MiB (3 executors' worth), dispatched."""
    put_change_bytes(world, table, 0, 100)
    commit_everything_listed(world, table)
    write_delta_commits(world, table, delta_commits)
    timeline = f"warehouse/{DATABASE}.db/{table.replace('.', '_')}/.hoodie"
    if not compacted:  # the delta commits name the checkpoint as the commit did
        (commit,) = [
            o["Key"]
            for o in world.s3.list_objects_v2(Bucket=LAKE, Prefix=f"{timeline}/")["Contents"]
            if o["Key"].endswith(".commit")
        ]
        world.s3.delete_object(Bucket=LAKE, Key=commit)
    for name in extra:  # more timeline files, by name
        world.s3.put_object(Bucket=LAKE, Key=f"{timeline}/{name}", Body=b"")
    put_change_bytes(world, table, 1, 100)
    target = target_from_job(world.glue, create_mor_job(world, table, compaction_io_mb=3))
    (decision,) = dispatch([target], fs=S3FileSystem(world.s3), glue=world.glue, budget=1)
    return decision


def test_dispatch_compaction_due_starts_more_workers_than_the_same_bytes_without(
    world: World,
) -> None:
    due = _mor_dispatch(world, ORDERS, 4)  # this run's delta commit is the fifth
    not_due = _mor_dispatch(world, CUSTOMERS, 3)
    assert (due.workers, not_due.workers) == (5, 2)


def test_dispatch_compaction_completed_after_the_delta_commits_is_not_due(world: World) -> None:
    decision = _mor_dispatch(world, ORDERS, 4, "29991231000000000.commit")
    assert decision.workers == 2


def test_dispatch_compaction_planned_and_left_is_due(world: World) -> None:
    decision = _mor_dispatch(world, ORDERS, 0, "29991231000000000.compaction.requested")
    assert decision.workers == 5


def test_dispatch_compaction_never_compacted_table_due_at_its_fifth_delta_commit(
    world: World,
) -> None:
    # A MERGE_ON_READ table's first commits are delta commits: no compaction commit to count from.
    decision = _mor_dispatch(world, ORDERS, 4, compacted=False)
    assert (decision.reason, decision.workers) == ("1 change files wait", 5)


def test_dispatch_compaction_planned_and_completed_is_not_due(world: World) -> None:
    # The plan stays in the timeline beside its commit: a compaction done is not one left.
    instant = "29991231000000000"
    decision = _mor_dispatch(
        world, ORDERS, 0, f"{instant}.compaction.requested", f"{instant}.commit"
    )
    assert decision.workers == 2
