"""The live rows of a lake table read by hudi-rs (PyPI ``hudi``): no JVM, no Spark.

A second implementation of what ``cdclake export`` prints: the rows a snapshot
query of the Hudi table returns (COPY_ON_WRITE, or MERGE_ON_READ with base and
log files merged), in exactly the form of
:func:`cdclake_merge.export.rows_as_json` — integers as numbers, decimals as
strings with their exact scale, dates ``YYYY-MM-DD``, timestamps
``YYYY-MM-DDTHH:MM:SS.ffffff`` in UTC, binary as base64; rows sorted by key.

``key`` and ``columns`` are the merge's checkpoint (``checkpoint["key"]`` and
``TableState.columns``): the checkpoint, not the Hudi schema, says which
columns are the source's, so Hudi's ``_hoodie_*`` columns stay out.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdclake.errors import one_line

# The merge's metadata columns (cdclake_merge.transforms.METADATA_COLUMNS): importing that
# module would import pyspark, which this reader exists to do without.
METADATA_COLUMNS = ("_cdc_order", "_cdc_lsn", "_cdc_op", "_cdc_source_ts")
IS_DELETED = "_hoodie_is_deleted"

_DECIMAL = re.compile(r"^decimal\(\s*\d+\s*,\s*(\d+)\s*\)$")
_METADATA_TYPES = {
    "_cdc_order": "string",
    "_cdc_lsn": "bigint",
    "_cdc_op": "string",
    "_cdc_source_ts": "timestamp",
}

Formatter = Callable[[Any], Any]


class LakeReadError(RuntimeError):
    """hudi-rs could not read the table; the message is one line naming it."""


def local_spark(warehouse: str | Path) -> Callable[[], Any]:
    """A factory that starts the local SparkSession on ``warehouse`` on first use, once.

    Commands that may not need Spark (nothing to merge, a table hudi-rs reads) take this
    instead of a session, so they start no JVM.
    """
    holder: dict[str, Any] = {}

    def get() -> Any:
        if "spark" not in holder:
            from cdclake_merge.session import local_session

            spark = local_session(Path(str(warehouse).removeprefix("file://")))
            # Spark's own metastore client creates the embedded metastore's schema on first
            # use; Hudi's catalog sync opens another client that does not, and fails on a
            # warehouse no Spark catalog call has touched yet (a commit to an existing table
            # makes none before the sync).
            spark.sql("SHOW DATABASES").collect()
            holder["spark"] = spark
        return holder["spark"]

    return get


@dataclass(frozen=True)
class LakeRows:
    """A lake table's live rows as export dicts (sorted by key), and how they were read."""

    rows: list[dict[str, Any]]
    key: tuple[str, ...]
    columns: dict[str, str]  # name -> Spark type, the merge's metadata columns excluded
    version: int
    reader: str  # "hudi-rs", or "spark (hudi-rs: why not)"


def read_lake(
    warehouse: str | Path, table: str, spark_factory: Callable[[], Any] | None = None
) -> LakeRows | None:
    """The live rows of ``DATABASE.TABLE`` under ``warehouse``; None while it has no commit.

    hudi-rs reads without a JVM; Spark (``spark_factory``, by default :func:`local_spark`)
    only where hudi-rs cannot read the table yet. ``export``, ``validate`` and the demo read
    through here.
    """
    from cdclake_merge.sink import open_existing_sink
    from cdclake_merge.storage import LocalFileSystem

    factory = spark_factory or local_spark(warehouse)
    sink = open_existing_sink(
        warehouse=str(Path(warehouse).resolve()),
        table=table,
        fs=LocalFileSystem(),
        spark_factory=factory,
    )
    if sink is None:
        return None
    state = sink.load()
    if state.version == 0:
        return None
    key = tuple(state.checkpoint["key"])
    columns = {n: t for n, t in state.columns if not n.startswith("_cdc_")}
    if not state.exists:  # committed, but no data file yet (every change so far quarantined)
        return LakeRows([], key, columns, state.version, "checkpoint")
    try:
        rows = read_live_rows(sink.root, key, list(columns.items()))
        return LakeRows(rows, key, columns, state.version, "hudi-rs")
    except Exception as exc:  # hudi-rs is the fast path; Spark reads every Hudi table
        reason = one_line(str(exc), 200)
    from cdclake_merge.export import rows_as_json

    live = sink.read_live(factory(), state)
    rows = [json.loads(line) for line in rows_as_json(live, key)] if live is not None else []
    return LakeRows(rows, key, columns, state.version, f"spark (hudi-rs: {reason})")


