"""The merge tests' helpers: hand-written Debezium events, lakes on real Hudi, the CLI."""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdclake_merge.job import line_offsets
from cdclake_merge.transforms import IMAGE_PREFIX, parse_lines

SOURCE_TS = 1_700_000_000_000

# The pure transforms' tiny frames (test_transforms, test_history): a table of key ``id`` and
# two columns, its decoded events and its stored state.
KEY = ("id",)
COLUMNS = [("id", "int"), ("name", "string"), ("bio", "string")]
EVENT_DDL = (
    "id int, name string, bio string, _cdc_order string, _cdc_lsn bigint, _cdc_op string, "
    "_cdc_source_ts timestamp, _cdc_toast array<string>"
)
STATE_DDL = (
    "id int, name string, bio string, _cdc_order string, _cdc_lsn bigint, _cdc_op string, "
    "_cdc_source_ts timestamp, _cdc_deleted boolean"
)


def source(
    lsn: int,
    commit: int | None = None,
    ts_ms: int = SOURCE_TS,
    *,
    first_after_snapshot: bool = False,
) -> dict[str, Any]:
    """A Debezium 2.7 source block at ``lsn``; ``sequence[0]`` is ``commit`` (the change's own
    LSN if None), or null for the first transaction streamed after a snapshot."""
    last_commit = None if first_after_snapshot else str(lsn if commit is None else commit)
    sequence = json.dumps([last_commit, str(lsn)])
    return {
        "version": "2.7.3.Final",
        "connector": "postgresql",
        "name": "test",
        "ts_ms": ts_ms,
        "snapshot": "false",
        "db": "app",
        "sequence": sequence,
        "schema": "public",
        "table": "t",
        "txId": 1,
        "lsn": lsn,
        "xmin": None,
    }


def envelope(
    op: str,
    *,
    lsn: int,
    commit: int | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    ts_ms: int = SOURCE_TS,
    first_after_snapshot: bool = False,
) -> dict[str, Any]:
    return {
        "before": before,
        "after": after,
        "source": source(lsn, commit, ts_ms, first_after_snapshot=first_after_snapshot),
        "op": op,
        "ts_ms": ts_ms + 5,
        "transaction": None,
    }


def snapshot_reads(
    rows: list[tuple[int, str]], lsn: int, *, ends: bool = True, ts_ms: int = SOURCE_TS
) -> list[dict[str, Any]]:
    """A table's reads of an initial snapshot at ``lsn``, marked as Debezium 2.7 marks them
    (``first_in_data_collection``, ``true``…, ``last_in_data_collection``); ``ends=False``:
    the snapshot's first reads only, its last one not written yet."""
    events: list[dict[str, Any]] = []
    for i, (id_, name) in enumerate(rows):
        event = envelope("r", lsn=lsn, after={"id": id_, "name": name}, ts_ms=ts_ms)
        last = ends and i == len(rows) - 1
        event["source"]["snapshot"] = (
            "last_in_data_collection" if last else "first_in_data_collection" if i == 0 else "true"
        )
        events.append(event)
    return events


def with_schema(payload: dict[str, Any], fields: list[dict[str, Any]]) -> dict[str, Any]:
    value = {"type": "struct", "fields": fields, "optional": True, "name": "t.Value"}
    return {
        "schema": {
            "type": "struct",
            "name": "t.Envelope",
            "fields": [
                {**value, "field": "before"},
                {**value, "field": "after"},
                {"type": "struct", "fields": [], "field": "source"},
                {"type": "string", "field": "op"},
            ],
        },
        "payload": payload,
    }


