"""``cdclake validate``: does the lake table hold exactly what the source table holds?

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

The source side computes its hashes in PostgreSQL (:class:`PostgresSide`, one snapshot, a
cursor fetched in batches); the lake side computes them in Python from the lake's live rows
(:class:`RowsSide`). :func:`compare` takes any two :class:`Side` objects, so the same core
compares two plain row iterators (:func:`compare_rows`).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import math
import re
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any, Protocol

import typer
from rich.console import Console
from rich.table import Table

from cdclake.lake_reader import read_lake

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
FETCH_BATCH = 20_000


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
    """The canonical text of a lake (or any Python) value; must equal :func:`sql_canonical`."""
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


def sql_canonical(kind: str, column: str) -> str:
    """The SQL expression that gives a column's canonical text in PostgreSQL (NULL stays)."""
    c = quote_ident(column)
    if kind == "numeric":
        return f"CASE WHEN {c} = 'NaN' THEN 'NaN' ELSE trim_scale({c})::text END"
    if kind == "float":
        return (
            f"CASE WHEN {c} = 'NaN' THEN 'NaN' "
            f"ELSE encode(float8send({c}::float8 + 0.0::float8), 'hex') END"
        )
    if kind == "date":
        return f"to_char({c}, 'YYYY-MM-DD')"
    if kind == "timestamp":
        return f"""to_char({c}, 'YYYY-MM-DD"T"HH24:MI:SS.US')"""
    if kind == "timestamptz":
        return f"""to_char({c} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')"""
    if kind == "time":
        return f"to_char({c}::interval, 'HH24:MI:SS.US')"
    if kind == "json":
        return f"to_jsonb({c})::text"
    if kind == "bytes":
        return f"encode({c}, 'hex')"
    return f"{c}::text"


def row_text(values: Sequence[Canonical]) -> str:
    """One unambiguous string for a row: each value length-prefixed, NULL distinct from ''."""
    return "|".join("N" if v is None else f"{len(v)}:{v}" for v in values)


def row_hash(values: Sequence[Canonical]) -> str:
    return hashlib.md5(row_text(values).encode(), usedforsecurity=False).hexdigest()


def sql_row_hash(expressions: Sequence[str]) -> str:
    parts = [f"coalesce(length(e{i})::text || ':' || e{i}, 'N')" for i in range(len(expressions))]
    return "md5(" + " || '|' || ".join(parts or ["''"]) + ")"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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


class PostgresSide:
    """The source table: hashes computed by PostgreSQL, inside one read-only snapshot.

    ``conn`` is a pg8000 native connection; call :meth:`close` (or use ``with``) to end the
    snapshot's transaction.
    """

    def __init__(self, conn: Any, table: str, key: Sequence[str], kinds: Mapping[str, str]) -> None:
        self.conn, self.key, self.kinds = conn, tuple(key), dict(kinds)
        schema, _, name = table.partition(".")
        self.relation = f"{quote_ident(schema)}.{quote_ident(name)}"
        self._key_sql = [sql_canonical(self.kinds[c], c) for c in self.key]
        self._value_sql = [sql_canonical(k, c) for c, k in self.kinds.items()]
        # Hashes and the rows fetched for differing keys must see the same data.
        conn.run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        conn.run("SET LOCAL TIME ZONE 'UTC'")
        conn.run("SET LOCAL extra_float_digits = 3")

    def key_hashes(self) -> Iterator[tuple[Key, str]]:
        keys = ", ".join(f"{e} AS k{i}" for i, e in enumerate(self._key_sql))
        values = "".join(f", {e} AS e{i}" for i, e in enumerate(self._value_sql))
        hashed = sql_row_hash(self._value_sql)
        key_names = ", ".join(f"k{i}" for i in range(len(self.key)))
        self.conn.run(
            "DECLARE cdclake_validate NO SCROLL CURSOR FOR "
            f"SELECT {key_names}, {hashed} FROM (SELECT {keys}{values} FROM {self.relation}) r"
        )
        try:
            while True:
                batch = self.conn.run(f"FETCH {FETCH_BATCH} FROM cdclake_validate")
                if not batch:
                    break
                n = len(self.key)
                for record in batch:
                    yield tuple(v or "" for v in record[:n]), record[-1]
        finally:
            self.conn.run("CLOSE cdclake_validate")

    def rows(self, keys: Sequence[Key]) -> dict[Key, dict[str, Canonical]]:
        found: dict[Key, dict[str, Canonical]] = {}
        names = list(self.kinds)
        select = ", ".join([*self._key_sql, *self._value_sql])
        where = "(" + ", ".join(self._key_sql) + ")"
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            params: dict[str, Any] = {}
            tuples = []
            for i, k in enumerate(chunk):
                slots = []
                for j, part in enumerate(k):
                    params[f"p{i}_{j}"] = part
                    slots.append(f"CAST(:p{i}_{j} AS text)")
                tuples.append("(" + ", ".join(slots) + ")")
            sql = f"SELECT {select} FROM {self.relation} WHERE {where} IN ({', '.join(tuples)})"
            for record in self.conn.run(sql, **params):
                n = len(self.key)
                values = dict(zip(names, record[n:], strict=True))
                found[tuple(v or "" for v in record[:n])] = values
        return found

    def close(self) -> None:
        self.conn.run("ROLLBACK")

    def __enter__(self) -> PostgresSide:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def source_columns(conn: Any, table: str) -> dict[str, str]:
    """Column -> comparison kind of a PostgreSQL table, in column order; {} if it is absent."""
    schema, _, name = table.partition(".")
    rows = conn.run(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typcategory "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE n.nspname = :s AND c.relname = :t AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        s=schema,
        t=name,
    )
    return {str(n): kind_of(str(pg_type), str(category)) for n, pg_type, category in rows}


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


