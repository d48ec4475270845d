"""The dispatcher's ``LagSeconds`` on moto (S3, Glue, CloudWatch): every table it can read gets
a datapoint each turn from its watermark; the lag alarm's threshold is read from the template.

A quiet table that is caught up reports 0, and so does a table that never received a change
file (nothing waits); a table whose change files wait while no run applies them reports their
age, and a table the dispatcher could not read reports nothing (its alarm treats missing data
as breaching).
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from cdclake_merge.dispatch import Decision, dispatch, target_from_job
from cdclake_merge.storage import S3FileSystem
from lambdas.dispatcher.handler import DispatchFailed, handler, publish_lag
from tests.dispatch.dispatch_helpers import (
    REGION,
    FakeContext,
    World,
    commit_everything_listed,
    create_job,
    handler_environment,
    hold_runs,
    job_name,
    lag_alarm_threshold,
    lag_dimensions,
    lag_values,
    make_unreadable,
    put_change_file,
)

pytestmark = pytest.mark.moto

# Lake tables of config/dev.yaml, so that their alarms are in the dev template.
ORDERS, CUSTOMERS = "public.orders", "public.customers"
ENVIRONMENT = "dev"


@pytest.fixture
def world(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    """The lake, with the dispatcher Lambda's environment."""
    handler_environment(monkeypatch, budget=4, environment=ENVIRONMENT)
    return world


@pytest.fixture(scope="module")
def dev_operations(synth: Any) -> dict[str, Any]:
    return dict(synth(ENVIRONMENT).template("operations"))


def _decide(world: World, *tables: str) -> dict[str, Decision]:
    targets = [target_from_job(world.glue, create_job(world, t)) for t in tables]
    decisions = dispatch(targets, fs=S3FileSystem(world.s3), glue=world.glue, budget=4)
    return {d.table: d for d in decisions}


def _cloudwatch() -> Any:
    import boto3

    return boto3.client("cloudwatch", region_name=REGION)


@pytest.mark.cdk
def test_dispatcher_lag_quiet_caught_up_table_publishes_zero_below_its_alarm(
    world: World, dev_operations: dict[str, Any]
) -> None:
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    # Quiet since: the merge's newest source commit gets older, nothing waits.
    create_job(world, ORDERS)
    handler({}, FakeContext())  # type: ignore[arg-type]
    (lag,) = lag_values(ENVIRONMENT, ORDERS, around=time.time())
    assert lag == 0.0 < lag_alarm_threshold(dev_operations, ORDERS)
    assert world.glue.get_job_runs(JobName=job_name(ORDERS))["JobRuns"] == []


@pytest.mark.cdk
def test_dispatcher_lag_stuck_table_publishes_above_its_alarm(
    world: World, dev_operations: dict[str, Any]
) -> None:
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    put_change_file(world, ORDERS, 60)  # waits: the table's run never gets past STARTING
    with hold_runs():
        create_job(world, ORDERS)
        world.glue.start_job_run(JobName=job_name(ORDERS))
        decision = _decide(world, ORDERS)[ORDERS]
    threshold = lag_alarm_threshold(dev_operations, ORDERS)
    assert decision.oldest_pending is not None and not decision.start
    # A turn as long after the file was written as the objective, and a minute more.
    later = decision.oldest_pending + threshold + 60
    assert publish_lag(ENVIRONMENT, [decision], cloudwatch=_cloudwatch(), now=later)
    (lag,) = lag_values(ENVIRONMENT, ORDERS, around=later)
    assert lag == pytest.approx(threshold + 60) and lag > threshold


