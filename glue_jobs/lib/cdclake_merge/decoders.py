"""Decoders of one Debezium value of a known type into its canonical JSON form (pure Python).

Each takes ``(value, spark_type)`` and returns what the row holds (see
:mod:`cdclake_merge.debezium`, whose type mapping picks them): integers, doubles (PostgreSQL's
``NaN``/``Infinity``/``-Infinity`` kept as that text), booleans, base64 binary checked,
decimals as exact text fitted to their ``decimal(p,s)``, timestamps as microseconds since the
epoch in UTC (years 1 to 9999), dates as days since the epoch, times of day as
``HH:MM:SS.ffffff``. A value that does not decode raises :class:`BadRecord`, whose message the
parser quarantines the line with.

None of them writes JSON: the decoders that do (strings, nested values, a value kept as text)
stay in ``cdclake_merge.debezium``, beside the JSON backend they must write with.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from cdclake_merge.schema import decimal_parts

_MIN_MICROS = -62135596800 * 1_000_000  # 0001-01-01T00:00:00Z
_MAX_MICROS = 253402300799 * 1_000_000 + 999_999  # 9999-12-31T23:59:59.999999Z
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE = dt.date(1970, 1, 1)
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
# Microsecond magnitude from which a schemaless integer timestamp is read as µs, not ms.
MICROS_THRESHOLD = 10**14


class BadRecord(ValueError):
    """A line that cannot be applied; the message is the quarantine reason."""


def decode_int(value: Any, _: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRecord(f"expected an integer, got {value!r}")
    return value


# Debezium's text for PostgreSQL's special float4/float8 values.
_SPECIAL_DOUBLES = frozenset({"NaN", "Infinity", "-Infinity"})


def decode_float(value: Any, _: str) -> float | str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, str) and value in _SPECIAL_DOUBLES:
            return value  # as text: JSON has no such numbers (orjson would write null)
        raise BadRecord(f"expected a number, got {value!r}")
    return float(value)


def decode_bool(value: Any, _: str) -> bool:
    if not isinstance(value, bool):
        raise BadRecord(f"expected a boolean, got {value!r}")
    return value


def decode_binary(value: Any, _: str) -> str:
    if not isinstance(value, str):
        raise BadRecord(f"expected base64 text for binary, got {value!r}")
    base64.b64decode(value, validate=True)
    return value


def _check_decimal(number: Decimal, spark_type: str) -> str:
    parts = decimal_parts(spark_type)
    if parts is None:
        return format(number, "f")
    precision, scale = parts
    try:
        quantized = number.quantize(Decimal(1).scaleb(-scale))
    except InvalidOperation:
        quantized = None
    hint = " (set column_types: {column: string} to keep it as exact text)"
    if quantized is None or quantized != number:
        raise BadRecord(f"{number} has more than {scale} fractional digits for {spark_type}{hint}")
    integer_digits = 0 if quantized.is_zero() else max(quantized.adjusted() + 1, 0)
    if integer_digits > precision - scale:
        raise BadRecord(f"{number} does not fit {spark_type}{hint}")
    return format(quantized, "f")


def _unscaled(text: str) -> int:
    raw = base64.b64decode(text, validate=True)
    return int.from_bytes(raw, "big", signed=True) if raw else 0


def decode_decimal_bytes(scale: int):  # type: ignore[no-untyped-def]
    def decode(value: Any, spark_type: str) -> str:
        if isinstance(value, int | float) and not isinstance(
            value, bool
        ):  # decimal.handling=double
            return _check_decimal(Decimal(str(value)), spark_type)
        if not isinstance(value, str):
            raise BadRecord(f"expected base64 decimal bytes, got {value!r}")
        return _check_decimal(Decimal(_unscaled(value)).scaleb(-scale), spark_type)

    return decode


def decode_variable_scale(value: Any, spark_type: str) -> str:
    if not isinstance(value, dict) or "value" not in value:
        raise BadRecord(f"expected {{scale, value}} for VariableScaleDecimal, got {value!r}")
    number = Decimal(_unscaled(value["value"])).scaleb(-int(value.get("scale") or 0))
    return _check_decimal(number, spark_type)


def decode_decimal_configured(value: Any, spark_type: str) -> str:
    if isinstance(value, dict):
        return decode_variable_scale(value, spark_type)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _check_decimal(Decimal(str(value)), spark_type)
    if isinstance(value, str):
        if _NUMBER.match(value):
            return _check_decimal(Decimal(value), spark_type)
        scale = (decimal_parts(spark_type) or (0, 0))[1]
        return _check_decimal(Decimal(_unscaled(value)).scaleb(-scale), spark_type)
    raise BadRecord(f"expected a decimal, got {value!r}")


def _micros_in_range(micros: int) -> int:
    if not _MIN_MICROS <= micros <= _MAX_MICROS:
        raise BadRecord(f"timestamp {micros} µs is outside years 1-9999")
    return micros


def timestamp_from(micros_per_unit: int):  # type: ignore[no-untyped-def]
    """Integer epoch timestamps; a negative factor divides (nanoseconds)."""

    def decode(value: Any, _: str) -> int:
        number = decode_int(value, "")
        if micros_per_unit > 0:
            return _micros_in_range(number * micros_per_unit)
        return _micros_in_range(number // -micros_per_unit)

    return decode


def decode_iso_timestamp(value: Any, _: str) -> int:
    if not isinstance(value, str):
        raise BadRecord(f"expected an ISO-8601 timestamp, got {value!r}")
    text = value.strip().replace(" ", "T", 1)
    match = re.match(r"^(.*?\.\d{6})\d+(.*)$", text)  # nanoseconds: keep microseconds
    if match:
        text = match.group(1) + match.group(2)
    parsed = dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return _micros_in_range((parsed - _EPOCH) // dt.timedelta(microseconds=1))


def decode_configured_timestamp(value: Any, spark_type: str) -> int:
    if isinstance(value, str):
        return decode_iso_timestamp(value, spark_type)
    number = decode_int(value, "")
    return _micros_in_range(number if abs(number) >= MICROS_THRESHOLD else number * 1000)


def decode_configured_date(value: Any, _: str) -> int:
    if isinstance(value, str):
        return (dt.date.fromisoformat(value[:10]) - _EPOCH_DATE).days
    return decode_int(value, "")


def time_from(micros_per_unit: int):  # type: ignore[no-untyped-def]
    def decode(value: Any, _: str) -> str:
        number = decode_int(value, "")
        micros = number * micros_per_unit if micros_per_unit > 0 else number // -micros_per_unit
        return format_time(micros)

    return decode


def format_time(micros: int) -> str:
    if not 0 <= micros <= 86_400_000_000:
        raise BadRecord(f"time of day {micros} µs is outside 00:00-24:00")
    seconds, fraction = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}.{fraction:06d}"
