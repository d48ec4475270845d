"""Column types: how a run's observed types and the table's types combine.

Types are Spark SQL type names (``int``, ``decimal(10,2)``, ...). A source schema
change is accepted when every column keeps or widens its type (int32→int64,
float32→float64, a decimal that grows); anything else fails the run, naming the
table and the column, before anything is written.
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


def _decimal(spark_type: str) -> tuple[int, int] | None:
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
    left, right = _decimal(current), _decimal(incoming)
    if left and right:
        scale = max(left[1], right[1])
        integer_digits = max(left[0] - left[1], right[0] - right[1])
        if integer_digits + scale <= 38:
            return f"decimal({integer_digits + scale},{scale})"
    raise SchemaChangeError(
        f"table {table}: column {column!r} changed type from {current} to {incoming}, "
        f"which cannot be widened; nothing was committed"
    )


def unify(table: str, *schemas: Iterable[Column]) -> list[Column]:
    """Union of columns in first-seen order, each at its widest compatible type."""
    merged: dict[str, str] = {}
    for schema in schemas:
        for name, spark_type in schema:
            merged[name] = widen(table, name, merged.get(name, "void"), spark_type)
    return [(name, "string" if t == "void" else t) for name, t in merged.items()]


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
