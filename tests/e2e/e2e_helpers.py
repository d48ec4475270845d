"""The end-to-end workload: a seeded random writer against the local stack, and CLI runs."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import random
import signal
import string
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import requests
from pg8000.native import Connection

from cdclake.local.connect import ConnectClient
from cdclake.local.postgres import SUPERUSER
from cdclake.local.runtime import JVM_LIB
from cdclake.local.stack import LocalStack
from connectors.configs import connector_name

REPO_ROOT = Path(__file__).resolve().parents[2]
ORDERS_TOPIC = "cdclake-local.public.orders"
CUSTOMERS_TOPIC = "cdclake-local.public.customers"
# Bigger than PostgreSQL's TOAST threshold (~2 kB) and random, so pglz cannot shrink it
# inline: the value is stored out of line and an update that leaves it alone does not log it.
BIG_TEXT = 6000

CUSTOMERS_DDL = """
CREATE TABLE public.customers (
    id bigint PRIMARY KEY,
    email text NOT NULL,
    name text,
    password_hash text,
    active boolean,
    balance numeric,
    signup_date date,
    last_seen timestamptz,
    profile jsonb,
    ref uuid,
    score double precision
)"""
ORDERS_DDL = """
CREATE TABLE public.orders (
    id bigint PRIMARY KEY,
    customer_id bigint,
    order_date date NOT NULL,
    amount numeric(12,2),
    status text,
    placed_at timestamptz,
    paid boolean,
    meta jsonb,
    notes text
)"""


def missing_spark() -> str | None:
    """Why the merge cannot run here (the stack's own needs skip in tests/conftest.py)."""
    if not any((JVM_LIB / "spark").glob("*.jar")):
        return (
            "jvm/lib/spark has no jars: run "
            "`mvn -B -q -f jvm/pom.xml dependency:copy-dependencies` (make setup)"
        )
    return None


def run_cli(
    stack: LocalStack, *args: str, timeout: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """``cdclake ARGS`` in a child process of its own session, as a person would run it.

    The merge's Spark JVM is a child of that process: on a timeout the whole group goes.
    """
    env = {**os.environ, "CDCLAKE_LOCAL_DIR": str(stack.root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cdclake.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        command = " ".join(args)
        raise AssertionError(f"cdclake {command} timed out after {timeout}s:\n{err}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def merge(stack: LocalStack, table: str) -> dict[str, Any]:
    """One ``cdclake merge --env local`` run: its counts, or ``{"error": last stderr line}``."""
    result = run_cli(stack, "merge", "--env", "local", "--table", table, "--json")
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        return {"table": table, "error": lines[-1] if lines else result.stderr[-2000:]}
    return dict(json.loads(result.stdout))


def validate(stack: LocalStack, table: str, wait: float = 0) -> tuple[int, dict[str, Any]]:
    result = run_cli(
        stack, "validate", "--env", "local", "--table", table, "--wait", str(wait), "--json"
    )
    assert result.returncode in (0, 1), f"validate {table}:\n{result.stdout}\n{result.stderr}"
    return result.returncode, dict(json.loads(result.stdout))


def change_events(stack: LocalStack, topic: str) -> list[tuple[str, dict[str, Any]]]:
    """(object key, Debezium record) of every change file line of a topic, in offset order."""
    state = stack.load_state()
    assert state is not None
    s3 = stack.s3_client(state)
    found = []
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=state.bucket, Prefix=f"topics/{topic}/"
    )
    for page in pages:
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=state.bucket, Key=item["Key"])["Body"].read()
            if item["Key"].endswith(".gz"):
                body = gzip.decompress(body)
            found += [(item["Key"], json.loads(line)) for line in body.decode().splitlines()]
    return sorted(found, key=lambda pair: pair[0])


def wait_for_event(
    stack: LocalStack, topic: str, match: Callable[[dict[str, Any]], bool], timeout: float = 120
) -> None:
    """Until a change file of ``topic`` holds a payload ``match`` accepts.

    The topic has one partition and the sink uploads in offset order, so every change
    committed before the matched one has landed too.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(match(record["payload"]) for _, record in change_events(stack, topic)):
            return
        time.sleep(2)
    raise AssertionError(f"no change file of {topic} holds the awaited change after {timeout}s")


def capture_starts(stack: LocalStack) -> list[str]:
    """The Connect log's lines saying where each start of the capture began (a snapshot, or
    the stored position it resumed from): what a failed check of the workload is read with."""
    wanted = ("Snapshot ended", "Looking for WAL restart position", "Retrieved latest position")
    text = stack.log_path("connect").read_text(errors="replace")
    return [line[:300] for line in text.splitlines() if any(w in line for w in wanted)]


def with_offsets_lost(stack: LocalStack, meanwhile: Callable[[], None]) -> None:
    """The capture connector stopped, ``meanwhile()`` run, its slot advanced past it, its
    offsets deleted and it resumed (Kafka Connect 3.7's REST API): a connector whose offsets
    are lost snapshots every table again, and what changed while it was stopped reaches the
    topics only through that. The slot is advanced (as a slot recreated, or moved on by hand,
    leaves it) because PostgreSQL streams a slot from its confirmed position whatever Debezium
    asks for, and whether Debezium then drops the changes older than its new snapshot varies
    from run to run (seen both ways): without it the scenario is not the same each time."""
    state = stack.load_state()
    assert state is not None
    url = stack.endpoints(state).connect_url
    name = connector_name(stack.config, "debezium-source")
    requests.put(f"{url}/connectors/{name}/stop", timeout=60).raise_for_status()
    deadline = time.monotonic() + 120
    while ConnectClient(url).status(name).get("connector", {}).get("state") != "STOPPED":
        assert time.monotonic() < deadline, f"{name} not STOPPED after 120 s"
        time.sleep(1)
    slot = stack.config.database.replication.slot
    with stack.connect() as conn:
        # STOPPED is the connector's state, set before its task has stopped streaming (seen:
        # half a second later, with the deletes read): only the slot's walsender ending says
        # nothing reads the changes made from here on.
        active = "SELECT active FROM pg_replication_slots WHERE slot_name = :slot"
        while conn.run(active, slot=slot) != [[False]]:
            assert time.monotonic() < deadline, f"slot {slot} still active after 120 s"
            time.sleep(1)
        meanwhile()
        conn.run("SELECT pg_replication_slot_advance(:slot, pg_current_wal_lsn())", slot=slot)
    requests.delete(f"{url}/connectors/{name}/offsets", timeout=60).raise_for_status()
    requests.put(f"{url}/connectors/{name}/resume", timeout=60).raise_for_status()
    stack.wait_running(state, timeout=300)


def upload_change_file(stack: LocalStack, topic: str, records: list[dict[str, Any]]) -> str:
    """A change file after every real one of the topic (offset 9999999999)."""
    state = stack.load_state()
    assert state is not None
    key = f"topics/{topic}/partition=0/{topic}+0+9999999999.json"
    body = "".join(json.dumps(r) + "\n" for r in records).encode()
    stack.s3_client(state).put_object(Bucket=state.bucket, Key=key, Body=body)
    return key


class Workload:
    """Seeded random changes to customers and orders, from one writer thread.

    Only this writer changes the tables, so it knows their keys. ``run(n)`` performs ``n``
    operations in the background; ``wait()`` joins them. Operations are single statements or
    multi-statement transactions, chosen by a seeded RNG (the interleaving with the stack's
    own work is up to the scheduler).
    """

    def __init__(self, stack: LocalStack, seed: int, pace: float = 0.1) -> None:
        self.stack, self.rng, self.pace = stack, random.Random(seed), pace
        self.orders: dict[int, bool] = {}  # key -> notes stored out of line (TOAST)
        self.customers: set[int] = set()
        self.next_order, self.next_customer = 1, 1
        self.tier = False  # customers.tier exists
        self.customer_writes = False
        self.order_writes = True
        self.ops = 0
        self.errors: list[BaseException] = []
        self._thread: threading.Thread | None = None
        self._conn: Connection | None = None

    # -- connection --------------------------------------------------------------------

    def conn(self) -> Connection:
        if self._conn is None:
            state = self.stack.load_state()
            assert state is not None
            self._conn = Connection(
                user=SUPERUSER,
                host="127.0.0.1",
                port=state.ports["postgres"],
                database=self.stack.config.database.name,
            )
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def sql(self, statement: str, **params: Any) -> Any:
        return self.conn().run(statement, **params)

    # -- values ------------------------------------------------------------------------

    def maybe(self, value: Any, null: float = 0.15) -> Any:
        return None if self.rng.random() < null else value

    def text(self, n: int) -> str:
        return "".join(self.rng.choices(string.ascii_letters + string.digits + " éß", k=n))

    def moment(self) -> dt.datetime:
        zone = dt.timezone(dt.timedelta(hours=self.rng.choice([-8, 0, 2, 5, 9])))
        base = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
        offset = dt.timedelta(seconds=self.rng.randint(0, 6 * 365 * 86400))
        micros = dt.timedelta(microseconds=self.rng.randint(0, 999_999))
        return (base + offset + micros).astimezone(zone)

    def day(self) -> dt.date:
        return dt.date(2024, 1, 1) + dt.timedelta(days=self.rng.randint(0, 60))

    def doc(self) -> str:
        # Written as text so PostgreSQL keeps the number's scale (2.50) and orders the keys.
        items = ", ".join(str(self.rng.randint(1, 99)) for _ in range(self.rng.randint(0, 3)))
        return (
            f'{{"w": {self.rng.randint(0, 999) / 100:.2f}, "tags": [{items}], '
            f'"nested": {{"ok": {self.rng.choice(["true", "false", "null"])}, '
            f'"s": "{self.text(8)}\\n"}}}}'
        )

    def balance(self) -> Decimal:
        # Unconstrained numeric: Debezium's VariableScaleDecimal, the lake's decimal(38,18).
        return Decimal(self.rng.randint(-(10**9), 10**9)).scaleb(-self.rng.randint(0, 6))

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    # -- operations --------------------------------------------------------------------

    def insert_orders(self, n: int) -> None:
        for _ in range(n):
            key, self.next_order = self.next_order, self.next_order + 1
            big = self.rng.random() < 0.4
            notes = self.text(BIG_TEXT) if big else self.maybe(self.text(20), 0.3)
            self.sql(
                "INSERT INTO public.orders VALUES (:id, :c, :d, :a, :s, :p, :paid, "
                "CAST(:m AS jsonb), :n)",
                id=key,
                c=self.maybe(self.rng.randint(1, 500)),
                d=self.day(),
                a=self.maybe(Decimal(self.rng.randint(0, 10**8)) / 100),
                s=self.rng.choice(["new", "paid", "shipped", "returned"]),
                p=self.maybe(self.moment()),
                paid=self.maybe(self.rng.random() < 0.5),
                m=self.maybe(self.doc()),
                n=notes,
            )
            self.orders[key] = big

    def update_order(self) -> None:
        if not self.orders:
            return self.insert_orders(1)
        key = self.rng.choice(sorted(self.orders))
        choice = self.rng.random()
        if choice < 0.1:  # a new large text: logged in full
            notes = self.text(BIG_TEXT)
            self.sql("UPDATE public.orders SET notes = :n WHERE id = :id", n=notes, id=key)
            self.orders[key] = True
        elif choice < 0.25:  # moves the row to another Hudi partition
            day = self.day()
            self.sql("UPDATE public.orders SET order_date = :d WHERE id = :id", d=day, id=key)
        else:  # notes untouched: an out-of-line value arrives as Debezium's placeholder
            self.sql(
                "UPDATE public.orders SET status = :s, amount = :a, paid = :paid, "
                "meta = CAST(:m AS jsonb), placed_at = :p WHERE id = :id",
                s=self.rng.choice(["paid", "shipped", "returned", "lost"]),
                a=self.maybe(Decimal(self.rng.randint(0, 10**8)) / 100),
                paid=self.maybe(self.rng.random() < 0.5),
                m=self.maybe(self.doc()),
                p=self.maybe(self.moment()),
                id=key,
            )

    def delete_order(self) -> None:
        if self.orders:
            key = self.rng.choice(sorted(self.orders))
            self.sql("DELETE FROM public.orders WHERE id = :id", id=key)
            del self.orders[key]

    def rekey_order(self) -> None:
        # Only rows whose notes are inline: under REPLICA IDENTITY DEFAULT the new key's row
        # would carry the TOAST placeholder with no earlier value of that key to resolve it.
        inline = sorted(k for k, big in self.orders.items() if not big)
        if inline:
            key = self.rng.choice(inline)
            new, self.next_order = self.next_order, self.next_order + 1
            self.sql("UPDATE public.orders SET id = :new WHERE id = :id", new=new, id=key)
            del self.orders[key]
            self.orders[new] = False

    def insert_customers(self, n: int) -> None:
        for _ in range(n):
            key, self.next_customer = self.next_customer, self.next_customer + 1
            params = {
                "id": key,
                "e": f"c{key}@example.com",
                "n": self.maybe(self.text(12)),
                "h": self.text(16),
                "a": self.maybe(self.rng.random() < 0.5),
                "b": self.maybe(self.balance()),
                "d": self.maybe(self.day()),
                "t": self.maybe(self.moment()),
                "p": self.maybe(self.doc()),
                "r": self.maybe(self.uuid()),
                "s": self.maybe(self.rng.uniform(-1e6, 1e6)),
            }
            columns = ":id, :e, :n, :h, :a, :b, :d, :t, CAST(:p AS jsonb), CAST(:r AS uuid), :s"
            if self.tier:
                params["tier"] = self.maybe(self.rng.randint(1, 5))
                columns += ", :tier"
            self.sql(f"INSERT INTO public.customers VALUES ({columns})", **params)
            self.customers.add(key)

    def update_customer(self) -> None:
        if not self.customers:
            return self.insert_customers(1)
        key = self.rng.choice(sorted(self.customers))
        sets = "balance = :b, last_seen = :t, active = :a, score = :s, password_hash = :h"
        params: dict[str, Any] = {
            "id": key,
            "b": self.maybe(self.balance()),
            "t": self.maybe(self.moment()),
            "a": self.maybe(self.rng.random() < 0.5),
            "s": self.maybe(self.rng.uniform(-1e6, 1e6)),
            "h": self.text(16),
        }
        if self.rng.random() < 0.3:
            sets += ", profile = CAST(:p AS jsonb), ref = CAST(:r AS uuid)"
            params.update(p=self.maybe(self.doc()), r=self.maybe(self.uuid()))
        if self.tier and self.rng.random() < 0.6:
            sets += ", tier = :tier"
            params["tier"] = self.maybe(self.rng.randint(1, 5))
        self.sql(f"UPDATE public.customers SET {sets} WHERE id = :id", **params)

    def delete_customer(self) -> None:
        if self.customers:
            key = self.rng.choice(sorted(self.customers))
            self.sql("DELETE FROM public.customers WHERE id = :id", id=key)
            self.customers.discard(key)

    def rekey_customer(self) -> None:
        if self.customers:
            key = self.rng.choice(sorted(self.customers))
            new, self.next_customer = self.next_customer, self.next_customer + 1
            self.sql("UPDATE public.customers SET id = :new WHERE id = :id", new=new, id=key)
            self.customers.discard(key)
            self.customers.add(new)

    def step(self) -> None:
        """One random operation; a third of them are multi-statement transactions."""
        tables = [
            name
            for name, on in (("orders", self.order_writes), ("customers", self.customer_writes))
            if on
        ]
        statements = self.rng.randint(2, 5) if self.rng.random() < 0.33 else 1
        if statements > 1:
            self.sql("BEGIN")
        for _ in range(statements):
            table = self.rng.choice(tables)
            weights = [0.3, 0.45, 0.15, 0.1]
            kind = self.rng.choices(["insert", "update", "delete", "rekey"], weights)[0]
            if table == "orders":
                action: Callable[[], None] = {
                    "insert": lambda: self.insert_orders(self.rng.randint(1, 3)),
                    "update": self.update_order,
                    "delete": self.delete_order,
                    "rekey": self.rekey_order,
                }[kind]
            else:
                action = {
                    "insert": lambda: self.insert_customers(self.rng.randint(1, 3)),
                    "update": self.update_customer,
                    "delete": self.delete_customer,
                    "rekey": self.rekey_customer,
                }[kind]
            action()
        if statements > 1:
            self.sql("COMMIT")
        self.ops += 1

    # -- background --------------------------------------------------------------------

    def run(self, n: int) -> None:
        """Start ``n`` operations in the background (one batch at a time)."""
        assert self._thread is None, "a batch is still running"

        def work() -> None:
            try:
                for _ in range(n):
                    self.step()
                    time.sleep(self.pace)
            except BaseException as exc:  # surfaced by wait(); a thread cannot raise
                self.errors.append(exc)

        self._thread = threading.Thread(target=work, name="workload", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=600)
            assert not self._thread.is_alive(), "the workload never finished"
            self._thread = None
        if self.errors:
            raise self.errors[0]

    def during(self, n: int, action: Callable[[], Any]) -> Any:
        """``action()`` while ``n`` operations run; returns its result once both are done."""
        self.run(n)
        try:
            return action()
        finally:
            self.wait()
