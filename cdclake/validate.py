"""``cdclake validate``: does the lake table hold exactly what the source table holds?

The comparison itself (canonical values, per-key hashes, the report) is
:mod:`cdclake.comparison`. This module is its PostgreSQL side and the command: the source
side computes the same canonical texts and hashes in SQL (:func:`sql_canonical`,
:class:`PostgresSide`: one read-only snapshot, a cursor fetched in batches), and
:func:`validate_once` compares it with the lake's live rows (``cdclake.lake_reader``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cdclake.comparison import Canonical, Key, Report, RowsSide, Side, compare, kind_of
from cdclake.lake_reader import read_lake

FETCH_BATCH = 20_000


# --- the PostgreSQL side --------------------------------------------------------------------


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


def sql_row_hash(expressions: Sequence[str]) -> str:
    parts = [f"coalesce(length(e{i})::text || ':' || e{i}, 'N')" for i in range(len(expressions))]
    return "md5(" + " || '|' || ".join(parts or ["''"]) + ")"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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
    from cdclake.local.postgres import SUPERUSER
    from cdclake.local.stack import LocalStack
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
