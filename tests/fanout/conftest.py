"""A real moto server with the fan-out's AWS side: a bus, rules into SQS, a claim-check bucket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests.fanout.fanout_helpers import BUCKET, BUS, REGION, ROUTES, Bus, FakeContext, free_port


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.core.base_backend import BackendDict
    from moto.server import ThreadedMotoServer

    # The server serves this process's moto backends, which may still hold an earlier pytest
    # session's bus (mutmut runs pytest more than once in one process): start from none.
    BackendDict.reset()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def aws_env(moto_endpoint: str) -> Iterator[None]:
    """Dummy credentials and the endpoint, for the whole session (the handler reads these)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        patch.delenv("AWS_SESSION_TOKEN", raising=False)
        patch.delenv("AWS_PROFILE", raising=False)
        patch.setenv("AWS_DEFAULT_REGION", REGION)
        patch.setenv("EVENT_BUS_NAME", BUS)
        patch.setenv("ROUTES", json.dumps(ROUTES))
        patch.setenv("CLAIM_CHECK_BUCKET", BUCKET)
        patch.setenv("CLAIM_CHECK_THRESHOLD_BYTES", "200000")
        patch.setenv("PUT_EVENTS_MAX_ATTEMPTS", "3")
        patch.setenv("PUT_EVENTS_BACKOFF_SECONDS", "0")
        patch.setenv("POWERTOOLS_SERVICE_NAME", "fanout-test")
        from lambdas.fanout import handler

        # A fresh execution environment: its clients and its settings (read once per one).
        handler.client.cache_clear()
        handler.settings.cache_clear()
        yield
        handler.client.cache_clear()
        handler.settings.cache_clear()


@pytest.fixture(scope="session")
def bus(aws_env: None) -> Bus:
    """The bus, two rules like the stack's (all changes; deletes only) and their queues."""
    events = boto3.client("events")
    sqs = boto3.client("sqs")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    events.create_event_bus(Name=BUS)
    patterns = {
        "all": {"source": ["shop.orders", "cdc.public.customers"]},
        "deletes": {
            "source": ["shop.orders"],
            "detail-type": ["OrderChanged"],
            "detail": {"op": ["d"]},
        },
    }
    result = Bus(sqs=sqs, s3=s3)
    for name, pattern in patterns.items():
        url = sqs.create_queue(QueueName=f"fanout-{name}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        events.put_rule(Name=f"to-{name}", EventBusName=BUS, EventPattern=json.dumps(pattern))
        events.put_targets(
            Rule=f"to-{name}", EventBusName=BUS, Targets=[{"Id": "queue", "Arn": arn}]
        )
        result.queues[name] = url
    return result


@pytest.fixture
def empty_bus(bus: Bus) -> Bus:
    """The session's bus with its queues emptied before the test."""
    for name in bus.queues:
        bus.drain(name)
    return bus


@pytest.fixture(scope="session")
def context() -> FakeContext:
    return FakeContext()


@pytest.fixture
def outage_events(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The handler's real EventBridge client, built without botocore's own retries so that an
    injected whole-call failure reaches the handler on the first attempt (fast, deterministic)."""
    from lambdas.fanout import handler

    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    handler.client.cache_clear()
    yield handler.events_client()
    handler.client.cache_clear()
