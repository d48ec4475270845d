"""A table whose stored column changed type in a way Hudi cannot take in place (issue #49): the
merge's failure line names the change, and the dispatcher holds the table as its
``schema_changes`` policy says (``stop``: parked; ``rebuild``: it needs a rebuild), whatever
change files arrive after it. Failed runs are Glue's records on moto; the lines are the
merge's own (cdclake_merge.schema.NeedsRebuild, as glue_jobs/merge_job.py prints them)."""

from __future__ import annotations

import time

import pytest

from cdclake_merge.dispatch import dispatch, target_from_job
from cdclake_merge.failures import Run, failures_of, rebuild_change
from cdclake_merge.schema import NeedsRebuild, unify
from cdclake_merge.storage import S3FileSystem
from tests.dispatch.dispatch_helpers import (
    AGE_STEP_SECONDS,
    BAD_FRACTION_ERROR,
    ORDERS,
    SIGNAL_FUNCTION,
    World,
    _define_job,
    create_job,
    end_run,
    failed_on_type_change,
    hold_runs,
    job_name,
    needs_rebuild_line,
    orders_status,
    orders_turn,
    put_change_file,
    when,
    write_generations_state,
)

CUSTOMERS = "public.customers"
TABLE_TYPE_CHANGE = "table type COPY_ON_WRITE -> MERGE_ON_READ"


@pytest.mark.parametrize(
    ("stored", "incoming"),
    [("decimal(10,2)", "decimal(14,4)"), ("int", "double"), ("string", "int")],
)
def test_failures_of_stored_type_change_needs_rebuild_naming_column_and_types(
    stored: str, incoming: str
) -> None:
    line = needs_rebuild_line(stored, incoming)
    failures = failures_of([Run("FAILED", 100.0, 160.0, line)])
    assert failures is not None and failures.kind == "NeedsRebuild"
    assert rebuild_change(line) == f"amount {stored} -> {incoming}"


def test_unify_run_with_old_and_new_type_of_stored_column_needs_rebuild_from_stored() -> None:
    # A run holding rows from before and after the ALTER: the stored type is named.
    with pytest.raises(NeedsRebuild) as refused:
        unify(
            ORDERS,
            [("amount", "decimal(10,2)")],
            [("amount", "decimal(10,2)")],
            [("amount", "string")],
        )
    assert (refused.value.stored, refused.value.incoming) == ("decimal(10,2)", "string")


def test_dispatch_needs_rebuild_with_stop_parks_naming_the_change(world: World) -> None:
    ended = failed_on_type_change(world, "stop")
    decision = orders_turn(world)
    assert (decision.start, decision.reason) == (
        False,
        f"parked: needs rebuild: amount decimal(10,2) -> decimal(14,4) at {when(ended)} "
        "(schema_changes: stop); rebuild with cdclake rebuild --env dev --table public.orders, "
        "or resume with cdclake dispatch --env dev --resume public.orders",
    )


def test_dispatch_needs_rebuild_with_rebuild_says_so_and_names_the_command(world: World) -> None:
    ended = failed_on_type_change(world, None)
    decision = orders_turn(world)
    assert (decision.start, decision.reason) == (
        False,
        f"needs rebuild: amount decimal(10,2) -> decimal(14,4) (since {when(ended)}; the live "
        "table keeps serving its last commit): run cdclake rebuild --env dev --table "
        "public.orders, which signals the snapshot; the dispatcher runs the rebuild after it",
    )
    assert decision.as_json(time.time())["reason"] == decision.reason


def test_dispatch_needs_rebuild_job_that_signals_starts_a_rebuild_run(world: World) -> None:
    # Its first step begins the rebuild and signals the snapshot through the bootstrap function.
    failed_on_type_change(world, None, signals=True)
    decision = orders_turn(world)
    assert (decision.start, decision.mode, decision.reason) == (
        True,
        "rebuild",
        "needs rebuild: amount decimal(10,2) -> decimal(14,4): a rebuild run",
    )
    run = world.glue.get_job_run(JobName=job_name(ORDERS), RunId=decision.run_id)["JobRun"]
    assert run["Arguments"]["--mode"] == "rebuild"


