"""Realistic Debezium PostgreSQL change events, and the table state they describe.

A small simulation of a source table: a snapshot, then transactions of inserts,
updates (some leaving a TOASTed column unchanged, so Debezium sends the
placeholder), deletes with their tombstones, primary-key changes (a delete and a
create in one transaction), many transactions sharing a commit millisecond, an
optional truncate, and a connector restart that redelivers a run of events. The
events are laid out as the Confluent S3 sink writes them, across several Kafka
partitions; ``expected.jsonl`` holds the final table in ``cdclake export`` form.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

UNAVAILABLE = "__debezium_unavailable_value"
TOAST_THRESHOLD = 200  # a note longer than this is "TOASTed" in the simulation
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
COLUMNS: list[tuple[str, str, dict[str, Any]]] = [
    # name, spark type, Kafka Connect schema field (without "field")
    ("id", "int", {"type": "int32", "optional": False}),
    ("customer", "string", {"type": "string", "optional": True}),
    (
        "amount",
        "decimal(12,2)",
        {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2", "connect.decimal.precision": "12"},
        },
    ),
    ("quantity", "int", {"type": "int32", "optional": True}),
    ("price", "double", {"type": "double", "optional": True}),
    ("active", "boolean", {"type": "boolean", "optional": True}),
    ("order_date", "date", {"type": "int32", "optional": True, "name": "io.debezium.time.Date"}),
    (
        "updated_at",
        "timestamp",
        {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp"},
    ),
    (
        "shipped_at",
        "timestamp",
        {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp"},
    ),
    ("note", "string", {"type": "string", "optional": True}),
    ("attrs", "string", {"type": "string", "optional": True, "name": "io.debezium.data.Json"}),
]
KEY = ("id",)


@dataclass(frozen=True)
class GeneratorOptions:
    table: str = "public.orders"
    events: int = 1000
    seed: int = 1
    shape: str = "schema"  # schema | envelope | flat
    keys: int = 100
    partitions: int = 3
    flush_size: int = 200
    truncate: bool = True
    redeliver: bool = True
    prefix: str = "cdclake"
    # A key change as PostgreSQL logs it (one WAL record): its delete and create at one
    # position, the create's unchanged TOASTed note the placeholder. Off by default: the merge
    # pairs the two only within one run (docs/merge-job.md rule 4), and the runs a test cuts
    # by partition can split them, the old key's value then reaching no run of the new key.
    key_change_toast: bool = False


@dataclass
class Event:
    op: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    commit_lsn_prev: int | None
    lsn: int
    ts_ms: int
    tx_id: int
    snapshot: str


def _decimal_b64(value: Decimal, scale: int) -> str:
    unscaled = int(value.scaleb(scale))
    length = max((unscaled.bit_length() + 8) // 8, 1)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


class _KeySet:
    """Keys with O(1) add, remove and random pick (a 1M-event run picks a million times)."""

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.index: dict[int, int] = {}

    def add(self, key: int) -> None:
        self.index[key] = len(self.keys)
        self.keys.append(key)

    def remove(self, key: int) -> None:
        i = self.index.pop(key)
        last = self.keys.pop()
        if last != key:
            self.keys[i], self.index[last] = last, i

    def pick(self, rng: random.Random) -> int:
        return self.keys[rng.randrange(len(self.keys))]


class Simulation:
    """The source table and its change stream, in commit order."""

    def __init__(self, options: GeneratorOptions) -> None:
        self.o = options
        self.rng = random.Random(options.seed)
        self.rows: dict[int, dict[str, Any]] = {}
        # The keys of ``rows`` and the unused ones, for picking either at random in O(1).
        self.live, self.free = _KeySet(), _KeySet()
        for key in range(1, options.keys + 1):
            self.free.add(key)
        self.events: list[Event] = []
        self.lsn = 24_000_000 + self.rng.randrange(1000)
        self.commit_lsn: int | None = None
        self.clock_ms = 1_704_103_200_000 + self.rng.randrange(10**8)  # 2024-01-01T10:00Z-ish
        self.tx = 500
        self.truncated = False

    def _take(self, key: int) -> None:
        self.free.remove(key)
        self.live.add(key)

    def _release(self, key: int) -> None:
        self.live.remove(key)
        self.free.add(key)

    # values ------------------------------------------------------------------------------

    def _note(self) -> str | None:
        roll = self.rng.random()
        if roll < 0.15:
            return None
        words = self.rng.choices(
            ["alpha", "beta", "gamma", "delta", "ünïcode", 'quote"d', "tab\tbed", "line\nbreak"],
            k=self.rng.choice([3, 8, 60]),
        )
        return " ".join(words)

    def _row(self, key: int) -> dict[str, Any]:
        r = self.rng
        shipped = None
        if r.random() < 0.6:
            micros = r.randrange(1_600_000_000_000_000, 1_800_000_000_000_000)
            shipped = micros - micros % r.choice([1, 1000, 1_000_000])
        return {
            "id": key,
            "customer": r.choice(["acme", "globex", "initech", "umbrella", "", None]),
            "amount": None
            if r.random() < 0.05
            else Decimal(r.randrange(-100_000, 10_000_000)).scaleb(-2),
            "quantity": r.randrange(-5, 1000),
            "price": round(r.uniform(-10, 5000), r.choice([0, 1, 2])),
            "active": r.choice([True, False, None]),
            "order_date": r.randrange(-1000, 25_000),
            # µs outside ±1e14 (1966-1973), where schemaless integers are read as ms.
            "updated_at": r.choice([-1, 1, 1, 1]) * r.randrange(10**14, 2 * 10**15),
            "shipped_at": shipped,
            "note": self._note(),
            "attrs": None
            if r.random() < 0.3
            else json.dumps({"k": r.randrange(100), "tags": ["a", "b"][: r.randrange(3)]}),
        }

    # stream ------------------------------------------------------------------------------

    def _emit(self, op: str, before: Any, after: Any, snapshot: str = "false") -> None:
        self.lsn += self.rng.randrange(8, 400)
        self.events.append(
            Event(op, before, after, self.commit_lsn, self.lsn, self.clock_ms, self.tx, snapshot)
        )

    def _commit(self) -> None:
        self.lsn += self.rng.randrange(8, 64)
        self.commit_lsn = self.lsn
        self.tx += 1
        self.clock_ms += self.rng.choice([0, 0, 0, 1, 3])  # many transactions per millisecond

    def snapshot(self, count: int) -> None:
        keys = self.rng.sample(range(1, self.o.keys + 1), k=min(count, self.o.keys))
        self.lsn += 1000
        snapshot_lsn = self.lsn
        for i, key in enumerate(sorted(keys)):
            self.rows[key] = self._row(key)
            self._take(key)
            flag = "last" if i == len(keys) - 1 else ("first" if i == 0 else "true")
            self.events.append(
                Event("r", None, dict(self.rows[key]), None, snapshot_lsn, self.clock_ms, 0, flag)
            )
        self._commit()

    def transaction(self) -> None:
        for _ in range(self.rng.choice([1, 1, 1, 2, 3, 5])):
            self._change()
        self._commit()

    def _change(self) -> None:
        r = self.rng
        free = self.o.keys - len(self.rows)
        roll = r.random()
        if not self.rows or (roll < 0.3 and free > 0):
            key = self.free.pick(r)
            self.rows[key] = self._row(key)
            self._take(key)
            self._emit("c", None, dict(self.rows[key]))
            return
        key = self.live.pick(r)
        if roll < 0.80:
            old = self.rows[key]
            new = self._row(key)
            for name in r.sample([c for c, _, _ in COLUMNS[1:]], k=r.randrange(0, 5)):
                new[name] = old[name]  # some columns unchanged
            if r.random() < 0.5:
                new["note"] = old["note"]
            self.rows[key] = new
            sent = dict(new)
            unchanged_note = new["note"] is not None and new["note"] == old["note"]
            if unchanged_note and len(new["note"]) > TOAST_THRESHOLD:
                sent["note"] = UNAVAILABLE  # unchanged TOASTed value
            self._emit("u", None, sent)
        elif roll < 0.93 or free <= 0:
            del self.rows[key]
            self._release(key)
            self._emit("d", {"id": key}, None)
        else:  # primary key change: delete of the old key, create of the new one
            new_key = self.free.pick(r)
            row = dict(self.rows.pop(key))
            row["id"] = new_key
            row["quantity"] = r.randrange(1000)
            self.rows[new_key] = row
            self._release(key)
            self._take(new_key)
            self._emit("d", {"id": key}, None)
            if not self.o.key_change_toast:
                self._emit("c", None, dict(row))
                return
            sent = dict(row)
            if row["note"] is not None and len(row["note"]) > TOAST_THRESHOLD:
                sent["note"] = UNAVAILABLE
            self.events.append(replace(self.events[-1], op="c", before=None, after=sent))

    def truncate(self) -> None:
        for key in list(self.rows):
            self._release(key)
        self.rows.clear()
        self._emit("t", None, None)
        self._commit()
        self.truncated = True

    def run(self) -> None:
        self.snapshot(max(self.o.keys // 3, 1))
        truncate_at = None
        if self.o.truncate and self.o.shape != "flat" and self.o.events >= 200:
            truncate_at = int(self.o.events * self.rng.uniform(0.2, 0.5))
        while len(self.events) < self.o.events:
            if truncate_at is not None and not self.truncated and len(self.events) >= truncate_at:
                self.truncate()
            else:
                self.transaction()


# --- rendering -----------------------------------------------------------------------------


def _wire_row(row: dict[str, Any] | None, keys_only: bool = False) -> dict[str, Any] | None:
    """A row as Debezium's JsonConverter writes it (precise decimals, adaptive time)."""
    if row is None:
        return None
    out: dict[str, Any] = {}
    for name, _, _ in COLUMNS:
        if name not in row:
            continue
        value = row[name]
        if value == UNAVAILABLE or value is None:
            out[name] = value
        elif name == "amount":
            out[name] = _decimal_b64(value, 2)
        elif name == "shipped_at":
            moment = EPOCH + dt.timedelta(microseconds=value)
            text = moment.strftime("%Y-%m-%dT%H:%M:%S")
            if moment.microsecond:
                text += f".{moment.microsecond:06d}".rstrip("0")
            out[name] = text + "Z"
        else:
            out[name] = value
    return out


