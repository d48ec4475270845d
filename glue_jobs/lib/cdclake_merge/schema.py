"""Column types: how a run's observed types and the table's types combine.

Types are Spark SQL type names (``int``, ``decimal(10,2)``, ...). A column the
table already stores may only take the promotions Hudi 0.15 and the catalog sync
both accept: smallint→int→bigint and float→double. Anything else (int→double, a
decimal whose precision or scale changes, a different type) fails the run before
anything is written, naming the table and the column: Hudi would refuse the
write, or commit it and then fail to register the new schema in the catalog.
Such a change of a stored column is :class:`NeedsRebuild`: the table takes it only when
rebuilt (docs/merge-job.md "Schema changes"). A column that is new in this run takes the
widest type its events carry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

Column = tuple[str, str]

_INTS = {"smallint": 1, "int": 2, "bigint": 3}
_FLOATS = {"float": 1, "double": 2}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


class SchemaChangeError(ValueError):
    """An incompatible type change; the run commits nothing."""


class NeedsRebuild(SchemaChangeError):
    """A stored column's type change Hudi cannot take in place; the run commits nothing and
    its change files wait. The one line names the table, the column, the stored and the new
    type and says "needs a rebuild" (:mod:`cdclake_merge.failures` reads it back)."""

    def __init__(self, table: str, column: str, stored: str, incoming: str) -> None:
        self.table, self.column, self.stored, self.incoming = table, column, stored, incoming
        super().__init__(
            f"table {table}: column {column!r} changed type from {stored} to {incoming}, "
            f"which the Hudi table cannot store in place (it can only widen "
            f"smallint→int→bigint and float→double): needs a rebuild; nothing was committed "
            f"and the change files wait"
        )


def decimal_parts(spark_type: str) -> tuple[int, int] | None:
    """(precision, scale) of a ``decimal(p,s)`` type, None for any other type."""
    match = _DECIMAL.match(spark_type)
    return (int(match.group(1)), int(match.group(2))) if match else None


def widen(table: str, column: str, current: str, incoming: str) -> str:
    """The type that holds both, or SchemaChangeError."""
    if current == incoming or incoming == "void":
        return current
    if current == "void":
        return incoming
    if current in _INTS and incoming in _INTS:
        return max(current, incoming, key=_INTS.__getitem__)
    if current in _FLOATS and incoming in _FLOATS:
        return max(current, incoming, key=_FLOATS.__getitem__)
    if {current, incoming} <= set(_INTS) | set(_FLOATS):
        return "double"
    left, right = decimal_parts(current), decimal_parts(incoming)
    if left and right:
        scale = max(left[1], right[1])
        integer_digits = max(left[0] - left[1], right[0] - right[1])
        if integer_digits + scale <= 38:
            return f"decimal({integer_digits + scale},{scale})"
    raise SchemaChangeError(
        f"table {table}: column {column!r} changed type from {current} to {incoming}, "
        f"which cannot be widened; nothing was committed"
    )


def promote_stored(table: str, column: str, stored: str, incoming: str) -> str:
    """The type of a stored column after a change: only the promotions Hudi can store;
    any other change is :class:`NeedsRebuild`."""
    try:
        wanted = widen(table, column, stored, incoming)
    except SchemaChangeError:
        raise NeedsRebuild(table, column, stored, incoming) from None
    if wanted == stored:
        return stored
    if (stored in _INTS and wanted in _INTS) or (stored in _FLOATS and wanted in _FLOATS):
        return wanted
    raise NeedsRebuild(table, column, stored, incoming)


def unify(table: str, stored: Iterable[Column], *schemas: Iterable[Column]) -> list[Column]:
    """Stored columns first, then new ones in first-seen order, each at its widest type."""
    kept = dict(stored)
    result = dict(kept)
    merged: dict[str, str] = {}
    for schema in schemas:
        for name, spark_type in schema:
            if name not in kept:
                merged[name] = widen(table, name, merged.get(name, "void"), spark_type)
                continue
            # Each type a stored column arrives with is held against the table, not against
            # the run's other types: a run carrying rows from before and after the change
            # needs the rebuild, and its line names the stored type, not the run's first.
            try:
                result[name] = promote_stored(table, name, result[name], spark_type)
            except NeedsRebuild:
                raise NeedsRebuild(table, name, kept[name], spark_type) from None
    result.update(merged)
    return [(name, "string" if t == "void" else t) for name, t in result.items()]


def raw_type(spark_type: str) -> str:
    """The JSON-level type the parser emits for a column (see debezium module docs)."""
    if spark_type.startswith("decimal") or spark_type in ("binary", "void"):
        return "string"
    if spark_type == "date":
        return "int"
    if spark_type == "timestamp":
        return "bigint"
    return spark_type


def raw_ddl(columns: Sequence[Column]) -> str:
    return ", ".join(f"`{name}` {raw_type(t)}" for name, t in columns)


def decode_sql(name: str, spark_type: str, source: str) -> str:
    """SQL expression turning the raw JSON-level value at ``source`` into ``spark_type``."""
    if spark_type.startswith("decimal"):
        return f"CAST({source} AS {spark_type})"
    if spark_type == "binary":
        return f"unbase64({source})"
    if spark_type == "date":
        return f"date_from_unix_date({source})"
    if spark_type == "timestamp":
        return f"timestamp_micros({source})"
    return source
