"""Each table at its own freshness objective (issue 47 item 3): a table starts when its oldest
waiting change would miss its objective after one more turn and an expected run, or when what
waits reaches the run's byte cap; otherwise its reason says when it will be due. Jobs as the
stack defines them from config (tests/dispatch/dispatch_helpers.create_objective_job) on moto;
the turn's time is given (``now``), never waited for."""

from __future__ import annotations

import datetime as dt

import pytest

from cdclake_merge.dispatch import Decision, dispatch, target_from_job
from cdclake_merge.storage import S3FileSystem
from tests.dispatch.dispatch_helpers import (
    World,
    commit_everything_listed,
    create_objective_job,
    create_sized_job,
    job_name,
    mark_catalog_unsynced,
    put_change_bytes,
    put_change_file,
    written_at,
)

FIVE, SIXTY = "public.orders", "public.customers"
TURN = 60.0  # rate(1 minute)
# config/dev.yaml's Glue start (environment.capacity.GLUE_START_SECONDS): with a one-minute
# turn, a 60-minute table whose few bytes wait is due 58.5 minutes after its oldest change.
SIXTY_DUE_AFTER = 3600 - TURN - 30


def _turn(world: World, now: float, *tables: str) -> dict[str, Decision]:
    targets = [target_from_job(world.glue, job_name(t)) for t in tables]
    decisions = dispatch(
        targets,
        fs=S3FileSystem(world.s3),
        glue=world.glue,
        budget=10,
        dry_run=True,
        turn_seconds=TURN,
        environment="dev",
        now=now,
    )
    return {d.table: d for d in decisions}


def _two_tables_waiting(world: World) -> float:
    """Orders at 5 minutes and customers at 60, a change file waiting for each; when the
    older of the two was written."""
    create_objective_job(world, FIVE, 5)
    create_objective_job(world, SIXTY, 60)
    written = [written_at(world, put_change_file(world, t, 0)) for t in (FIVE, SIXTY)]
    return min(written)


def test_dispatch_objective_four_minutes_waiting_starts_the_five_minute_table(
    world: World,
) -> None:
    oldest = _two_tables_waiting(world)
    decided = _turn(world, oldest + 4 * 60, FIVE, SIXTY)
    assert decided[FIVE].start is True
    assert decided[FIVE].reason.startswith("1 change files wait; due since ")


def test_dispatch_objective_four_minutes_waiting_holds_the_sixty_minute_table(
    world: World,
) -> None:
    oldest = _two_tables_waiting(world)
    sixty = _turn(world, oldest + 4 * 60, FIVE, SIXTY)[SIXTY]
    assert sixty.start is False
    prefix, suffix = "waiting: due at ", " (objective 60 min)"
    assert sixty.reason.startswith(prefix) and sixty.reason.endswith(suffix), sixty.reason
    due = dt.datetime.fromisoformat(sixty.reason.removeprefix(prefix).removesuffix(suffix))
    # Shown to the second, rounded down: the expected run is 30 s and a few bytes' worth.
    assert oldest + SIXTY_DUE_AFTER - 1 <= due.timestamp() <= oldest + SIXTY_DUE_AFTER


def test_dispatch_objective_sixty_minute_table_waits_until_58_minutes(world: World) -> None:
    oldest = _two_tables_waiting(world)
    assert _turn(world, oldest + 58 * 60, SIXTY)[SIXTY].start is False


def test_dispatch_objective_sixty_minute_table_starts_at_59_minutes(world: World) -> None:
    oldest = _two_tables_waiting(world)
    decided = _turn(world, oldest + 59 * 60, SIXTY)[SIXTY]
    assert decided.start is True and "(objective 60 min)" in decided.reason


@pytest.mark.parametrize(
    ("objective", "reason"),
    [(True, "1 change files wait; 1000 bytes reach the run's cap"), (False, "1 change files wait")],
)
def test_dispatch_bytes_at_the_cap_start_at_once_the_cap_named_against_an_objective(
    world: World, objective: bool, reason: str
) -> None:
    # Without an objective a table starts whenever work waits: the cap is no reason to give.
    if objective:
        create_objective_job(world, SIXTY, 60, max_bytes_per_run=1000)
    else:
        create_sized_job(
            world,
            SIXTY,
            min_workers=2,
            max_workers=4,
            bytes_per_executor=1000,
            max_bytes_per_run=1000,
        )
    oldest = written_at(world, put_change_bytes(world, SIXTY, 0, 1000))
    decided = _turn(world, oldest + 1, SIXTY)[SIXTY]
    assert (decided.start, decided.reason) == (True, reason)


def test_dispatch_objective_commit_missing_from_catalog_starts_saying_only_that(
    world: World,
) -> None:
    # No file waits, so the objective has nothing to be due by: the registration goes now.
    create_objective_job(world, SIXTY, 60)
    written = written_at(world, put_change_file(world, SIXTY, 0))
    commit_everything_listed(world, SIXTY, version=1)
    mark_catalog_unsynced(world, SIXTY, version=1)
    decided = _turn(world, written + 1, SIXTY)[SIXTY]
    assert decided.start is True
    assert decided.reason == "the last commit is not registered in the catalog yet"


def test_dispatch_objective_bytes_below_the_cap_wait(world: World) -> None:
    create_objective_job(world, SIXTY, 60, max_bytes_per_run=1000)
    oldest = written_at(world, put_change_bytes(world, SIXTY, 0, 999))
    assert _turn(world, oldest + 1, SIXTY)[SIXTY].start is False


def test_sizing_expected_run_glue_start_then_the_bytes_on_its_executors() -> None:
    from cdclake_merge.dispatch import Sizing

    sizing = Sizing("G.1X", 2, 10, 1000, start_seconds=60, executor_bytes_per_second=10)
    # 2,000 bytes: 2 executors beside the driver, each merging 10 bytes a second.
    assert sizing.expected_run_seconds(2000) == 160.0


def test_sizing_expected_run_without_a_rate_is_unknown() -> None:
    from cdclake_merge.dispatch import Sizing

    # A job given the start but not the rate (defined by hand): due whenever work waits.
    sizing = Sizing("G.1X", 2, 10, 1000, start_seconds=60)
    assert sizing.expected_run_seconds(2000) is None
