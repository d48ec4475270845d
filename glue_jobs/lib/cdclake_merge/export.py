"""The live rows of a table as JSON lines, in a form that compares exactly.

Integers as numbers, decimals as strings with their exact scale (``"12.50"``),
dates ``YYYY-MM-DD``, timestamps ``YYYY-MM-DDTHH:MM:SS.ffffff`` in UTC, binary as
base64, booleans and nulls as such; rows sorted by key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T


def exportable(frame: DataFrame, key: Sequence[str]) -> DataFrame:
    """Format every column for export; Spark does the formatting, in UTC."""
    columns = []
    for f in frame.schema.fields:
        c = F.col(f"`{f.name}`")
        if isinstance(f.dataType, T.TimestampType | T.TimestampNTZType):
            c = F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
        elif isinstance(f.dataType, T.DecimalType | T.DateType):
            c = c.cast("string")
        elif isinstance(f.dataType, T.BinaryType):
            c = F.base64(c)
        columns.append(c.alias(f.name))
    return frame.select(*columns).orderBy(*key)


def rows_as_json(frame: DataFrame, key: Sequence[str]) -> Iterator[str]:
    for row in exportable(frame, key).toLocalIterator():
        yield json.dumps(row.asDict(), separators=(",", ":"), default=_default)


def _default(value: Any) -> Any:
    raise TypeError(f"cannot export {type(value).__name__}")
