"""Column types: how a run's observed types and the table's types combine.

Types are Spark SQL type names (``int``, ``decimal(10,2)``, ...). A column the
table already stores may only take the promotions Hudi 0.15 and the catalog sync
both accept: smallint→int→bigint and float→double. Anything else (int→double, a
decimal whose precision or scale changes, a different type) fails the run before
anything is written, naming the table and the column: Hudi would refuse the
write, or commit it and then fail to register the new schema in the catalog.
A column that is new in this run takes the widest type its events carry.
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
    """The type of a stored column after a change: only the promotions Hudi can store."""
    wanted = widen(table, column, stored, incoming)
    if wanted == stored:
        return stored
    if (stored in _INTS and wanted in _INTS) or (stored in _FLOATS and wanted in _FLOATS):
        return wanted
    raise SchemaChangeError(
        f"table {table}: column {column!r} changed type from {stored} to {incoming}, "
        f"which the Hudi table cannot store (it can only widen smallint→int→bigint and "
        f"float→double); nothing was committed"
    )


def unify(table: str, stored: Iterable[Column], *schemas: Iterable[Column]) -> list[Column]:
    """Stored columns first, then new ones in first-seen order, each at its widest type."""
    kept = dict(stored)
    merged: dict[str, str] = {}
    for schema in schemas:
        for name, spark_type in schema:
            merged[name] = widen(table, name, merged.get(name, "void"), spark_type)
    result = dict(kept)
    for name, spark_type in merged.items():
        if name in kept:
            result[name] = promote_stored(table, name, kept[name], spark_type)
        else:
            result[name] = spark_type
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
