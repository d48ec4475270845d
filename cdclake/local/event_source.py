"""The fan-out Lambda's Kinesis event source mapping, on this machine.

``python -m cdclake.local.event_source PLAN`` polls every shard of the fan-out streams on the
moto server and calls ``lambdas/fanout/handler.py`` in this process, the way Lambda's event
source mapping does with the settings the stack gives it (``FanOut``): batches of at most
``batch_size`` records of one shard, in order, one batch per shard at a time
(``parallelization_factor`` 1); a partial batch response (``batchItemFailures``) retries from
the lowest failed sequence number, so records before it are not sent again; a function error
bisects the batch and retries each half; after ``retry_attempts`` retries, or for records
older than ``max_record_age_s``, the batch's shard and sequence numbers go to the on-failure
queue in Lambda's own message format and the shard moves on.

Each shard's position is kept in a checkpoint file after every finished batch, as the mapping
keeps its own: a restarted driver resumes there (a batch cut off by a crash runs again, as it
would on Lambda: delivery is at least once).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from environment.fanout_settings import MappingSettings

Record = dict[str, Any]


@dataclass(frozen=True)
class Failure:
    """What the mapping sends to its on-failure destination for one batch it gave up on."""

    condition: str  # RetryAttemptsExhausted | RecordAgeExceeded
    records: list[Record]
    invoke_count: int
    function_error: str | None


class Mapping:
    """Lambda's retry rules for one shard's batch; ``invoke`` is the function, in process."""

    def __init__(
        self,
        settings: MappingSettings,
        invoke: Callable[[dict[str, Any]], Any],
        on_failure: Callable[[Failure], None],
    ) -> None:
        self.settings = settings
        self.invoke = invoke
        self.on_failure = on_failure
        self.invocations = 0

    def _expired(self, record: Record) -> bool:
        arrival = float(record["kinesis"]["approximateArrivalTimestamp"])
        return time.time() - arrival > self.settings.max_record_age_s

    def process(self, records: list[Record]) -> None:
        """Deliver one batch (records of one shard, in order); returns when it is settled."""
        pending: deque[tuple[list[Record], int]] = deque([(records, 0)])
        while pending:
            batch, retries = pending.popleft()
            expired = [r for r in batch if self._expired(r)]
            if expired:
                self.on_failure(Failure("RecordAgeExceeded", expired, retries, None))
                batch = [r for r in batch if not self._expired(r)]
                if not batch:
                    continue
            failed_from, error = self._invoke(batch)
            if failed_from is None:
                continue
            remaining = batch[failed_from:]
            if retries >= self.settings.retry_attempts:
                self.on_failure(Failure("RetryAttemptsExhausted", remaining, retries + 1, error))
                continue
            if error is not None and self.settings.bisect_on_error and len(remaining) > 1:
                middle = len(remaining) // 2
                pending.appendleft((remaining[middle:], retries + 1))
                pending.appendleft((remaining[:middle], retries + 1))
            else:
                pending.appendleft((remaining, retries + 1))

    def _invoke(self, batch: list[Record]) -> tuple[int | None, str | None]:
        """(index of the first record to retry or None, function error name or None)."""
        self.invocations += 1
        try:
            response = self.invoke({"Records": batch})
        except Exception as exc:
            return 0, type(exc).__name__
        if not self.settings.report_batch_item_failures or not isinstance(response, dict):
            return None, None
        failures = response.get("batchItemFailures") or []
        if not failures:
            return None, None
        positions = {r["kinesis"]["sequenceNumber"]: i for i, r in enumerate(batch)}
        indexes = []
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
            # Lambda treats an empty or unknown identifier as the whole batch failing.
            if identifier not in positions:
                return 0, None
            indexes.append(positions[identifier])
        return min(indexes), None


def lambda_record(record: dict[str, Any], *, shard_id: str, stream_arn: str, region: str) -> Record:
    """A ``GetRecords`` record as Lambda hands it to the function."""
    arrival = record["ApproximateArrivalTimestamp"]
    stamp = arrival.timestamp() if isinstance(arrival, datetime) else float(arrival)
    sequence = record["SequenceNumber"]
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": sequence,
            "data": base64.b64encode(record["Data"]).decode(),
            "approximateArrivalTimestamp": stamp,
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard_id}:{sequence}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::000000000000:role/fanout",
        "awsRegion": region,
        "eventSourceARN": stream_arn,
    }


def failure_message(failure: Failure, *, function_arn: str) -> dict[str, Any]:
    """Lambda's on-failure record for a Kinesis batch (shard and sequence range, no data)."""
    first, last = failure.records[0], failure.records[-1]
    shard_id = first["eventID"].split(":", 1)[0]

    def arrival(record: Record) -> str:
        stamp = float(record["kinesis"]["approximateArrivalTimestamp"])
        return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds")

    response: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
    if failure.function_error:
        response["functionError"] = "Unhandled"
    return {
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": function_arn,
            "condition": failure.condition,
            "approximateInvokeCount": failure.invoke_count,
        },
        "responseContext": response,
        "version": "1.0",
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "KinesisBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": first["kinesis"]["sequenceNumber"],
            "endSequenceNumber": last["kinesis"]["sequenceNumber"],
            "approximateArrivalOfFirstRecord": arrival(first),
            "approximateArrivalOfLastRecord": arrival(last),
            "batchSize": len(failure.records),
            "streamArn": first["eventSourceARN"],
        },
    }