# --- running it -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where one configured table lives on both sides."""

    source_table: str
    lake_table: str
    key: tuple[str, ...]
    exclude: frozenset[str]
    connect: Callable[[], Any]  # a new pg8000 native connection to the source database
    warehouse: Path


def validate_once(target: Target) -> Report:
    conn = target.connect()
    try:
        kinds = source_columns(conn, target.source_table)
        if not kinds:
            raise ValueError(f"source table {target.source_table} does not exist")
        lake = read_lake(target.warehouse, target.lake_table)
        compared = {
            n: k for n, k in kinds.items() if n not in target.exclude and not n.startswith("_cdc_")
        }
        notes: list[str] = []
        key = target.key
        if lake is None:
            notes.append(f"lake table {target.lake_table} has no commit yet")
            lake_side: Side = RowsSide([], key, compared)
        else:
            if lake.key != key:
                notes.append(f"lake key {list(lake.key)} differs from the source's {list(key)}")
            absent = [n for n in compared if n not in lake.columns]
            if absent:
                notes.append(f"not in the lake (compared as NULL): {', '.join(absent)}")
            leftover = sorted(n for n in lake.columns if n not in kinds and n not in target.exclude)
            if leftover:
                notes.append(f"lake-only columns, not compared: {', '.join(leftover)}")
            excluded_present = sorted(n for n in lake.columns if n in target.exclude)
            if excluded_present:
                notes.append(f"excluded columns found in the lake: {', '.join(excluded_present)}")
            notes.append(f"lake read with {lake.reader}")
            lake_side = RowsSide(lake.rows, key, compared)
        with PostgresSide(conn, target.source_table, key, compared) as source_side:
            report = compare(target.source_table, source_side, lake_side, key, list(compared))
        report.notes[:0] = notes
        report.lake_version = lake.version if lake else None
        return report
    finally:
        conn.close()


def validate_until(
    target: Target,
    wait: float,
    *,
    interval: float = 5.0,
    on_attempt: Callable[[Report], None] = lambda _: None,
) -> Report:
    """Compare until equal or ``wait`` seconds have passed; the lake may still be catching up."""
    deadline = time.monotonic() + wait
    attempt = 0
    while True:
        attempt += 1
        report = validate_once(target)
        report.attempts = attempt
        if report.equal or time.monotonic() + interval > deadline:
            return report
        on_attempt(report)
        time.sleep(interval)