@pytest.mark.parametrize("policy", ["stop", None])
def test_dispatch_needs_rebuild_history_table_parks_starting_no_rebuild_run(
    world: World, policy: str | None
) -> None:
    # A type change is not rebuilt (cdclake_merge.rebuild.HISTORY_REFUSED): a rebuild run
    # would fail each turn, billed, and the merge runs between would fail on the change again.
    ended = failed_on_type_change(world, policy, signals=True, history=True)
    decision = orders_turn(world)
    assert (decision.start, decision.reason) == (
        False,
        f"parked: needs rebuild: amount decimal(10,2) -> decimal(14,4) at {when(ended)}; the "
        "table keeps its history (history: true), which a rebuild carries only through a change "
        "of its table type, partitioning or record index size (issue #51): see "
        'docs/merge-job.md "Schema changes"; resume with cdclake dispatch --env dev '
        "--resume public.orders",
    )


@pytest.mark.parametrize("signals", [True, False])
def test_dispatch_needs_rebuild_history_table_layout_change_starts_a_copy_rebuild_run(
    world: World, signals: bool
) -> None:
    # Rebuilt as a copy: no snapshot to signal, so a job without a signal function starts too.
    failed_on_type_change(world, None, signals=signals, history=True, layout=(TABLE_TYPE_CHANGE,))
    decision = orders_turn(world)
    assert (decision.start, decision.mode, decision.reason) == (
        True,
        "rebuild",
        f"needs rebuild: {TABLE_TYPE_CHANGE}: a rebuild run",
    )


def test_dispatch_copy_rebuild_meeting_a_type_change_parks_not_rerun_each_turn(
    world: World,
) -> None:
    # A copy keeps the live types: its runs would fail on the type change every turn, billed.
    failed_on_type_change(world, None, signals=True, history=True)
    write_generations_state(world, ORDERS, live=1, building=2, start={}, copy=True)
    decision = orders_turn(world)
    assert not decision.start
    assert decision.reason.startswith("parked: needs rebuild: amount decimal(10,2) -> ")


def test_dispatch_needs_rebuild_history_table_key_change_parks(world: World) -> None:
    # A copy keeps the rows' keys: a key change with a layout change it takes still parks.
    change = ("record key [id] -> [id, region]", TABLE_TYPE_CHANGE)
    failed_on_type_change(world, None, signals=True, history=True, layout=change)
    decision = orders_turn(world)
    assert not decision.start
    assert decision.reason.startswith(f"parked: needs rebuild: {'; '.join(change)} at ")


def test_dispatch_needs_rebuild_history_table_layout_change_with_stop_parks_naming_rebuild(
    world: World,
) -> None:
    failed_on_type_change(world, "stop", history=True, layout=(TABLE_TYPE_CHANGE,))
    decision = orders_turn(world)
    assert not decision.start
    assert "(schema_changes: stop); rebuild with cdclake rebuild --env dev" in decision.reason


@pytest.mark.parametrize(
    ("error", "held"),
    [("timeout", "backoff: 1 failures"), (BAD_FRACTION_ERROR, "parked: TooManyBadRecords")],
)
def test_dispatch_job_that_signals_other_failure_starts_no_rebuild_run(
    world: World, error: str, held: str
) -> None:
    # Only a failure that needs a rebuild begins one; any other holds the table as it did.
    _define_job(world, ORDERS, {"--signal_function": SIGNAL_FUNCTION})
    put_change_file(world, ORDERS, 0)
    started = time.time()
    end_run(world, ORDERS, "FAILED", started=started, ended=started + 0.001, error=error)
    decision = orders_turn(world)
    assert (decision.start, decision.mode) == (False, "merge")
    assert decision.reason.startswith(held), decision.reason


def test_dispatch_needs_rebuild_job_that_signals_with_stop_parks(world: World) -> None:
    failed_on_type_change(world, "stop", signals=True)
    decision = orders_turn(world)
    assert not decision.start and decision.reason.startswith("parked: needs rebuild: amount")


def test_dispatch_needs_rebuild_job_that_signals_runs_within_the_healthy_budget(
    world: World,
) -> None:
    # Not a retry: the retries' share of the budget, taken by another table's, holds it not.
    failed_on_type_change(world, None, signals=True)
    create_job(world, CUSTOMERS)
    put_change_file(world, CUSTOMERS, 0)
    started = time.time()
    end_run(world, CUSTOMERS, "FAILED", started=started, ended=started + 0.001, error="timeout")
    targets = [target_from_job(world.glue, create_job(world, t)) for t in (ORDERS, CUSTOMERS)]
    with hold_runs():
        world.glue.start_job_run(JobName=job_name(CUSTOMERS))
        fs = S3FileSystem(world.s3)
        orders, _ = dispatch(targets, fs=fs, glue=world.glue, budget=2, retry_share=0.0)
    assert orders.start and orders.mode == "rebuild", orders.reason


