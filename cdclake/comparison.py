"""The comparison core of ``cdclake validate``: canonical values, one hash per key, the report.

Both sides are reduced to one hash per key over *canonical* column texts, so a large table
is compared by moving keys and 32-character hashes, and whole rows are fetched only for the
keys whose hashes differ. Canonical texts compare values, not spellings:

* numeric: trailing zeros trimmed (``trim_scale``): ``VariableScaleDecimal`` lands as
  ``decimal(38,18)``, so ``1.5`` and ``1.500000000000000000`` are one value;
* float/real: the IEEE-754 double's bits in hex: PostgreSQL and Python spell floats
  differently;
* timestamp, timestamptz: ``YYYY-MM-DDTHH:MM:SS.ffffff`` in UTC (the lake stores instants);
* time: ``HH:MM:SS.ffffff`` (the lake stores time of day as text);
* json, jsonb and arrays: PostgreSQL's ``jsonb`` output (key order, whitespace and number
  spelling are not values);
* bytea: hex (the lake exports binary as base64); uuid: lower case; date ``YYYY-MM-DD``;
  boolean ``true``/``false``; integers and everything else: PostgreSQL's text output.

A side is anything with per-key hashes and, on request, canonical rows (:class:`Side`). Here
the lake side computes them in Python from row dicts (:class:`RowsSide`); the source side
computes the same texts in SQL (``cdclake.validate.PostgresSide``). :func:`compare` takes any
two sides, so the same core compares two plain row iterators (:func:`compare_rows`). Pure
Python, no database: its fast tests are its mutation test's scope (tests/mutation/run_fast.py).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import math
import re
import struct
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

Key = tuple[str, ...]
Canonical = str | None
KINDS = (
    "int",
    "numeric",
    "float",
    "bool",
    "date",
    "timestamp",
    "timestamptz",
    "time",
    "uuid",
    "json",
    "bytes",
    "text",
)
EXAMPLES_PER_COLUMN = 3
# Whole rows are fetched for at most this many differing keys; beyond it, the per-column
# counts are lower bounds (the key-level counts stay exact).
MAX_DETAILED_KEYS = 10_000


# --- canonical values ---------------------------------------------------------------------


_TYPE_MODIFIER = re.compile(r"\(\s*\d+(?:\s*,\s*\d+)?\s*\)")


def kind_of(pg_type: str, category: str = "") -> str:
    """The comparison kind of a PostgreSQL type (``format_type`` text, ``typcategory``)."""
    # The type modifier may sit inside the name: timestamp(3) with time zone, numeric(10,2)[].
    base = _TYPE_MODIFIER.sub("", pg_type).strip()
    if category == "A" or base.endswith("[]"):
        return "json"
    return {
        "smallint": "int",
        "integer": "int",
        "bigint": "int",
        "numeric": "numeric",
        "real": "float",
        "double precision": "float",
        "boolean": "bool",
        "date": "date",
        "timestamp without time zone": "timestamp",
        "timestamp with time zone": "timestamptz",
        "time without time zone": "time",
        "uuid": "uuid",
        "json": "json",
        "jsonb": "json",
        "bytea": "bytes",
    }.get(base, "text")


def canonical(kind: str, value: Any) -> Canonical:
    """The canonical text of a lake (or any Python) value.

    Must equal what ``cdclake.validate.sql_canonical`` computes in PostgreSQL.
    """
    if value is None:
        return None
    if kind == "int":
        return str(int(value))
    if kind == "numeric":
        return _numeric(value)
    if kind == "float":
        return _float(float(value))
    if kind == "bool":
        if isinstance(value, str):
            return "true" if value.lower() in ("t", "true", "1") else "false"
        return "true" if value else "false"
    if kind == "date":
        if isinstance(value, int):  # days since the epoch (schema-less change files)
            return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
        if isinstance(value, dt.datetime):
            value = value.date()
        if isinstance(value, dt.date):
            return value.isoformat()
        return dt.date.fromisoformat(str(value)[:10]).isoformat()
    if kind in ("timestamp", "timestamptz"):
        return _timestamp(value)
    if kind == "time":
        if isinstance(value, dt.time):
            return value.isoformat(timespec="microseconds")
        return dt.time.fromisoformat(str(value)).isoformat(timespec="microseconds")
    if kind == "uuid":
        return str(uuid.UUID(str(value)))
    if kind == "json":
        parsed = (
            json.loads(value, parse_float=Decimal, parse_int=Decimal)
            if isinstance(value, str | bytes)
            else value
        )
        return jsonb_text(parsed)
    if kind == "bytes":
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value).hex()
        return base64.b64decode(str(value)).hex()
    return str(value)


def _numeric(value: Any) -> str:
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    if number.is_nan():
        return "NaN"
    if number.is_infinite():
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    text = format(number, "f")
    # trim_scale: no trailing fractional zeros, no bare decimal point.
    return text.rstrip("0").rstrip(".") if "." in text else text


def _float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return struct.pack(">d", value + 0.0).hex()


def _timestamp(value: Any) -> str:
    if isinstance(value, int | float):  # epoch microseconds or milliseconds
        micros = int(value) if abs(value) >= 10**14 else int(value) * 1000
        value = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    if not isinstance(value, dt.datetime):
        value = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f")


def jsonb_text(value: Any) -> str:
    """A JSON value as PostgreSQL's ``jsonb`` output prints it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Decimal | int | float):
        # jsonb keeps a number's scale (2.50 stays 2.50) but not its exponent or sign of zero.
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        text = format(number, "f")
        return text.lstrip("-") if number == 0 else text
    if isinstance(value, str):
        return _jsonb_string(value)
    if isinstance(value, Mapping):
        # jsonb orders keys by length in bytes, then bytewise.
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return "{" + ", ".join(f"{_jsonb_string(k)}: {jsonb_text(value[k])}" for k in keys) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(jsonb_text(v) for v in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_JSON_ESCAPES["\t"] = "\\t"


def _jsonb_string(text: str) -> str:
    out = []
    for char in text:
        if char in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def row_text(values: Sequence[Canonical]) -> str:
    """One unambiguous string for a row: each value length-prefixed, NULL distinct from ''."""
    return "|".join("N" if v is None else f"{len(v)}:{v}" for v in values)


def row_hash(values: Sequence[Canonical]) -> str:
    return hashlib.md5(row_text(values).encode(), usedforsecurity=False).hexdigest()


# --- sides ----------------------------------------------------------------------------------


class Side(Protocol):
    """One table, seen as per-key hashes and, on request, canonical rows."""

    def key_hashes(self) -> Iterator[tuple[Key, str]]: ...
    def rows(self, keys: Sequence[Key]) -> dict[Key, dict[str, Canonical]]: ...


class RowsSide:
    """A side from row dicts (the lake's live rows, or any iterator of mappings).

    Columns absent from a row read as NULL: a column added at the source appears in the
    lake only once a change carries it.
    """

    def __init__(
        self, rows: Iterable[Mapping[str, Any]], key: Sequence[str], kinds: Mapping[str, str]
    ) -> None:
        self.key, self.kinds = tuple(key), dict(kinds)
        self._rows: dict[Key, dict[str, Canonical]] = {}
        self.duplicates: list[Key] = []
        for row in rows:
            values = {name: canonical(kind, row.get(name)) for name, kind in self.kinds.items()}
            k = tuple(canonical(self.kinds[c], row.get(c)) or "" for c in self.key)
            if k in self._rows:
                self.duplicates.append(k)
            self._rows[k] = values

    def key_hashes(self) -> Iterator[tuple[Key, str]]:
        for k, values in self._rows.items():
            yield k, row_hash(list(values.values()))

    def rows(self, keys: Sequence[Key]) -> dict[Key, dict[str, Canonical]]:
        return {k: self._rows[k] for k in keys if k in self._rows}


# --- comparison -----------------------------------------------------------------------------


@dataclass
class ColumnDiff:
    column: str
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Report:
    """What a comparison found; ``equal`` is the verdict."""

    table: str
    source_rows: int = 0
    lake_rows: int = 0
    missing_keys: list[Key] = field(default_factory=list)  # in the source, not in the lake
    extra_keys: list[Key] = field(default_factory=list)  # in the lake, not in the source
    differing_keys: list[Key] = field(default_factory=list)
    columns: dict[str, ColumnDiff] = field(default_factory=dict)
    compared_columns: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    key_columns: list[str] = field(default_factory=list)
    attempts: int = 1
    lake_version: int | None = None

    @property
    def equal(self) -> bool:
        return not (self.missing_keys or self.extra_keys or self.differing_keys) and (
            self.source_rows == self.lake_rows
        )

    def as_dict(self) -> dict[str, Any]:
        def keys(found: list[Key]) -> list[dict[str, str]]:
            shown = found[: EXAMPLES_PER_COLUMN * 3]
            return [dict(zip(self.key_columns, k, strict=True)) for k in shown]

        return {
            "table": self.table,
            "equal": self.equal,
            "source_rows": self.source_rows,
            "lake_rows": self.lake_rows,
            "lake_version": self.lake_version,
            "missing_keys": len(self.missing_keys),
            "extra_keys": len(self.extra_keys),
            "differing_rows": len(self.differing_keys),
            "missing_key_examples": keys(self.missing_keys),
            "extra_key_examples": keys(self.extra_keys),
            "columns": {
                name: {"differences": d.count, "examples": d.examples}
                for name, d in self.columns.items()
            },
            "compared_columns": self.compared_columns,
            "key": self.key_columns,
            "attempts": self.attempts,
            "notes": self.notes,
        }


def compare(
    table: str, source: Side, lake: Side, key: Sequence[str], columns: Sequence[str]
) -> Report:
    """Compare per-key hashes, then the differing keys' rows column by column."""
    report = Report(table=table, compared_columns=list(columns), key_columns=list(key))
    source_hashes = dict(source.key_hashes())
    report.source_rows = len(source_hashes)
    lake_hashes: dict[Key, str] = {}
    for k, h in lake.key_hashes():
        report.lake_rows += 1
        lake_hashes[k] = h
    report.missing_keys = sorted(k for k in source_hashes if k not in lake_hashes)
    report.extra_keys = sorted(k for k in lake_hashes if k not in source_hashes)
    report.differing_keys = sorted(
        k for k, h in source_hashes.items() if k in lake_hashes and lake_hashes[k] != h
    )
    detailed = report.differing_keys[:MAX_DETAILED_KEYS]
    if len(report.differing_keys) > len(detailed):
        report.notes.append(
            f"{len(report.differing_keys)} rows differ; columns counted over the first "
            f"{len(detailed)}"
        )
    if detailed:
        source_rows, lake_rows = source.rows(detailed), lake.rows(detailed)
        for k in detailed:
            left, right = source_rows.get(k, {}), lake_rows.get(k, {})
            for name in columns:
                if left.get(name) != right.get(name):
                    diff = report.columns.setdefault(name, ColumnDiff(name))
                    diff.count += 1
                    if len(diff.examples) < EXAMPLES_PER_COLUMN:
                        diff.examples.append(
                            {
                                "key": dict(zip(key, k, strict=True)),
                                "source": left.get(name),
                                "lake": right.get(name),
                            }
                        )
    # A key the lake holds twice is a defect even where both rows equal the source's.
    if isinstance(lake, RowsSide) and lake.duplicates:
        report.notes.append(f"{len(lake.duplicates)} keys appear twice in the lake")
        report.extra_keys += lake.duplicates
    return report


def compare_rows(
    table: str,
    source_rows: Iterable[Mapping[str, Any]],
    lake_rows: Iterable[Mapping[str, Any]],
    key: Sequence[str],
    kinds: Mapping[str, str],
) -> Report:
    """The core on two plain row iterators (e.g. an Aurora export and an Athena result)."""
    return compare(
        table, RowsSide(source_rows, key, kinds), RowsSide(lake_rows, key, kinds), key, list(kinds)
    )
