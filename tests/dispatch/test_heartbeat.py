"""The capture's heartbeat on moto (S3, Glue, CloudWatch): each dispatcher turn publishes the
age of the newest heartbeat change file as ``HeartbeatAgeSeconds``, and the dev template alarms
on it at the smallest freshness objective of the lake tables.

A table's lag stays 0 while a stopped Debezium source or S3 sink delivers nothing; the
heartbeat's age grows past the alarm's threshold instead.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from lambdas.dispatcher.handler import handler
from tests.dispatch.dispatch_helpers import (
    HEARTBEATS,
    FakeContext,
    World,
    commit_everything_listed,
    create_job,
    handler_environment,
    heartbeat_ages,
    heartbeat_alarm,
    lag_values,
    put_change_file,
    put_heartbeat,
)

pytestmark = pytest.mark.moto

ORDERS = "public.orders"
ENVIRONMENT = "dev"


@pytest.fixture
def world(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    """The lake, with the dispatcher Lambda's environment."""
    handler_environment(monkeypatch, budget=4, environment=ENVIRONMENT, heartbeats=HEARTBEATS)
    return world


@pytest.fixture(scope="module")
def dev_operations(synth: Any) -> dict[str, Any]:
    return dict(synth(ENVIRONMENT).template("operations"))


def _caught_up(world: World) -> None:
    """A lake table with nothing waiting: its lag is 0 whatever the capture does."""
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    create_job(world, ORDERS)


@pytest.mark.cdk
def test_dispatcher_heartbeat_stopped_capture_publishes_an_age_above_its_alarm(
    world: World, dev_operations: dict[str, Any]
) -> None:
    threshold = float(heartbeat_alarm(dev_operations)["Threshold"])
    _caught_up(world)
    # The last heartbeat the sink wrote before the capture stopped: the objective and a
    # minute ago.
    put_heartbeat(world, 0, written=time.time() - threshold - 60)
    handler({}, FakeContext())  # type: ignore[arg-type]
    now = time.time()
    assert lag_values(ENVIRONMENT, ORDERS, around=now) == [0.0]  # the lag shows nothing
    (age,) = heartbeat_ages(ENVIRONMENT, around=now)
    assert age > threshold


@pytest.mark.cdk
def test_dispatcher_heartbeat_delivering_capture_publishes_its_newest_files_age_below_alarm(
    world: World, dev_operations: dict[str, Any]
) -> None:
    threshold = float(heartbeat_alarm(dev_operations)["Threshold"])
    _caught_up(world)
    put_heartbeat(world, 0, written=time.time() - 86_400)  # yesterday's, not yet expired
    put_heartbeat(world, 1440)  # the newest, just written
    handler({}, FakeContext())  # type: ignore[arg-type]
    (age,) = heartbeat_ages(ENVIRONMENT, around=time.time())
    assert age < 60 < threshold


def test_dispatcher_heartbeat_none_delivered_publishes_nothing_and_the_turn_succeeds(
    world: World,
) -> None:
    # A capture that never delivered: the alarm's missing data pages, the turn itself is fine
    # (a failing turn would page the dispatcher's errors for the capture's fault too).
    _caught_up(world)
    answer = handler({}, FakeContext())  # type: ignore[arg-type]
    assert answer["jobs"] == 1
    assert heartbeat_ages(ENVIRONMENT, around=time.time()) == []
