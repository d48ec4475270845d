"""The dispatcher Lambda's handler on moto: the schedule's input in, Glue runs started."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lambdas.dispatcher.handler import DispatchFailed, handler
from tests.dispatch.dispatch_helpers import (
    REGION,
    FakeContext,
    World,
    create_job,
    create_sized_job,
    job_name,
    lake_on_moto,
    put_change_bytes,
    put_change_file,
)

pytestmark = pytest.mark.moto


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("MAX_CONCURRENT_RUNS", "1")
    monkeypatch.setenv("METRICS_ENVIRONMENT", "dev")
    with lake_on_moto() as created:
        yield created


def _started(world: World, table: str) -> int:
    return len(world.glue.get_job_runs(JobName=job_name(table))["JobRuns"])


def test_dispatcher_handler_starts_within_the_budget(world: World) -> None:
    jobs = [create_job(world, t) for t in ("public.orders", "public.customers")]
    for table in ("public.orders", "public.customers"):
        put_change_file(world, table, 0)
    answer = handler({"jobs": jobs}, FakeContext())  # type: ignore[arg-type]
    assert answer == {"jobs": 2, "started": 1, "pending": 2}
    assert _started(world, "public.orders") + _started(world, "public.customers") == 1


def test_dispatcher_handler_missing_job_fails_after_the_others(world: World) -> None:
    jobs = [create_job(world, "public.orders"), job_name("public.gone")]
    put_change_file(world, "public.orders", 0)
    with pytest.raises(DispatchFailed, match="cdclake-dev-merge-public-gone"):
        handler({"jobs": jobs}, FakeContext())  # type: ignore[arg-type]
    assert _started(world, "public.orders") == 1


def test_dispatcher_handler_event_without_jobs_is_refused(world: World) -> None:
    with pytest.raises(ValueError, match="'jobs' must be a list of Glue job names"):
        handler({"jobs": "cdclake-dev-merge-public-orders"}, FakeContext())  # type: ignore[arg-type]


def test_dispatcher_handler_starts_the_run_sized_to_what_waits(world: World) -> None:
    job = create_sized_job(
        world, "public.orders", min_workers=2, max_workers=8, bytes_per_executor=1000
    )
    put_change_bytes(world, "public.orders", 0, 3000)  # 3 executors and the driver
    handler({"jobs": [job]}, FakeContext())  # type: ignore[arg-type]
    (run,) = world.glue.get_job_runs(JobName=job)["JobRuns"]
    assert (run["WorkerType"], run["NumberOfWorkers"]) == ("G.1X", 4)
