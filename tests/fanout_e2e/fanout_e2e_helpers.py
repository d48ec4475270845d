"""Helpers for the fan-out end-to-end tests: the seeded workload, the queues."""

from __future__ import annotations

import json
import random
import string
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3

from cdclake.local.runtime import AWS_ENV
from cdclake.local.stack import LocalStack
from cdclake_merge.debezium import TableSpec, parse_value
from cdclake_merge.transforms import order_key
from environment.config import EnvironmentConfig

PAYMENTS_DDL = (
    "CREATE TABLE public.payments (id bigint PRIMARY KEY, account text NOT NULL, "
    "amount numeric(12,2), status text, note text)"
)
REFUNDS_DDL = (
    "CREATE TABLE public.refunds (id bigint PRIMARY KEY, payment_id bigint, amount numeric(12,2))"
)
# Over the claim-check threshold (200 000 bytes of event) by itself.
BIG_NOTE_CHARS = 230_000


def aws_client(stack: LocalStack, service: str) -> Any:
    status = stack.status()
    return boto3.client(
        service,
        endpoint_url=status["aws_endpoint"],
        region_name=stack.config.region,
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
    )


# -- the workload ---------------------------------------------------------------------------


@dataclass
class Expected:
    """What the workload did, per table and key, in commit order: (op, after image)."""

    changes: dict[tuple[str, str], list[tuple[str, dict[str, Any] | None]]] = field(
        default_factory=dict
    )
    truncates: list[str] = field(default_factory=list)

    def add(self, table: str, key: int, op: str, after: dict[str, Any] | None) -> None:
        self.changes.setdefault((table, json.dumps({"id": key})), []).append((op, after))

    def count(self, tables: set[str], ops: set[str]) -> int:
        streamed = sum(
            1
            for (table, _), changes in self.changes.items()
            for op, _ in changes
            if table in tables and op in ops
        )
        return streamed + (sum(1 for t in self.truncates if t in tables) if "t" in ops else 0)


def _amount(rng: random.Random) -> str:
    """numeric(12,2) as Debezium writes it with decimal.handling.mode=string: "12.50"."""
    cents = rng.randint(1, 99_999)
    return f"{cents // 100}.{cents % 100:02d}"


class Workload:
    """Seeded changes on payments (REPLICA IDENTITY FULL) and refunds (DEFAULT)."""

    def __init__(self, stack: LocalStack, seed: int) -> None:
        self.stack = stack
        self.rng = random.Random(seed)
        self.expected = Expected()
        self.rows: dict[str, dict[int, dict[str, Any]]] = {
            "public.payments": {},
            "public.refunds": {},
        }
        self.next_id = 1

    def _payment(self, row_id: int) -> dict[str, Any]:
        return {
            "id": row_id,
            "account": f"acc-{self.rng.randint(1, 9)}",
            "amount": _amount(self.rng),
            "status": self.rng.choice(["new", "authorized"]),
            "note": "".join(self.rng.choices(string.ascii_letters, k=self.rng.randint(0, 40))),
        }

    def _insert(self, conn: Any, table: str, row: dict[str, Any]) -> None:
        columns = ", ".join(row)
        params = ", ".join(f":{c}" for c in row)
        conn.run(f"INSERT INTO {table} ({columns}) VALUES ({params})", **row)
        self.rows[table][row["id"]] = row
        self.expected.add(table, row["id"], "c", dict(row))

    def step(self, conn: Any) -> None:
        """One random change (insert, update or delete) on one of the tables."""
        table = self.rng.choice(["public.payments", "public.payments", "public.refunds"])
        rows = self.rows[table]
        choice = self.rng.random()
        if not rows or choice < 0.45:
            row_id, self.next_id = self.next_id, self.next_id + 1
            if table == "public.payments":
                self._insert(conn, table, self._payment(row_id))
            else:
                row = {"id": row_id, "payment_id": self.rng.randint(1, 50), "amount": None}
                row["amount"] = _amount(self.rng)
                self._insert(conn, table, row)
        elif choice < 0.8:
            row_id = self.rng.choice(sorted(rows))
            row = dict(rows[row_id])
            if table == "public.payments":
                row["status"] = self.rng.choice(["paid", "failed", "refunded"])
                row["amount"] = _amount(self.rng)
                conn.run(
                    "UPDATE public.payments SET status = :s, amount = :a WHERE id = :i",
                    s=row["status"],
                    a=row["amount"],
                    i=row_id,
                )
            else:
                row["amount"] = _amount(self.rng)
                conn.run(
                    "UPDATE public.refunds SET amount = :a WHERE id = :i", a=row["amount"], i=row_id
                )
            rows[row_id] = row
            self.expected.add(table, row_id, "u", dict(row))
        else:
            row_id = self.rng.choice(sorted(rows))
            conn.run(f"DELETE FROM {table} WHERE id = :i", i=row_id)
            del rows[row_id]
            self.expected.add(table, row_id, "d", None)

    def steps(self, count: int) -> None:
        with self.stack.connect() as conn:
            for _ in range(count):
                self.step(conn)

    def change_key(self) -> tuple[int, int]:
        """A primary-key change: Debezium emits a delete of the old key and a create."""
        rows = self.rows["public.payments"]
        old = self.rng.choice(sorted(rows))
        new, self.next_id = self.next_id, self.next_id + 1
        with self.stack.connect() as conn:
            conn.run("UPDATE public.payments SET id = :n WHERE id = :o", n=new, o=old)
        row = {**rows.pop(old), "id": new}
        rows[new] = row
        self.expected.add("public.payments", old, "d", None)
        self.expected.add("public.payments", new, "c", dict(row))
        return old, new

    def big_row(self) -> int:
        """A payment whose event is larger than the claim-check threshold."""
        row_id, self.next_id = self.next_id, self.next_id + 1
        row = self._payment(row_id)
        row["note"] = "".join(self.rng.choices(string.ascii_letters, k=BIG_NOTE_CHARS))
        with self.stack.connect() as conn:
            self._insert(conn, "public.payments", row)
        return row_id

    def truncate_refunds(self) -> None:
        with self.stack.connect() as conn:
            conn.run("TRUNCATE public.refunds")
        for row_id in list(self.rows["public.refunds"]):
            del self.rows["public.refunds"][row_id]
        self.expected.truncates.append("public.refunds")