@dataclass
class FakeContext:
    """The parts of Lambda's context object the handler (Powertools) reads."""

    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = ""


class Checkpoints:
    """Last settled sequence number per stream and shard, in a JSON file (atomic writes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.positions: dict[str, dict[str, str]] = (
            json.loads(path.read_text()) if path.exists() else {}
        )

    def get(self, stream: str, shard: str) -> str | None:
        return self.positions.get(stream, {}).get(shard)

    def set(self, stream: str, shard: str, sequence: str) -> None:
        self.positions.setdefault(stream, {})[shard] = sequence
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.positions, indent=2, sort_keys=True))
        tmp.replace(self.path)


def run(plan: dict[str, Any]) -> None:
    """Poll every shard of the plan's streams; never returns (the stack stops its process)."""
    os.environ.update(plan["function_environment"])
    import boto3

    from lambdas.fanout import handler

    settings = MappingSettings(**plan["mapping"])
    region = plan["region"]
    kinesis = boto3.client("kinesis", endpoint_url=plan["endpoint"], region_name=region)
    sqs = boto3.client("sqs", endpoint_url=plan["endpoint"], region_name=region)
    checkpoints = Checkpoints(Path(plan["checkpoints"]))
    function_arn = plan["function_arn"]

    def invoke(event: dict[str, Any]) -> Any:
        context = FakeContext(
            function_name=plan["function_name"],
            invoked_function_arn=function_arn,
            aws_request_id=str(uuid.uuid4()),
        )
        return handler.handler(event, context)  # type: ignore[arg-type]

    def on_failure(failure: Failure) -> None:
        body = json.dumps(failure_message(failure, function_arn=function_arn))
        sqs.send_message(QueueUrl=plan["failure_queue_url"], MessageBody=body)

    mapping = Mapping(settings, invoke, on_failure)
    iterators: dict[tuple[str, str], str] = {}
    arns: dict[str, str] = {}
    last_listing = 0.0
    while True:
        if time.monotonic() - last_listing > 10:
            last_listing = time.monotonic()
            for stream in plan["streams"]:
                described = kinesis.describe_stream(StreamName=stream)["StreamDescription"]
                arns[stream] = described["StreamARN"]
                for shard in described["Shards"]:
                    key = (stream, shard["ShardId"])
                    if key in iterators:
                        continue
                    after = checkpoints.get(*key)
                    position: dict[str, str] = {"ShardIteratorType": settings.starting_position}
                    if after:
                        position = {
                            "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                            "StartingSequenceNumber": after,
                        }
                    iterators[key] = kinesis.get_shard_iterator(
                        StreamName=stream, ShardId=shard["ShardId"], **position
                    )["ShardIterator"]
        idle = True
        for (stream, shard_id), iterator in list(iterators.items()):
            response = kinesis.get_records(ShardIterator=iterator, Limit=settings.batch_size)
            iterators[(stream, shard_id)] = response["NextShardIterator"]
            raw = response.get("Records", [])
            if not raw:
                continue
            idle = False
            batch = [
                lambda_record(r, shard_id=shard_id, stream_arn=arns[stream], region=region)
                for r in raw
            ]
            mapping.process(batch)
            checkpoints.set(stream, shard_id, batch[-1]["kinesis"]["sequenceNumber"])
        if idle:
            time.sleep(settings.batching_window_s)


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m cdclake.local.event_source PLAN.json", file=sys.stderr)
        return 2
    run(json.loads(Path(args[0]).read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