def _envelope_schema(options: GeneratorOptions) -> dict[str, Any]:
    topic = f"{options.prefix}.{options.table}"
    value_fields = [{**spec, "field": name} for name, _, spec in COLUMNS]
    value = {"type": "struct", "fields": value_fields, "optional": True, "name": f"{topic}.Value"}
    source = {
        "type": "struct",
        "name": "io.debezium.connector.postgresql.Source",
        "optional": False,
        "field": "source",
        "fields": [
            {"type": "string", "optional": False, "field": "version"},
            {"type": "string", "optional": False, "field": "connector"},
            {"type": "string", "optional": False, "field": "name"},
            {"type": "int64", "optional": False, "field": "ts_ms"},
            {
                "type": "string",
                "optional": True,
                "name": "io.debezium.data.Enum",
                "version": 1,
                "parameters": {"allowed": "true,first,first_in_data_collection,last,false"},
                "default": "false",
                "field": "snapshot",
            },
            {"type": "string", "optional": False, "field": "db"},
            {"type": "string", "optional": True, "field": "sequence"},
            {"type": "string", "optional": False, "field": "schema"},
            {"type": "string", "optional": False, "field": "table"},
            {"type": "int64", "optional": True, "field": "txId"},
            {"type": "int64", "optional": True, "field": "lsn"},
            {"type": "int64", "optional": True, "field": "xmin"},
        ],
    }
    return {
        "type": "struct",
        "name": f"{topic}.Envelope",
        "version": 2,
        "optional": False,
        "fields": [
            {**value, "field": "before"},
            {**value, "field": "after"},
            source,
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }


class Renderer:
    def __init__(self, options: GeneratorOptions) -> None:
        self.o = options
        self.schema_json = json.dumps(_envelope_schema(options), separators=(",", ":"))
        self.db_schema, self.db_table = options.table.split(".", 1)

    def render(self, event: Event, processed_ms: int) -> str:
        if self.o.shape == "flat":
            return self._flat(event)
        payload = {
            "before": _wire_row(event.before),
            "after": _wire_row(event.after),
            "source": {
                "version": "2.7.3.Final",
                "connector": "postgresql",
                "name": self.o.prefix,
                "ts_ms": event.ts_ms,
                "snapshot": event.snapshot,
                "db": "app",
                "sequence": json.dumps(
                    [
                        None if event.commit_lsn_prev is None else str(event.commit_lsn_prev),
                        str(event.lsn),
                    ]
                ),
                "schema": self.db_schema,
                "table": self.db_table,
                "txId": event.tx_id,
                "lsn": event.lsn,
                "xmin": None,
            },
            "op": event.op,
            "ts_ms": processed_ms,
            "transaction": None,
        }
        if event.op == "t":
            payload["before"] = payload["after"] = None
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        if self.o.shape == "schema":
            return f'{{"schema":{self.schema_json},"payload":{body}}}'
        return body

    def _flat(self, event: Event) -> str:
        deleted = event.op == "d"
        row = dict(_wire_row(event.before if deleted else event.after) or {})
        if deleted:  # rewrite mode: the before image, which is key-only under DEFAULT identity
            row = {name: row.get(name) for name, _, _ in COLUMNS}
        row.update(
            {
                "__op": event.op,
                "__lsn": event.lsn,
                "__source_ts_ms": event.ts_ms,
                "__deleted": "true" if deleted else "false",
            }
        )
        return json.dumps(row, separators=(",", ":"), ensure_ascii=False)


def _partition(key: int, partitions: int) -> int:
    return (key * 2654435761 % 2**32) % partitions


def export_row(row: dict[str, Any]) -> dict[str, Any]:
    """A source row in ``cdclake export`` form."""
    out: dict[str, Any] = {}
    for name, spark_type, _ in COLUMNS:
        value = row.get(name)
        if value is None:
            out[name] = None
        elif spark_type.startswith("decimal"):
            out[name] = f"{value:.2f}"
        elif spark_type == "date":
            out[name] = (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
        elif spark_type == "timestamp":
            moment = EPOCH + dt.timedelta(microseconds=value)
            out[name] = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
        else:
            out[name] = value
    return out


def column_types(shape: str) -> dict[str, str]:
    """Types a schemaless shape needs from config (``column_types``); none with a schema."""
    if shape == "schema":
        return {}
    return {name: spark_type for name, spark_type, _ in COLUMNS}


def generate_files(out: Path, options: GeneratorOptions) -> dict[str, Any]:
    """Write change files, ``expected.jsonl`` and ``table.json`` under ``out``."""
    sim = Simulation(options)
    sim.run()
    renderer = Renderer(options)
    topic = f"{options.prefix}.{options.table}"
    streams: list[list[str]] = [[] for _ in range(options.partitions)]
    processed = sim.clock_ms
    rng = random.Random(options.seed + 1)
    for event in sim.events:
        processed += rng.choice([0, 1])
        row = event.after or event.before
        p = 0 if row is None else _partition(int(row["id"]), options.partitions)
        streams[p].append(renderer.render(event, processed))
        if event.op == "d" and options.shape != "flat":
            streams[p].append("null")  # the tombstone that follows a delete
    if options.redeliver:
        for stream in streams:  # a connector restart resends a run of events (new ts_ms)
            if len(stream) > 20:
                start = rng.randrange(len(stream) // 2, len(stream) - 5)
                length = rng.randrange(3, min(60, len(stream) - start))
                stream[start + length : start + length] = stream[start : start + length]
    files = 0
    folder = out / "topics" / topic
    for p, stream in enumerate(streams):
        part_dir = folder / f"partition={p}"
        part_dir.mkdir(parents=True, exist_ok=True)
        for offset in range(0, len(stream), options.flush_size):
            chunk = stream[offset : offset + options.flush_size]
            name = f"{topic}+{p}+{offset:010d}.json"
            (part_dir / name).write_text("\n".join(chunk) + "\n")
            files += 1
    expected = [export_row(sim.rows[k]) for k in sorted(sim.rows)]
    (out / "expected.jsonl").write_text(
        "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in expected)
    )
    meta = {
        "table": options.table,
        "topic": topic,
        "key": list(KEY),
        "shape": options.shape,
        "column_types": column_types(options.shape),
        "events": len(sim.events),
        "files": files,
        "live_rows": len(expected),
    }
    (out / "table.json").write_text(json.dumps(meta, indent=2))
    return meta