def kinesis_records(stack: LocalStack) -> int:
    """How many records the fan-out streams hold (every shard, from the trim horizon)."""
    kinesis = aws_client(stack, "kinesis")
    count = 0
    for stream in stack.status()["kinesis_streams"].values():
        shards = kinesis.describe_stream(StreamName=stream)["StreamDescription"]["Shards"]
        for shard in shards:
            iterator = kinesis.get_shard_iterator(
                StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            while iterator:
                response = kinesis.get_records(ShardIterator=iterator, Limit=1000)
                count += len(response["Records"])
                if not response["Records"] or response.get("MillisBehindLatest") == 0:
                    break
                iterator = response.get("NextShardIterator")
    return count


# -- what consumers received ----------------------------------------------------------------


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message now in the queue, deleted after reading (EventBridge events, parsed)."""
    received = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
            "Messages", []
        )
        if not messages:
            return received
        for message in messages:
            received.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def full_detail(s3: Any, event: dict[str, Any]) -> dict[str, Any]:
    """The event's detail, read back from S3 when it came as a claim check."""
    detail: dict[str, Any] = event["detail"]
    pointer = detail.get("claim_check")
    if pointer is None:
        return detail
    body = s3.get_object(Bucket=pointer["bucket"], Key=pointer["key"])["Body"].read()
    stored: dict[str, Any] = json.loads(body)["detail"]
    return stored


def event_order(detail: dict[str, Any], primary_key: list[str]) -> str:
    """The lake's per-key order key (commit LSN + change LSN) of one change."""
    outcome = parse_value(detail, TableSpec(primary_key=tuple(primary_key)))
    assert outcome.change is not None, (outcome.kind, outcome.reason, detail)
    return order_key(outcome.change.commit_lsn, outcome.change.lsn)


@dataclass
class Delivered:
    """One consumer's events, de-duplicated per (table, key, order key, op)."""

    events: list[dict[str, Any]]
    unique: dict[tuple[str, str, str, str], dict[str, Any]]
    duplicates: int

    def per_key(self) -> dict[tuple[str, str], list[tuple[str, dict[str, Any] | None]]]:
        """(table, key) -> [(op, after)] in the lake's order; truncates left out."""
        ordered: dict[tuple[str, str], list[tuple[str, str, dict[str, Any] | None]]] = {}
        for (table, key, order, op), detail in self.unique.items():
            if op == "t":
                continue
            ordered.setdefault((table, key), []).append((order, op, detail.get("after")))
        return {
            k: [(op, after) for _, op, after in sorted(v, key=lambda c: c[0])]
            for k, v in ordered.items()
        }

    def ops(self) -> Counter[str]:
        return Counter(key[3] for key in self.unique)


def deliveries(config: EnvironmentConfig, s3: Any, events: list[dict[str, Any]]) -> Delivered:
    unique: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    duplicates = 0
    for event in events:
        detail = full_detail(s3, event)
        table = config.table(detail["table"])
        identity = (
            table.name,
            json.dumps(detail["key"], sort_keys=True),
            event_order(detail, list(table.primary_key)),
            detail["op"],
        )
        if identity in unique:
            duplicates += 1
        else:
            unique[identity] = detail
    return Delivered(events, unique, duplicates)


def _identity(event: dict[str, Any]) -> tuple[Any, ...]:
    detail = event["detail"]
    source = detail["source"]
    key = json.dumps(detail["key"], sort_keys=True)
    return (detail["table"], key, source.get("sequence"), source.get("lsn"), detail["op"])


def wait_for_count(
    sqs: Any, url: str, count: int, *, timeout: float, into: list[dict[str, Any]]
) -> None:
    """Drain the queue into ``into`` until it holds ``count`` distinct changes, or time out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        into.extend(drain(sqs, url))
        if len({_identity(e) for e in into}) >= count:
            time.sleep(3)  # late duplicates (a redelivered batch) land within a poll or two
            into.extend(drain(sqs, url))
            return
        time.sleep(1)


# -- an HTTP endpoint that checks the API key -----------------------------------------------


@dataclass
class Endpoint:
    url: str
    received: list[tuple[str, dict[str, str], bytes]]


@contextmanager
def token_endpoint(header: str, token: str) -> Iterator[Endpoint]:
    """A local HTTP server: 200 for requests carrying ``header: token``, 401 otherwise."""
    received: list[tuple[str, dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.append((self.command, dict(self.headers.items()), body))
            ok = self.headers.get(header) == token
            self.send_response(200 if ok else 401)
            self.end_headers()

        do_POST = _handle
        do_PUT = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Endpoint(f"http://127.0.0.1:{server.server_address[1]}/changes", received)
    finally:
        server.shutdown()
        server.server_close()
