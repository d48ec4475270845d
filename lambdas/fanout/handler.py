"""Fan-out: Debezium change events from Kinesis become EventBridge events.

Each Kinesis record holds one Debezium event, with or without the ``{"schema", "payload"}``
wrapper. The record handler turns it into a PutEvents entry (Source/DetailType from the table's
route); the processor then publishes the batch in chunks of at most 10 entries and 256 KB,
retrying only the entries EventBridge rejected. A record that cannot be parsed, or whose entry
still fails after the last attempt, is reported as a batch item failure so Lambda retries it
(and finally sends it to the on-failure destination) while the rest of the batch is delivered.

An event larger than ``CLAIM_CHECK_THRESHOLD_BYTES`` is stored whole in S3 and the bus gets a
slim event (op, key, table, source position) carrying a pointer to it.

Environment: ``EVENT_BUS_NAME``; ``ROUTES`` (JSON ``{"schema.table": {"source",
"detail_type", "primary_key"}}``, generated from config by the stack); ``CLAIM_CHECK_BUCKET``;
``CLAIM_CHECK_THRESHOLD_BYTES``; ``PUT_EVENTS_MAX_ATTEMPTS``; ``PUT_EVENTS_BACKOFF_SECONDS``.
AWS clients honour the standard ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import (
    KinesisStreamRecord,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import BotoCoreError, ClientError

MAX_ENTRIES_PER_CALL = 10
MAX_REQUEST_BYTES = 256 * 1024
CHANGE_OPS = frozenset({"c", "u", "d", "r", "t"})

logger = Logger()

T = TypeVar("T")
Entry = dict[str, Any]


class MalformedRecord(ValueError):
    """The record is not a Debezium change event; retrying will not help."""


class PutEventsFailed(RuntimeError):
    """EventBridge kept rejecting the entry after every attempt."""


@dataclass(frozen=True)
class Route:
    source: str
    detail_type: str
    primary_key: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    bus_name: str
    routes: dict[str, Route]
    claim_check_bucket: str
    claim_check_threshold: int
    max_attempts: int
    backoff_seconds: float

    def route(self, table: str) -> Route:
        """The configured route, or ``cdc.<schema>.<table>`` for a table without one."""
        return self.routes.get(table) or Route(
            source=f"cdc.{table}", detail_type=f"{table} changed"
        )


@functools.cache
def settings() -> Settings:
    """The function's settings, from the environment its stack (or the local stack) gives it,
    all of it; read at the first record, once per execution environment."""
    env = os.environ
    routes = {
        table: Route(
            source=route["source"],
            detail_type=route["detail_type"],
            primary_key=tuple(route.get("primary_key", ())),
        )
        for table, route in json.loads(env["ROUTES"]).items()
    }
    return Settings(
        bus_name=env["EVENT_BUS_NAME"],
        routes=routes,
        claim_check_bucket=env["CLAIM_CHECK_BUCKET"],
        claim_check_threshold=int(env["CLAIM_CHECK_THRESHOLD_BYTES"]),
        max_attempts=max(1, int(env["PUT_EVENTS_MAX_ATTEMPTS"])),
        backoff_seconds=float(env["PUT_EVENTS_BACKOFF_SECONDS"]),
    )


@functools.cache
def client(service: str) -> Any:
    """One client per service; boto3 picks up ``AWS_ENDPOINT_URL`` itself."""
    return boto3.client(service)


def events_client() -> Any:
    return client("events")


def s3_client() -> Any:
    return client("s3")


# --- one record -> one entry -------------------------------------------------------------------


def parse_change(data: bytes) -> dict[str, Any] | None:
    """The Debezium envelope (unwrapped), or None for a tombstone."""
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedRecord(f"not JSON: {exc}") from None
    if isinstance(value, dict) and "payload" in value and "schema" in value:
        value = value["payload"]
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedRecord(f"expected a JSON object, got {type(value).__name__}")
    if value.get("op") not in CHANGE_OPS:
        raise MalformedRecord(f"not a change event: op={value.get('op')!r}")
    source = value.get("source")
    if not isinstance(source, dict) or not source.get("schema") or not source.get("table"):
        raise MalformedRecord("change event without source.schema/source.table")
    return value


def record_key(change: dict[str, Any], route: Route, partition_key: str) -> Any:
    """The row's primary key from the row image, else the JSON Kinesis partition key."""
    row = change.get("after") or change.get("before")
    if route.primary_key and isinstance(row, dict) and all(c in row for c in route.primary_key):
        return {column: row[column] for column in route.primary_key}
    try:
        key = json.loads(partition_key)
    except (TypeError, ValueError):
        return None
    if isinstance(key, dict) and "payload" in key and "schema" in key:
        key = key["payload"]
    return key if isinstance(key, dict) else None


