"""The dispatcher Lambda's handler on moto: the environment's tagged merge jobs found, Glue runs
started."""

from __future__ import annotations

import json
import time

import pytest

from lambdas.dispatcher.handler import DispatchFailed, handler
from tests.dispatch.dispatch_helpers import (
    BAD_FRACTION_ERROR,
    JOB_TAGS,
    REGION,
    FakeContext,
    World,
    create_job,
    create_objective_job,
    create_sized_job,
    end_run,
    handler_environment,
    handler_log,
    job_name,
    put_change_bytes,
    put_change_file,
    write_generations_state,
)

pytestmark = pytest.mark.moto

# What an EventBridge schedule sends: nothing the handler needs.
SCHEDULED = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
# More than a ListJobs page and than a schedule's input could name (8,192 characters).
MANY_TABLES = 320


@pytest.fixture
def world(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    """The lake, with the dispatcher Lambda's environment."""
    handler_environment(monkeypatch, budget=1, environment="dev")
    return world


def _started(world: World, table: str) -> int:
    return len(world.glue.get_job_runs(JobName=job_name(table))["JobRuns"])


def test_dispatcher_handler_starts_within_the_budget(world: World) -> None:
    for table in ("public.orders", "public.customers"):
        create_job(world, table)
        put_change_file(world, table, 0)
    answer = handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    assert answer == {"jobs": 2, "started": 1, "pending": 2}
    assert _started(world, "public.orders") + _started(world, "public.customers") == 1


def test_dispatcher_handler_unreadable_job_fails_after_the_others(world: World) -> None:
    create_job(world, "public.orders")
    put_change_file(world, "public.orders", 0)
    world.glue.create_job(  # tagged as a merge job, but without the merge's arguments
        Name=job_name("public.odd"),
        Role="arn:aws:iam::123456789012:role/merge",
        Command={"Name": "glueetl", "ScriptLocation": "s3://assets/other.py"},
        Tags=JOB_TAGS,
    )
    with pytest.raises(DispatchFailed, match="cdclake-dev-merge-public-odd"):
        handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    assert _started(world, "public.orders") == 1


def test_dispatcher_handler_untagged_job_is_not_dispatched(world: World) -> None:
    create_job(world, "public.orders")
    put_change_file(world, "public.orders", 0)
    world.glue.untag_resource(
        ResourceArn=f"arn:aws:glue:{REGION}:123456789012:job/{job_name('public.orders')}",
        TagsToRemove=list(JOB_TAGS),
    )
    answer = handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    assert answer == {"jobs": 0, "started": 0, "pending": 0}
    assert _started(world, "public.orders") == 0


def test_dispatcher_handler_many_tables_are_all_found(world: World) -> None:
    tables = [f"public.t{i:03d}" for i in range(MANY_TABLES)]
    for table in tables:
        create_job(world, table)
    put_change_file(world, tables[-1], 0)
    answer = handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    assert answer == {"jobs": MANY_TABLES, "started": 1, "pending": 1}
    assert _started(world, tables[-1]) == 1


def test_dispatcher_handler_starts_the_run_sized_to_what_waits(world: World) -> None:
    job = create_sized_job(
        world, "public.orders", min_workers=2, max_workers=8, bytes_per_executor=1000
    )
    put_change_bytes(world, "public.orders", 0, 3000)  # 3 executors and the driver
    handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    (run,) = world.glue.get_job_runs(JobName=job)["JobRuns"]
    assert (run["WorkerType"], run["NumberOfWorkers"]) == ("G.1X", 4)


def test_dispatcher_handler_zero_sizing_bound_fails_that_job_alone(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_CONCURRENT_RUNS", "2")  # both tables are chosen to start
    odd = create_sized_job(world, "public.odd", min_workers=2, max_workers=4, bytes_per_executor=0)
    put_change_bytes(world, "public.odd", 0, 100)
    create_job(world, "public.orders")
    put_change_file(world, "public.orders", 0)
    with pytest.raises(DispatchFailed, match=f"{odd}: .*--dispatch_bytes_per_executor"):
        handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    assert (_started(world, "public.orders"), _started(world, "public.odd")) == (1, 0)


def _create_odd_job(world: World) -> str:
    """A job tagged as a merge job, but without the merge's arguments."""
    name = job_name("public.odd")
    world.glue.create_job(
        Name=name,
        Role="arn:aws:iam::123456789012:role/merge",
        Command={"Name": "glueetl", "ScriptLocation": "s3://assets/other.py"},
        Tags=JOB_TAGS,
    )
    return name


def test_dispatcher_handler_failure_message_counts_and_names_the_first(world: World) -> None:
    create_job(world, "public.orders")
    odd = _create_odd_job(world)
    with pytest.raises(DispatchFailed) as failed:
        handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    assert str(failed.value) == (
        f"1 of 2 jobs: {odd}: Glue job {odd} has no --table, --changes_path, --warehouse_path,"
        " --database: not a cdclake merge job"
    )


def test_dispatcher_handler_logs_each_decision_with_its_fields(world: World) -> None:
    job = create_sized_job(
        world, "public.orders", min_workers=2, max_workers=8, bytes_per_executor=1000
    )
    put_change_bytes(world, "public.orders", 0, 3000)
    with handler_log() as log:
        handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    (started,) = [json.loads(line) for line in log.getvalue().splitlines()]
    (run,) = world.glue.get_job_runs(JobName=job)["JobRuns"]
    assert {k: started.get(k) for k in ("level", "message", "table", "job", "start")} == {
        "level": "INFO",
        "message": "merge started",
        "table": "public.orders",
        "job": job,
        "start": True,
    }
    assert (started["reason"], started["files_pending"], started["run_id"]) == (
        "1 change files wait",
        1,
        run["Id"],
    )
    assert started["workers"] == 4 and isinstance(started["watermark"], float)


def test_dispatcher_handler_logs_a_table_not_started(world: World) -> None:
    create_job(world, "public.orders")  # nothing waits
    with handler_log() as log:
        handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    (line,) = [json.loads(line) for line in log.getvalue().splitlines()]
    assert (line["message"], line["start"], line["reason"]) == (
        "merge not started",
        False,
        "no change files wait",
    )


def test_dispatcher_handler_logs_each_job_not_dispatched_as_an_error(world: World) -> None:
    odd = _create_odd_job(world)
    with handler_log() as log, pytest.raises(DispatchFailed):
        handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    (line,) = [json.loads(line) for line in log.getvalue().splitlines()]
    assert (line["level"], line["message"]) == ("ERROR", "merge job not dispatched")
    assert line["detail"].startswith(f"{odd}: Glue job {odd} has no --table")


def test_dispatcher_handler_parks_and_backs_off_failing_tables_while_a_healthy_one_starts(
    world: World,
) -> None:
    for table in ("public.orders", "public.customers", "public.items"):
        create_job(world, table)
        put_change_file(world, table, 0)
    now = time.time()
    end_run(world, "public.orders", "FAILED", started=now, ended=now, error=BAD_FRACTION_ERROR)
    end_run(world, "public.customers", "TIMEOUT", ended=now)  # backs off a turn (900 s)
    with handler_log() as log:
        answer = handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    reasons = {
        line["table"]: line["reason"].split(" at ")[0].split(",")[0]
        for line in map(json.loads, log.getvalue().splitlines())
    }
    assert (answer["started"], reasons) == (
        1,
        {
            "public.orders": "parked: TooManyBadRecords",
            "public.customers": "backoff: 1 failures",
            "public.items": "1 change files wait",
        },
    )


def test_dispatcher_handler_turn_length_from_its_environment_makes_a_table_due(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 5-minute table whose change was just written: with 5-minute turns it cannot wait for
    # the next one (300 - 300 - Glue's 30 s start is already past); with 1-minute turns it
    # could have (due in about 3.5 minutes).
    monkeypatch.setenv("TURN_SECONDS", "300")
    create_objective_job(world, "public.orders", 5)
    put_change_file(world, "public.orders", 0)
    answer = handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    assert answer == {"jobs": 1, "started": 1, "pending": 1}


def test_dispatcher_handler_logs_a_rebuild_run_with_its_mode(world: World) -> None:
    create_job(world, "public.orders")
    write_generations_state(world, "public.orders", live=1, building=2)
    with handler_log() as log:
        handler(SCHEDULED, FakeContext())  # type: ignore[arg-type]
    (line,) = [json.loads(line) for line in log.getvalue().splitlines()]
    assert (line["message"], line["mode"], line["reason"]) == (
        "merge started",
        "rebuild",
        "rebuilding (generation 2): a rebuild run",
    )