def decimal_b64(value: str, scale: int) -> str:
    unscaled = int(Decimal(value).scaleb(scale))
    length = max((unscaled.bit_length() + 8) // 8, 1)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def line(event: dict[str, Any] | None) -> str:
    return json.dumps(event)


def lines_frame(spark: Any, texts: list[str], file: str = "f") -> Any:
    """``texts`` as ``read_lines`` reads one change file, in one partition: ``file``,
    ``_split``, ``_row`` (counted from 0, as Spark's row ids are), ``text``."""
    rows = [(file, 0, row, text) for row, text in enumerate(texts)]
    schema = "file string, _split bigint, _row bigint, text string"
    return spark.createDataFrame(rows, schema).coalesce(1)


def parsed_in_python(lines: Any, spec: Any) -> Any:
    """Lines as read, all parsed in Python and numbered within their files, as a run parses
    the lines the JVM did not decide."""
    return parse_lines(lines, spec, line_offsets(lines))


# --- lakes: a changes folder and a real Hudi table, merged as the CLI and Glue do -------------

_tables = itertools.count()
CLI = [sys.executable, "-m", "cdclake.cli"]


class Lake:
    """A changes folder and a Hudi table (``t<n>.orders``), written and merged like the CLI."""

    def __init__(
        self,
        spark: Any,
        root: Path,
        *,
        table_type: str = "COPY_ON_WRITE",
        partition: tuple[str, ...] = (),
        key: tuple[str, ...] = ("id",),
        services: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        from cdclake_merge.job import MergeOptions
        from cdclake_merge.sink import open_sink
        from cdclake_merge.storage import LocalFileSystem

        self.spark, self.root, self.key = spark, root, key
        self.changes = root / "changes"
        self.warehouse = root / "warehouse"
        self.table = f"t{next(_tables)}.orders"
        self.fs = LocalFileSystem()
        self.sink = open_sink(
            warehouse=str(self.warehouse),
            table=self.table,
            key=key,
            fs=self.fs,
            spark_factory=lambda: spark,
            table_type=table_type,
            partition_fields=partition,
            **(services or {}),  # the sink's table services (open_sink's keywords)
        )
        self.options = MergeOptions(table=self.table, key=key, changes=str(self.changes), **options)

    def write(self, name: str, events: list[Any], partition: int = 0) -> Path:
        folder = self.changes / "topics" / "app.public.orders" / f"partition={partition}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_text("".join((e if isinstance(e, str) else line(e)) + "\n" for e in events))
        return path

    def merge(self) -> Any:
        from cdclake_merge.job import run_merge

        return run_merge(lambda: self.spark, self.fs, self.sink, self.options)

    def rows(self) -> list[dict[str, Any]]:
        from cdclake_merge.export import rows_as_json

        live = self.sink.read_live(self.spark, self.sink.load())
        return [] if live is None else [json.loads(r) for r in rows_as_json(live, self.key)]

    def visible(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if not k.startswith("_")} for r in self.rows()]

    def place(self, **overrides: Any) -> Any:
        """The lake as the operator commands see the local stack's public.orders (a LakePlace),
        ``overrides`` on top."""
        from cdclake.ops import LakePlace

        return LakePlace(
            **{
                "env": "local",
                "source_table": "public.orders",
                "lake_table": self.table,
                "warehouse": str(self.warehouse),
                "changes": str(self.changes),
                "quarantine_root": self.sink.quarantine_root,
                "key": self.key,
                **overrides,
            }
        )


def catalog_location(lake: Lake) -> str:
    """The table's catalog entry's own storage location, what Athena and Hive read: Spark's
    DESCRIBE shows the ``path`` property Hudi's sync rewrites, which moved without a swap."""
    database, name = lake.table.split(".")
    client = lake.spark._jsparkSession.sharedState().externalCatalog().unwrapped().client()
    return str(client.getTable(database, name).storage().locationUri().get().toString())


def visible(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


def expected_rows(generated: Path) -> list[dict[str, Any]]:
    return [json.loads(r) for r in (generated / "expected.jsonl").read_text().splitlines()]


# --- a local session in a process of its own ---------------------------------------------------


def run_local_session(
    warehouse: Path, then: str, *, java_options: str | None = None
) -> subprocess.CompletedProcess[str]:
    """A fresh Python process that starts ``session = local_session(warehouse)`` and runs the
    statements ``then``; ``java_options`` replace the driver's extra JVM options if given."""
    from cdclake_merge.session import JAVA_OPTIONS_ENV

    code = (
        "import sys; from cdclake_merge.session import local_session; "
        f"session = local_session(sys.argv[1]); {then}"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(warehouse)],
        env=None if java_options is None else {**os.environ, JAVA_OPTIONS_ENV: java_options},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )


# --- the CLI as users run it -----------------------------------------------------------------


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )


def merge_args(changes: Path, warehouse: Path, *extra: str) -> list[str]:
    return [
        "merge",
        "--changes",
        str(changes),
        "--warehouse",
        str(warehouse),
        "--table",
        "cli.orders",
        "--key",
        "id",
        "--json",
        *extra,
    ]


def export_rows(warehouse: Path, out: Path, table: str = "cli.orders") -> list[dict[str, Any]]:
    result = run_cli("export", "--warehouse", str(warehouse), "--table", table, "--out", str(out))
    assert result.returncode == 0, result.stderr
    return visible([json.loads(line) for line in out.read_text().splitlines()])


def compact_line(event: dict[str, Any]) -> str:
    """A line as Kafka Connect's JsonConverter writes it: no spaces, so its head is found."""
    return json.dumps(event, separators=(",", ":"))


def field(
    name: str, kafka_type: str, logical: str | None = None, **parameters: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"field": name, "type": kafka_type, "optional": True}
    if logical:
        spec["name"] = logical
    if parameters:
        spec["parameters"] = parameters
    return spec


def outcome_rows(parsed: list[Any]) -> list[tuple[Any, ...]]:
    """Parsed outcomes, comparable across parsers: row values by name (from ``row_json`` or,
    for the JVM's lines, their image column), nulls left out, and lines unnumbered (the JVM's
    lane numbers none)."""
    rows = []
    for r in (r for r in parsed if r["kind"] != "schema"):
        fields = r.asDict()
        images = [v for k, v in fields.items() if k.startswith(IMAGE_PREFIX) and v is not None]
        row = images[0].asDict() if images else None
        if r["row_json"] is not None:
            row = json.loads(r["row_json"])
        values = None if row is None else sorted((k, v) for k, v in row.items() if v is not None)
        rows.append(
            (
                r["file"],
                r["kind"],
                r["op"],
                r["order"],
                r["source_ts_ms"],
                repr(values),
                tuple(r["toast"] or ()),
                r["reason"],
                r["raw"],
            )
        )
    return sorted(rows, key=repr)


@contextmanager
def moto_bucket(bucket: str) -> Iterator[Any]:
    """An S3 client with ``bucket`` on moto in process, started without resetting other
    areas' backends; the bucket is emptied and deleted after."""
    import boto3
    import moto

    mock = moto.mock_aws()
    mock.start(reset=False)
    try:
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=bucket)
        try:
            yield client
        finally:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                for item in page.get("Contents", []):
                    client.delete_object(Bucket=bucket, Key=item["Key"])
            client.delete_bucket(Bucket=bucket)
    finally:
        mock.stop(remove_data=False)


# --- a history table's rows (tests/merge/test_history_runs.py, test_rebuild_history.py) -------


def history_of(lake: Lake) -> list[dict[str, Any]]:
    """Every row of the lake's history table, Hudi's own columns left out."""
    frame = lake.spark.read.format("hudi").load("file://" + lake.sink.history_root)
    ours = frame.drop(*(c for c in frame.columns if c.startswith("_hoodie")))
    return [r.asDict() for r in ours.collect()]


def seconds(time: Any) -> int | None:
    """A validity time as seconds after SOURCE_TS (changes commit ``lsn`` seconds after it)."""
    first = dt.datetime.fromtimestamp(SOURCE_TS / 1000, dt.UTC).replace(tzinfo=None)
    return None if time is None else round((time - first).total_seconds())


def by_key(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """History rows by ``id``, each key's in change order."""
    keys: dict[int, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["id"], r["_cdc_order"])):
        keys.setdefault(row["id"], []).append(row)
    return keys


def versions(rows: list[dict[str, Any]], *columns: str) -> dict[int, list[tuple[Any, ...]]]:
    """Each key's versions as (op, lsn, ``columns``…, valid from, valid to), times as seconds."""
    return {
        key: [
            (
                r["_cdc_op"],
                r["_cdc_lsn"],
                *(r[c] for c in columns),
                seconds(r["_cdc_valid_from"]),
                seconds(r["_cdc_valid_to"]),
            )
            for r in kept
        ]
        for key, kept in by_key(rows).items()
    }