def read_live_rows(
    table_path: str, key: Sequence[str], columns: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    """The table's live rows as export dicts, sorted by ``key``.

    ``table_path`` is the Hudi base path (a local path or a URI hudi-rs knows:
    ``file://``, ``s3://``...). ``columns`` are ``(name, spark type)`` pairs.
    """
    return list(iter_live_rows(table_path, key, columns))


def iter_live_rows(
    table_path: str, key: Sequence[str], columns: Sequence[tuple[str, str]]
) -> Iterator[dict[str, Any]]:
    batches = _read_snapshot(table_path, [*(n for n, _ in columns), *METADATA_COLUMNS])
    yield from rows_from_batches(batches, key, columns)


def rows_from_batches(
    batches: Sequence[Any], key: Sequence[str], columns: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Export dicts from Arrow record batches holding at least ``columns`` and the metadata."""
    typed = [*columns, *_METADATA_TYPES.items()]
    names = [n for n, _ in typed]
    formatters = [_formatter(t) for _, t in typed]
    missing = set(key) - set(names)
    if missing:
        raise ValueError(f"key columns {sorted(missing)} are not among the table's columns")
    rows: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        schema_names = set(batch.schema.names)
        absent = [n for n in names if n not in schema_names]
        if absent:
            raise ValueError(f"the table has no column {absent[0]!r}")
        values = {n: batch.column(batch.schema.get_field_index(n)).to_pylist() for n in names}
        # hudi-rs merges on the ordering field but does not look at _hoodie_is_deleted (a
        # delete the writer kept as a data record rather than a delete block); Spark drops it.
        deleted = (
            batch.column(batch.schema.get_field_index(IS_DELETED)).to_pylist()
            if IS_DELETED in schema_names
            else [None] * batch.num_rows
        )
        for i in range(batch.num_rows):
            if deleted[i]:
                continue
            raw = {n: values[n][i] for n in names}
            out = {
                n: None if raw[n] is None else f(raw[n])
                for n, f in zip(names, formatters, strict=True)
            }
            rows.append((tuple(raw[k] for k in key), out))
    rows.sort(key=lambda pair: pair[0])
    return [row for _, row in rows]


def _read_snapshot(table_path: str, projection: Sequence[str]) -> list[Any]:
    try:
        from hudi import HudiReadOptions, HudiTableBuilder
    except ImportError as exc:  # pragma: no cover - hudi is in requirements.txt
        raise LakeReadError(f"the hudi package (hudi-rs) is not installed: {exc}") from None
    try:
        table = HudiTableBuilder.from_base_uri(table_path).build()
        available = set(table.get_schema().names)
        # The deleted flag only where the table has one: projecting an absent column fails.
        wanted = [*projection, *([IS_DELETED] if IS_DELETED in available else [])]
        return list(table.read(HudiReadOptions(projection=wanted)))
    except Exception as exc:  # hudi-rs raises its own error types from Rust
        message = one_line(str(exc), limit=None)
        raise LakeReadError(f"hudi-rs cannot read {table_path}: {message}") from None


def _formatter(spark_type: str) -> Formatter:
    """How :func:`cdclake_merge.export.exportable` renders a value of this Spark type."""
    decimal = _DECIMAL.match(spark_type)
    if decimal:
        exponent = Decimal(1).scaleb(-int(decimal.group(1)))
        return lambda v: _plain(Decimal(v).quantize(exponent))
    if spark_type == "date":
        return lambda v: v.isoformat()
    if spark_type in ("timestamp", "timestamp_ntz"):
        return _timestamp
    if spark_type == "binary":
        return lambda v: base64.b64encode(v).decode("ascii")
    return _same


def _same(value: Any) -> Any:
    return value


def _plain(value: Decimal) -> str:
    # Spark casts a decimal to string without an exponent (0E-8 is "0.00000000").
    return format(value, "f")


def _timestamp(value: dt.datetime) -> str:
    if value.tzinfo is not None:  # Spark's session time zone is UTC
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.isoformat(timespec="microseconds")
