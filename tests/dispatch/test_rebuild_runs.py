"""A table being rebuilt (issue #49): its state object names a generation ``building``, so the
dispatcher starts the table's job with ``--mode rebuild`` each turn it has no run in progress,
and says ``rebuilding (generation n, since …)``; once swapped, what waits is the new
generation's. A table needing one is begun by a rebuild run (tests/dispatch/test_schema_policy.py),
which signals through the bootstrap function, or by ``cdclake rebuild`` (tests/ops, tests/local)."""

from __future__ import annotations

import time

from cdclake_merge.generations import Generations, live_generation
from cdclake_merge.storage import S3FileSystem
from tests.dispatch.dispatch_helpers import (
    DATABASE,
    ORDERS,
    WAREHOUSE,
    World,
    commit_everything_listed,
    create_job,
    failed_on_type_change,
    hold_runs,
    job_name,
    orders_status,
    orders_turn,
    put_change_file,
    write_generations_state,
)

BEGAN = "2026-11-28T17:40:05.123456+00:00"
BUILDING = {"live": 1, "building": 2, "start": {}, "began_at": BEGAN, "snapshot_id": "s-1"}
SAYS = "rebuilding (generation 2, since 2026-11-28T17:40:05)"


def test_dispatch_rebuilding_after_needs_rebuild_starts_a_rebuild_run(world: World) -> None:
    failed_on_type_change(world, None)
    write_generations_state(world, ORDERS, **BUILDING)
    decision = orders_turn(world)
    assert (decision.start, decision.mode, decision.reason) == (
        True,
        "rebuild",
        f"{SAYS}: a rebuild run",
    )


def test_dispatch_rebuilding_run_started_with_mode_rebuild(world: World) -> None:
    failed_on_type_change(world, None)
    write_generations_state(world, ORDERS, **BUILDING)
    decision = orders_turn(world)
    run = world.glue.get_job_run(JobName=job_name(ORDERS), RunId=decision.run_id)["JobRun"]
    assert run["Arguments"]["--mode"] == "rebuild"


def test_dispatch_rebuilding_nothing_waiting_for_live_table_still_starts(world: World) -> None:
    # The rebuild's input (snapshot reads, its end) is not what waits for generation 1.
    create_job(world, ORDERS)
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    write_generations_state(world, ORDERS, **BUILDING)
    decision = orders_turn(world)
    assert decision.start and decision.mode == "rebuild"


def test_dispatch_rebuilding_run_in_progress_says_both(world: World) -> None:
    create_job(world, ORDERS)
    write_generations_state(world, ORDERS, **BUILDING)
    with hold_runs():
        world.glue.start_job_run(JobName=job_name(ORDERS), Arguments={"--mode": "rebuild"})
        decision = orders_turn(world)
    assert (decision.start, decision.reason) == (
        False,
        f"a run is in progress (STARTING); {SAYS}",
    )


def test_dispatch_rebuilding_json_names_the_mode(world: World) -> None:
    create_job(world, ORDERS)
    write_generations_state(world, ORDERS, **BUILDING)
    shown = orders_turn(world).as_json(time.time())
    assert (shown["mode"], shown["reason"]) == ("rebuild", f"{SAYS}: a rebuild run")


def test_dispatch_no_rebuild_merge_run_without_mode_argument(world: World) -> None:
    create_job(world, ORDERS)
    put_change_file(world, ORDERS, 0)
    decision = orders_turn(world)
    run = world.glue.get_job_run(JobName=job_name(ORDERS), RunId=decision.run_id)["JobRun"]
    assert decision.mode == "merge" and "--mode" not in run.get("Arguments", {})


def test_dispatch_after_swap_pending_read_from_the_live_generation(world: World) -> None:
    # Generation 1 never applied the file; generation 2, live since the swap, did.
    create_job(world, ORDERS)
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS, generation=2)
    write_generations_state(world, ORDERS, live=2, retired=1)
    decision = orders_turn(world)
    assert (decision.start, decision.reason) == (False, "no change files wait")


def test_live_generation_after_swap_names_the_generation_folder(world: World) -> None:
    write_generations_state(world, ORDERS, live=3)
    state, live = live_generation(S3FileSystem(world.s3), WAREHOUSE, f"{DATABASE}.public_orders")
    assert (state, live) == (Generations(live=3), f"{DATABASE}.public_orders__g3")


def test_table_status_rebuilding_says_generation_and_since(world: World) -> None:
    failed_on_type_change(world, None)
    write_generations_state(world, ORDERS, **BUILDING)
    assert orders_status(world)["rebuilding"] == SAYS


def test_table_status_rebuilding_drops_the_needs_rebuild_warning(world: World) -> None:
    # The failed run asked for the rebuild now in progress.
    failed_on_type_change(world, None)
    write_generations_state(world, ORDERS, **BUILDING)
    assert orders_status(world)["warnings"] == []