def local_target(env: str, table: str) -> Target:
    """A configured table of the running local stack."""
    from pg8000.native import Connection

    from cdclake.local.lake import running_status
    from cdclake.local.stack import SUPERUSER, LocalStack
    from environment.config import load_config

    config = load_config(env)
    configured = config.lake_table(table)
    stack = LocalStack(env=env)
    running_status(env)
    state = stack.load_state()
    assert state is not None
    port = state.ports["postgres"]

    def connect() -> Any:
        return Connection(
            user=SUPERUSER, host="127.0.0.1", port=port, database=config.database.name
        )

    return Target(
        source_table=table,
        lake_table=f"{config.lake.glue_database}.{configured.lake_table_name}",
        key=tuple(configured.primary_key),
        exclude=frozenset(configured.exclude_columns),
        connect=connect,
        warehouse=stack.root / "warehouse",
    )


def render(report: Report, console: Console) -> None:
    verdict = "[green]equal[/green]" if report.equal else "[red]DIFFERENT[/red]"
    summary = Table(title=f"{report.table}: {verdict}", show_header=False)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    for label, value in (
        ("source rows", f"{report.source_rows:,}"),
        ("lake rows", f"{report.lake_rows:,}"),
        ("missing in lake (keys)", f"{len(report.missing_keys):,}"),
        ("extra in lake (keys)", f"{len(report.extra_keys):,}"),
        ("rows with differing values", f"{len(report.differing_keys):,}"),
        ("columns compared", f"{len(report.compared_columns)}"),
        ("lake version", str(report.lake_version)),
        ("attempts", str(report.attempts)),
    ):
        summary.add_row(label, value)
    console.print(summary)
    for label, found in (("missing in lake", report.missing_keys), ("extra", report.extra_keys)):
        if found:
            shown = ", ".join(_key_text(report.key_columns, k) for k in found[:5])
            console.print(f"  {label}: {shown}{' …' if len(found) > 5 else ''}", highlight=False)
    if report.columns:
        columns = Table(title="differing columns")
        for name in ("column", "rows", "key", "source", "lake"):
            columns.add_column(name)
        for diff in report.columns.values():
            for i, example in enumerate(diff.examples):
                columns.add_row(
                    diff.column if i == 0 else "",
                    f"{diff.count:,}" if i == 0 else "",
                    _key_text(report.key_columns, tuple(example["key"].values())),
                    _short(example["source"]),
                    _short(example["lake"]),
                )
        console.print(columns)
    for note in report.notes:
        console.print(f"  note: {note}", highlight=False)


def _key_text(names: Sequence[str], key: Key) -> str:
    return ", ".join(f"{n}={v}" for n, v in zip(names, key, strict=True))


def _short(value: Canonical, width: int = 60) -> str:
    if value is None:
        return "NULL"
    return value if len(value) <= width else value[: width - 1] + "…"


def validate(
    table: Annotated[str, typer.Option("--table", help="SCHEMA.TABLE as in config")],
    env: Annotated[str, typer.Option("--env", help="environment: config/<env>.yaml")],
    wait: Annotated[
        float, typer.Option("--wait", help="keep re-reading for up to SECONDS while they differ")
    ] = 0.0,
    json_output: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Compare a source table with its lake table: counts, keys, values. Exit 0 only if equal."""
    err = Console(stderr=True, soft_wrap=True)
    from environment.config import load_config

    load_config(env)  # an unknown environment is a config error before anything else
    if env != "local":
        err.print(
            f"[red]error:[/red] --env {env}: only the local stack is built; against Aurora and "
            "Athena follow docs/operations.md (Validate a lake table against Aurora)",
            highlight=False,
        )
        raise typer.Exit(2)
    try:
        target = local_target(env, table)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    except LookupError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None

    def progress(report: Report) -> None:
        if not json_output:
            err.print(
                f"attempt {report.attempts}: {len(report.missing_keys)} missing, "
                f"{len(report.extra_keys)} extra, {len(report.differing_keys)} differing; "
                "re-reading",
                highlight=False,
            )

    from pg8000.exceptions import InterfaceError

    try:
        report = validate_until(target, wait, on_attempt=progress)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    except InterfaceError as exc:  # the state folder is there, PostgreSQL is not
        err.print(f"[red]error:[/red] cannot reach the source database: {exc}", highlight=False)
        raise typer.Exit(1) from None
    if json_output:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        render(report, Console(soft_wrap=True))
    if not report.equal:
        raise typer.Exit(1)