def test_target_from_job_signal_function_argument_means_it_signals(world: World) -> None:
    failed_on_type_change(world, None, signals=True)
    assert target_from_job(world.glue, create_job(world, ORDERS)).signals


@pytest.mark.parametrize("policy", ["stop", None])
def test_dispatch_needs_rebuild_newer_change_file_starts_no_run(
    world: World, policy: str | None
) -> None:
    # The next run would read the same waiting files first and fail the same way.
    failed_on_type_change(world, policy)
    time.sleep(AGE_STEP_SECONDS)  # S3 keeps LastModified to the second
    put_change_file(world, ORDERS, 60)
    decision = orders_turn(world)
    assert not decision.start and "needs rebuild: amount" in decision.reason


def test_target_from_job_schema_policy_from_config_reaches_the_dispatcher(world: World) -> None:
    from environment.config import load_config

    config = load_config("dev")
    stop = config.lake_table(ORDERS).model_copy(update={"schema_changes": "stop"})
    arguments = {f"--{k}": str(v) for k, v in config.lake.dispatch_of(stop).items()}
    _define_job(world, ORDERS, arguments)
    assert target_from_job(world.glue, create_job(world, ORDERS)).schema_changes == "stop"


def test_target_from_job_history_from_config_reaches_the_dispatcher(world: World) -> None:
    from environment.config import load_config

    config = load_config("dev")
    kept = config.lake_table(ORDERS).model_copy(update={"history": True})
    arguments = {f"--{k}": str(v) for k, v in config.lake.services_of(kept).items()}
    _define_job(world, ORDERS, arguments)
    assert target_from_job(world.glue, create_job(world, ORDERS)).history is True


def test_target_from_job_without_history_argument_keeps_none(world: World) -> None:
    failed_on_type_change(world, None, signals=True)
    assert target_from_job(world.glue, create_job(world, ORDERS)).history is False


def test_failures_of_config_the_stored_table_lacks_needs_rebuild_naming_it() -> None:
    from cdclake_merge.layout import LayoutNeedsRebuild

    refused = LayoutNeedsRebuild(
        "cdclake_dev.public_orders", ["table type COPY_ON_WRITE -> MERGE_ON_READ"]
    )
    line = f"RunFailed: cdclake merge failed: {refused}"
    failures = failures_of([Run("FAILED", 100.0, 160.0, line)])
    assert failures is not None and failures.kind == "NeedsRebuild"
    assert rebuild_change(line) == "table type COPY_ON_WRITE -> MERGE_ON_READ"


def test_table_status_last_run_needing_rebuild_warns_naming_change_and_command(
    world: World,
) -> None:
    failed_on_type_change(world, None)
    row = orders_status(world)
    assert row["warnings"] == [
        "needs rebuild: amount decimal(10,2) -> decimal(14,4) (its last run failed): "
        "run cdclake rebuild --env dev --table public.orders"
    ]


def test_table_status_history_table_needing_rebuild_warns_pointing_at_the_docs(
    world: World,
) -> None:
    # Not the rebuild command, which refuses a type change of a table that keeps its history.
    failed_on_type_change(world, None, history=True)
    row = orders_status(world, history=True)
    assert row["warnings"] == [
        "needs rebuild: amount decimal(10,2) -> decimal(14,4) (its last run failed): the table "
        "keeps its history (history: true), which a rebuild carries only through a change of "
        "its table type, partitioning or record index size (issue #51): "
        'see docs/merge-job.md "Schema changes"'
    ]


def test_table_status_history_table_needing_a_copy_rebuild_names_the_command(
    world: World,
) -> None:
    failed_on_type_change(world, None, history=True, layout=(TABLE_TYPE_CHANGE,))
    row = orders_status(world, history=True)
    assert row["warnings"] == [
        f"needs rebuild: {TABLE_TYPE_CHANGE} (its last run failed): run cdclake rebuild --env "
        "dev --table public.orders (a copy: the table keeps its history)"
    ]
