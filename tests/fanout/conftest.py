"""A real moto server with the fan-out's AWS side: a bus, rules into SQS, a claim-check bucket."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

REGION = "eu-west-1"
BUS = "cdclake-test-bus"
BUCKET = "cdclake-test-claim-check"
STREAM_ARN = f"arn:aws:kinesis:{REGION}:123456789012:stream/cdclake-test.public.orders"
# What the stack generates from config: one routed table; others fall back to cdc.<schema>.<table>.
ROUTES = {
    "public.orders": {"source": "shop.orders", "detail_type": "OrderChanged", "primary_key": ["id"]}
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Bus:
    """Handles to the moto resources and helpers to read what arrived."""

    sqs: Any
    s3: Any
    queues: dict[str, str] = field(default_factory=dict)

    def drain(self, name: str = "all") -> list[dict[str, Any]]:
        """Every EventBridge event currently in a queue (deleting them)."""
        url = self.queues[name]
        events = []
        while True:
            response = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
            messages = response.get("Messages", [])
            if not messages:
                return events
            for message in messages:
                events.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
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

        handler.client.cache_clear()
        yield
        handler.client.cache_clear()


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


@dataclass
class FakeContext:
    function_name: str = "fanout"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:123456789012:function:fanout"
    aws_request_id: str = "req-1"


@pytest.fixture(scope="session")
def context() -> FakeContext:
    return FakeContext()


def change_event(
    op: str = "c",
    *,
    table: str = "orders",
    row_id: int = 1,
    lsn: int = 1000,
    after: dict[str, Any] | None = None,
    wrapped: bool = False,
) -> dict[str, Any]:
    """A Debezium PostgreSQL change event (bare envelope, or schema-wrapped)."""
    row = after if after is not None else {"id": row_id, "status": "new", "total": "12.50"}
    payload = {
        "before": {"id": row_id} if op == "d" else None,
        "after": None if op in ("d", "t") else row,
        "source": {
            "version": "2.7.4.Final",
            "connector": "postgresql",
            "name": "cdclake-test",
            "ts_ms": 1700000000000,
            "snapshot": "false",
            "db": "app",
            "sequence": f'["{lsn - 8}","{lsn}"]',
            "schema": "public",
            "table": table,
            "txId": 500 + row_id,
            "lsn": lsn,
            "xmin": None,
        },
        "op": op,
        "ts_ms": 1700000000123,
        "transaction": None,
    }
    if op == "t":
        payload["before"] = None
    if wrapped:
        return {
            "schema": {
                "type": "struct",
                "name": f"cdclake-test.public.{table}.Envelope",
                "optional": False,
                "fields": [],
            },
            "payload": payload,
        }
    return payload


def kinesis_record(
    data: bytes | dict[str, Any] | None, sequence: int, key: str = "k"
) -> dict[str, Any]:
    """A Lambda Kinesis event record around raw bytes or a JSON value."""
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    seq = f"4954{sequence:052d}"
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": key,
            "sequenceNumber": seq,
            "data": base64.b64encode(raw).decode(),
            "approximateArrivalTimestamp": 1.7e9,
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"shardId-000000000000:{seq}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/fanout",
        "awsRegion": REGION,
        "eventSourceARN": STREAM_ARN,
    }


def kinesis_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": records}