def entry_size(entry: Entry) -> int:
    """PutEvents entry size as EventBridge counts it (Time, Source, DetailType, Detail, ...)."""
    size = 14 if entry.get("Time") else 0
    for field in ("Source", "DetailType", "Detail"):
        size += len(entry.get(field, "").encode())
    size += sum(len(resource.encode()) for resource in entry.get("Resources", ()))
    return size


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def to_entry(record: KinesisStreamRecord, config: Settings) -> Entry | None:
    """Build the PutEvents entry for one Kinesis record (None: nothing to publish)."""
    try:
        data = record.kinesis.data_as_bytes()
    except ValueError as exc:  # binascii.Error is a ValueError
        raise MalformedRecord(f"data is not base64: {exc}") from None
    change = parse_change(data)
    if change is None:
        logger.debug("tombstone skipped", extra={"sequence_number": record.kinesis.sequence_number})
        return None
    source = change["source"]
    table = f"{source['schema']}.{source['table']}"
    route = config.route(table)
    detail = {
        "op": change["op"],
        "table": table,
        "key": record_key(change, route, record.kinesis.partition_key),
        "before": change.get("before"),
        "after": change.get("after"),
        "source": source,
        "ts_ms": change.get("ts_ms"),
    }
    entry: Entry = {
        "EventBusName": config.bus_name,
        "Source": route.source,
        "DetailType": route.detail_type,
        "Detail": _dumps(detail),
    }
    if entry_size(entry) > config.claim_check_threshold:
        entry["Detail"] = _dumps(claim_check(detail, entry, record, config))
    return entry


def claim_check(
    detail: dict[str, Any], entry: Entry, record: KinesisStreamRecord, config: Settings
) -> dict[str, Any]:
    """Store the full event in S3; the bus gets op/key/table/source and a pointer.

    The object key is derived from the Kinesis shard and sequence number, so a retried record
    overwrites the same object instead of leaving copies.
    """
    body = _dumps({"source": entry["Source"], "detail-type": entry["DetailType"], "detail": detail})
    key = f"claim-check/{detail['table']}/{record.event_id.replace(':', '/')}.json"
    s3_client().put_object(
        Bucket=config.claim_check_bucket,
        Key=key,
        Body=body.encode(),
        ContentType="application/json",
    )
    slim = {k: detail[k] for k in ("op", "table", "key", "source", "ts_ms")}
    slim["claim_check"] = {"bucket": config.claim_check_bucket, "key": key, "bytes": len(body)}
    return slim


# --- many entries -> PutEvents -----------------------------------------------------------------


def chunk_entries(items: Sequence[tuple[T, Entry]]) -> Iterator[list[tuple[T, Entry]]]:
    """Chunks of at most 10 entries whose sizes add up to at most 256 KB."""
    chunk: list[tuple[T, Entry]] = []
    chunk_bytes = 0
    for item in items:
        size = entry_size(item[1])
        if chunk and (len(chunk) == MAX_ENTRIES_PER_CALL or chunk_bytes + size > MAX_REQUEST_BYTES):
            yield chunk
            chunk, chunk_bytes = [], 0
        chunk.append(item)
        chunk_bytes += size
    if chunk:
        yield chunk


def put_events(items: Sequence[tuple[T, Entry]], config: Settings) -> list[tuple[T, Exception]]:
    """Publish every entry; retry only the failed ones; return those that never made it."""
    remaining = list(items)
    failed: list[tuple[tuple[T, Entry], Exception]] = []
    for attempt in range(1, config.max_attempts + 1):
        failed = []
        for chunk in chunk_entries(remaining):
            try:
                response = events_client().put_events(Entries=[entry for _, entry in chunk])
            except (ClientError, BotoCoreError) as exc:
                failed.extend((item, exc) for item in chunk)
                continue
            for item, result in zip(chunk, response["Entries"], strict=True):
                if result.get("ErrorCode"):
                    error = PutEventsFailed(f"{result['ErrorCode']}: {result.get('ErrorMessage')}")
                    failed.append((item, error))
        if not failed:
            return []
        logger.warning(
            "PutEvents rejected entries",
            extra={
                "attempt": attempt,
                "failed": len(failed),
                "errors": sorted({str(e) for _, e in failed}),
            },
        )
        remaining = [item for item, _ in failed]
        if attempt < config.max_attempts:
            time.sleep(config.backoff_seconds * 2 ** (attempt - 1))
    return [(item[0], error) for item, error in failed]


class EventBridgeBatchProcessor(BatchProcessor):
    """Kinesis batch processor that publishes the converted records together at the end.

    ``record_handler`` returns each record's entry; on leaving the batch context the entries go
    out in PutEvents chunks, and records whose entries were finally rejected move from the
    successes to the failures before the partial batch response is built.
    """

    def __init__(self) -> None:
        super().__init__(event_type=EventType.KinesisDataStreams)
        self._pending: list[tuple[dict[str, Any], Entry]] = []

    def _prepare(self) -> None:
        super()._prepare()
        self._pending = []

    def success_handler(self, record: Any, result: Any) -> Any:
        if result is not None:
            self._pending.append((record, result))
        return super().success_handler(record=record, result=result)

    def _clean(self) -> None:
        pending, self._pending = self._pending, []
        for raw, error in put_events(pending, settings()) if pending else []:
            self.success_messages.remove(cast(Any, raw))  # Powertools keeps the raw dicts here
            self.failure_handler(
                record=KinesisStreamRecord(raw), exception=(type(error), error, error.__traceback__)
            )
        super()._clean()


processor = EventBridgeBatchProcessor()


def record_handler(record: KinesisStreamRecord) -> Entry | None:
    """One Kinesis record -> one EventBridge entry (raises for a malformed record)."""
    return to_entry(record, settings())


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
