"""Helpers of the fan-out handler tests: the test bus's names, reading its queues, and Kinesis
events shaped as Lambda receives them."""

from __future__ import annotations

import base64
import json
import socket
from dataclasses import dataclass, field
from typing import Any

REGION = "eu-west-1"
BUS = "cdclake-test-bus"
BUCKET = "cdclake-test-claim-check"
STREAM_ARN = f"arn:aws:kinesis:{REGION}:123456789012:stream/cdclake-test.public.orders"
# What the stack generates from config: one routed table; others fall back to cdc.<schema>.<table>.
ROUTES = {
    "public.orders": {"source": "shop.orders", "detail_type": "OrderChanged", "primary_key": ["id"]}
}


def free_port() -> int:
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


@dataclass
class FakeContext:
    function_name: str = "fanout"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:123456789012:function:fanout"
    aws_request_id: str = "req-1"


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


class OutageResponse:
    """The raw body of an HTTP response, as botocore's ``AWSResponse`` reads it."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


@dataclass
class PutEventsOutage:
    """A whole-call PutEvents failure on the wire, for the chunks holding chosen LSNs.

    Registered as a ``before-send`` hook on the handler's real client: a chosen chunk gets an
    HTTP 400 ``ThrottlingException`` (or a connection error) instead of reaching the moto server;
    every other chunk goes through. ``times`` is how many calls per chunk fail.
    """

    lsns: frozenset[int]
    times: int = 99
    network: bool = False
    calls: list[tuple[int, bool]] = field(default_factory=list)  # (entries, failed)
    _failed: dict[int, int] = field(default_factory=dict)

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import EndpointConnectionError

        entries = json.loads(request.body)["Entries"]
        lsns = {json.loads(e["Detail"])["source"]["lsn"] for e in entries}
        hit = min(lsns & self.lsns, default=None)
        if hit is None or self._failed.get(hit, 0) >= self.times:
            self.calls.append((len(entries), False))
            return None
        self._failed[hit] = self._failed.get(hit, 0) + 1
        self.calls.append((len(entries), True))
        if self.network:
            raise EndpointConnectionError(endpoint_url=request.url)
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"})
        return AWSResponse(
            request.url,
            400,
            {
                "x-amzn-ErrorType": "ThrottlingException",
                "Content-Type": "application/x-amz-json-1.1",
            },
            OutageResponse(body.encode()),
        )