def test_dispatcher_lag_waiting_files_publish_their_age_not_zero(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    put_change_file(world, ORDERS, 60)
    decision = _decide(world, ORDERS)[ORDERS]
    assert decision.oldest_pending is not None
    assert decision.lag_seconds(decision.oldest_pending + 125.0) == 125.0


def test_dispatcher_lag_unreadable_table_publishes_nothing(world: World) -> None:
    for table in (ORDERS, CUSTOMERS):
        create_job(world, table)
    make_unreadable(world, CUSTOMERS)
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    with pytest.raises(DispatchFailed):  # the turn fails, after publishing what it read
        handler({}, FakeContext())  # type: ignore[arg-type]
    assert [d["Table"] for d in lag_dimensions()] == [ORDERS]


@pytest.mark.cdk
def test_dispatcher_lag_table_never_sent_a_change_publishes_zero_below_its_alarm(
    world: World, dev_operations: dict[str, Any]
) -> None:
    # An empty table: no change file, no checkpoint. Without a datapoint its alarm would page
    # (missing data is breaching); a capture that never delivers pages on its heartbeat.
    create_job(world, ORDERS)
    handler({}, FakeContext())  # type: ignore[arg-type]
    (lag,) = lag_values(ENVIRONMENT, ORDERS, around=time.time())
    assert lag == 0.0 < lag_alarm_threshold(dev_operations, ORDERS)


def test_dispatcher_lag_lands_with_environment_and_table_dimensions(world: World) -> None:
    for table in (ORDERS, CUSTOMERS):
        put_change_file(world, table, 0)
    commit_everything_listed(world, ORDERS)
    for table in (ORDERS, CUSTOMERS):
        create_job(world, table)
    handler({}, FakeContext())  # type: ignore[arg-type]
    assert sorted(lag_dimensions(), key=lambda d: d["Table"]) == [
        {"Environment": ENVIRONMENT, "Table": CUSTOMERS},
        {"Environment": ENVIRONMENT, "Table": ORDERS},
    ]


def test_dispatcher_lag_json_reports_lag_seconds(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    decision = _decide(world, ORDERS)[ORDERS]
    assert decision.oldest_pending is not None
    assert decision.as_json(decision.oldest_pending + 30.04)["lag_seconds"] == 30.0


def test_dispatcher_lag_local_cli_publishes_where_a_region_is_set(world: World) -> None:
    from cdclake.dispatch import publish_local_lag

    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    decisions = list(_decide(world, ORDERS).values())
    publish_local_lag("local", decisions, time.time())
    assert lag_dimensions() == [{"Environment": "local", "Table": ORDERS}]


def test_dispatcher_lag_not_published_fails_the_turn(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a datapoint the lag alarms page on missing data: the turn must fail too, so that
    # the dispatcher's own error metric and log say why.
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    create_job(world, ORDERS)
    with socket.socket() as sock:  # bound, never listening: CloudWatch refuses the connection
        sock.bind(("127.0.0.1", 0))
        monkeypatch.setenv(
            "AWS_ENDPOINT_URL_CLOUDWATCH", f"http://127.0.0.1:{sock.getsockname()[1]}"
        )
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
        with pytest.raises(DispatchFailed, match="LagSeconds not published"):
            handler({}, FakeContext())  # type: ignore[arg-type]


def test_dispatcher_lag_stamped_with_the_turn_time(world: World) -> None:
    put_change_file(world, ORDERS, 0)
    decision = _decide(world, ORDERS)[ORDERS]
    assert decision.oldest_pending is not None
    turn = decision.oldest_pending - 3 * 86_400  # days before now: found only where stamped
    assert publish_lag(ENVIRONMENT, [decision], cloudwatch=_cloudwatch(), now=turn)
    assert lag_values(ENVIRONMENT, ORDERS, around=turn) == [0.0]


def test_dispatcher_lag_local_cli_stamped_with_its_time(world: World) -> None:
    from cdclake.dispatch import publish_local_lag

    put_change_file(world, ORDERS, 0)
    decisions = list(_decide(world, ORDERS).values())
    turn = time.time() - 3 * 86_400  # days before now: found only where stamped
    publish_local_lag("local", decisions, turn)
    assert lag_values("local", ORDERS, around=turn) == [0.0]  # the file was not written yet


def test_dispatcher_lag_local_cli_stamped_in_utc_on_a_machine_off_utc(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime as dt

    from cdclake.dispatch import publish_local_lag
    from cdclake_merge.metrics import LAG, NAMESPACE, dimensions

    # An operator's machine keeps local time; a naive stamp would be read as UTC, 9 hours off.
    put_change_file(world, ORDERS, 0)
    decisions = list(_decide(world, ORDERS).values())
    turn = time.time() - 3 * 86_400
    # Only TZ put back after: undoing the whole monkeypatch would also undo the world's
    # environment (no endpoint of another area's moto server, the region) before the read.
    try:
        with monkeypatch.context() as tokyo:
            tokyo.setenv("TZ", "Asia/Tokyo")
            time.tzset()
            publish_local_lag("local", decisions, turn)
    finally:
        time.tzset()
    moment = dt.datetime.fromtimestamp(turn, dt.UTC)
    found = _cloudwatch().get_metric_statistics(
        Namespace=NAMESPACE,
        MetricName=LAG,
        Dimensions=dimensions("local", ORDERS),
        StartTime=moment - dt.timedelta(minutes=5),
        EndTime=moment + dt.timedelta(minutes=5),
        Period=60,
        Statistics=["Maximum"],
    )["Datapoints"]
    assert [point["Maximum"] for point in found] == [0.0]
