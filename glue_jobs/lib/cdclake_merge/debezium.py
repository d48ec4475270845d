"""Debezium PostgreSQL change events → normalized, decoded change records (pure Python).

Runs inside Spark's Python workers (one call per input line), so it depends on
nothing but the standard library and ``orjson`` (the Glue job installs the version
requirements.txt pins). Without orjson it reads and writes JSON with the standard
library under orjson's rules, so a line has the same outcome either way. Every
line ends as exactly one :class:`Outcome`: an ``event`` to apply, a ``skip`` with
its reason (blank lines, tombstones, logical decoding messages) or ``bad`` with
its reason (quarantined). Nothing is dropped without a reason, and no input makes
it raise.

Values are decoded into a canonical JSON form that Spark turns into typed columns
with native casts (see :mod:`cdclake_merge.schema`): decimals as exact strings,
dates as days since the epoch, timestamps as microseconds since the epoch in UTC,
times as ``HH:MM:SS.ffffff`` strings, binary as base64, nested values (arrays,
structs, maps, geometry) as JSON text, PostgreSQL's ``NaN``/``Infinity``/``-Infinity``
doubles as those strings (Spark reads them into a float or double column as the value).
The decoders of typed values that write no JSON (numbers, decimals, times, binary) and
:class:`BadRecord` are :mod:`cdclake_merge.decoders`.

The JSON backend (orjson, or the standard library under orjson's rules), the parsing that
reads with it and the decoders that write with it stay in this one module: the parity test
(tests/merge/test_debezium.py) loads a second copy of this file with orjson blocked, and that
copy must read and write with its own backend.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdclake_merge.decoders import (
    BadRecord,
    decode_binary,
    decode_bool,
    decode_configured_date,
    decode_configured_timestamp,
    decode_decimal_bytes,
    decode_decimal_configured,
    decode_float,
    decode_int,
    decode_iso_timestamp,
    decode_variable_scale,
    time_from,
    timestamp_from,
)

try:
    import orjson as _orjson
except ImportError:  # a host without it: the standard library, held to orjson's rules
    _orjson = None  # type: ignore[assignment]

# What orjson reads, and so what a line may hold either way: integers of 64 bits (signed or
# unsigned), finite numbers, no NaN/Infinity tokens, no lone surrogates. orjson reads a longer
# integer as a double, silently rounded: such a line is refused instead, with either backend.
MIN_INTEGER, MAX_INTEGER = -(2**63), 2**64 - 1
# A line nested deeper than this is refused, whichever backend reads it: orjson reads 1024
# levels and writes 254, the standard library stops at Python's recursion limit. Debezium
# lines nest a few levels (a jsonb value is text).
MAX_DEPTH = 128
# A line that may hold an integer orjson cannot read exactly: 20 digits and more (past
# 2**64 - 1), or a negative one of 19 (past -2**63). Debezium's own ts_ns has 19 digits, so a
# shorter pattern would send every line of Debezium 2.6+ down the slow path.
_LONG_DIGITS = re.compile(r"\d{20}|-\d{19}")
_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')  # strings (skipped) and brackets
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def _check_depth(text: str) -> None:
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for token in _NESTING.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        elif bracket in ("]", "}"):
            depth -= 1


def _integer(text: str) -> int:
    number = int(text)
    if not MIN_INTEGER <= number <= MAX_INTEGER:
        raise ValueError(f"integer {text[:40]} does not fit 64 bits")
    return number


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"number {text[:40]} is out of range for a double")
    return number


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _check_surrogates(value: Any) -> None:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValueError("a string holds a lone UTF-16 surrogate") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_surrogates(key)
            _check_surrogates(item)
    elif isinstance(value, list):
        for item in value:
            _check_surrogates(item)


def _stdlib_loads(text: str) -> Any:
    _check_depth(text)
    value = json.loads(text, parse_int=_integer, parse_float=_finite, parse_constant=_no_constant)
    if _SURROGATE.search(text):
        _check_surrogates(value)
    return value


def _orjson_loads(text: str) -> Any:
    _check_depth(text)
    if _LONG_DIGITS.search(text):
        # orjson would read an integer past 64 bits as a rounded double; the standard
        # library's reading refuses it (and reads everything else as orjson does).
        return _stdlib_loads(text)
    return _orjson.loads(text)


def _float_text(number: float) -> str:
    """``number`` as orjson writes it: Python's shortest digits, orjson's notation."""
    if not math.isfinite(number):
        return "null"
    text = repr(number)
    mantissa, _, exponent = text.partition("e")
    if not exponent:
        return text
    power = int(exponent)
    if power == -5:  # orjson writes 1e-05 as 0.00001; Python switches to exponents at 1e-05
        sign, digits = ("-", mantissa[1:]) if mantissa.startswith("-") else ("", mantissa)
        return f"{sign}0.0000{digits.replace('.', '')}"
    return f"{mantissa}e{power}"


def _stdlib_dumps(value: Any) -> str:
    """``value`` as orjson writes it (compact, UTF-8 text, orjson's float notation)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        if not MIN_INTEGER <= value <= MAX_INTEGER:
            raise TypeError("Integer exceeds 64-bit range")
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("Dict key must be str")
        return (
            "{" + ",".join(f"{_stdlib_dumps(k)}:{_stdlib_dumps(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ",".join(_stdlib_dumps(item) for item in value) + "]"
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def _orjson_dumps(value: Any) -> str:
    return _orjson.dumps(value).decode()


# orjson is several times faster; the results are the same.
loads = _stdlib_loads if _orjson is None else _orjson_loads
dumps = _stdlib_dumps if _orjson is None else _orjson_dumps


UNAVAILABLE = "__debezium_unavailable_value"
UNAVAILABLE_FORMS = frozenset(
    {
        UNAVAILABLE,
        base64.b64encode(UNAVAILABLE.encode()).decode(),  # bytea, binary.handling.mode=base64
        UNAVAILABLE.encode().hex(),  # bytea, binary.handling.mode=hex
    }
)
OPS = frozenset({"c", "u", "d", "r", "t"})
# The reason an event carries when it is a table's last read of an initial (or blocking)
# snapshot: the table is then exactly what that snapshot read, so every row older than the
# snapshot and not read by it is gone (deleted while the connector was not streaming: a
# snapshot taken again after offsets were lost), as if truncated just before it.
SNAPSHOT_END = "end of a snapshot"
SNAPSHOT_LAST = frozenset({"last", "last_in_data_collection"})  # source.snapshot's values
MAX_LSN = 2**63 - 1
VARIABLE_SCALE_DECIMAL = "decimal(38,18)"


@dataclass(frozen=True)
class TableSpec:
    """What the parser needs to know about the table (picklable, shipped to workers)."""

    primary_key: tuple[str, ...]
    column_types: Mapping[str, str] = field(default_factory=dict)
    exclude_columns: frozenset[str] = frozenset()


# The commit position of a change Debezium streamed with none: the first transaction after a
# snapshot taken with no stored offset (``source.sequence`` ``[null, lsn]``). No LSN is 0:
# the job orders it after that snapshot (transforms.place_after_snapshots), since it
# committed after the snapshot began while its changes may precede it (a transaction open
# when the snapshot began, which the snapshot does not see).
UNKNOWN_COMMIT = 0


@dataclass(frozen=True)
class Change:
    op: str
    commit_lsn: int
    lsn: int
    source_ts_ms: int | None
    row: dict[str, Any] | None
    columns: tuple[tuple[str, str], ...]
    toast_columns: tuple[str, ...] = ()
    # A read of an initial or blocking snapshot at ``lsn``: ordered (lsn, 0), before every
    # change whose commit is at that position or later, whatever commit Debezium last
    # streamed before it (``commit_lsn``, sequence[0]).
    snapshot_read: bool = False

    @property
    def order(self) -> tuple[int, int]:
        """Its place in the per-key order: (commit LSN, LSN within the commit)."""
        return (self.lsn, 0) if self.snapshot_read else (self.commit_lsn, self.lsn)


@dataclass(frozen=True)
class Outcome:
    kind: str  # "event" | "skip" | "bad"
    reason: str | None = None
    change: Change | None = None


def skip(reason: str) -> Outcome:
    return Outcome("skip", reason)


def parse_line(text: str, spec: TableSpec) -> Outcome:
    """One line of a change file (JSON lines, as the S3 sink writes them)."""
    stripped = text.strip()
    if not stripped:
        return skip("blank line")
    if stripped == "null":
        return skip("tombstone (null value)")
    value = _SCHEMA_PREFIX.load(stripped)
    if value is None:
        try:
            value = loads(stripped)
        except (ValueError, TypeError) as exc:
            return Outcome("bad", f"not valid JSON: {exc}")
        _SCHEMA_PREFIX.learn(stripped, value)
    return parse_value(value, spec)


class _SchemaPrefix:
    """Parses a schema-included line without parsing its schema again.

    The JSON converter writes ``{"schema":S,"payload":P}`` with the same ``S`` on
    every line of a table version, and ``S`` is most of the line. Once a line's
    ``S`` is known (its text checked to parse to the line's schema), a line that
    starts with exactly ``{"schema":S,"payload":`` and ends with ``}`` is that
    schema plus whatever its middle parses to, so only the payload is parsed. Any
    other line, or a middle that does not parse on its own, takes the full path.
    """

    _HEAD = '{"schema":'
    _SEPARATOR = ',"payload":'

    def __init__(self) -> None:
        self.prefix: str | None = None
        self.schema: dict[str, Any] | None = None
        self.schema_text = ""

    def load(self, line: str) -> dict[str, Any] | None:
        prefix = self.prefix
        if prefix is None or not line.startswith(prefix) or not line.endswith("}"):
            return None
        try:
            payload = loads(line[len(prefix) : -1])
        except (ValueError, TypeError):
            return None
        return {"schema": self.schema, "payload": payload}

    def learn(self, line: str, value: Any) -> None:
        if not (isinstance(value, dict) and isinstance(value.get("schema"), dict)):
            return
        end = line.find(self._SEPARATOR)
        if not line.startswith(self._HEAD) or end < 0:
            return
        text = line[len(self._HEAD) : end]
        try:
            if loads(text) != value["schema"]:
                return
        except (ValueError, TypeError):
            return
        self.prefix = line[: end + len(self._SEPARATOR)]
        self.schema, self.schema_text = value["schema"], text

    def key(self, schema: dict[str, Any]) -> str:
        """The schema's cache key: its text when it is the known one, else re-serialized."""
        return self.schema_text if schema is self.schema else dumps(schema)


_SCHEMA_PREFIX = _SchemaPrefix()


def parse_value(value: Any, spec: TableSpec) -> Outcome:
    """One decoded Kafka record value, in any of the three supported shapes."""
    try:
        return _parse(value, spec)
    except BadRecord as exc:
        return Outcome("bad", str(exc))
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, ArithmeticError) as exc:
        return Outcome("bad", f"cannot decode: {type(exc).__name__}: {exc}")


def _parse(value: Any, spec: TableSpec) -> Outcome:
    if value is None:
        return skip("tombstone (null value)")
    if not isinstance(value, dict):
        raise BadRecord(f"expected a JSON object, got {type(value).__name__}")
    schema: dict[str, Any] | None = None
    payload: Any = value
    if "payload" in value and "schema" in value:
        schema = value["schema"] if isinstance(value["schema"], dict) else None
        payload = value["payload"]
        if payload is None:
            return skip("tombstone (null value)")
        if not isinstance(payload, dict):
            raise BadRecord(f"payload is {type(payload).__name__}, expected an object")
    if "__op" in payload or "__deleted" in payload or "__lsn" in payload:
        return _parse_flattened(payload, schema, spec)
    if "op" in payload:
        return _parse_envelope(payload, schema, spec)
    raise BadRecord("neither a Debezium envelope (no 'op') nor a flattened record (no '__op')")


def _parse_envelope(payload: dict[str, Any], schema: dict[str, Any] | None, spec: TableSpec):  # type: ignore[no-untyped-def]
    op = payload.get("op")
    if op == "m":
        return skip("logical decoding message (op m)")
    if op not in OPS:
        raise BadRecord(f"unknown op {op!r}")
    source = payload.get("source")
    if not isinstance(source, dict):
        raise BadRecord("no 'source' block: the event cannot be ordered")
    commit_lsn, lsn = _positions(source)
    # Not an incremental snapshot's reads: they have no LSN of their own.
    snapshot_read = op == "r" and source.get("lsn") is not None
    ts_ms = _source_ts_ms(source)
    if op == "t":
        return Outcome("event", change=Change("t", commit_lsn, lsn, ts_ms, None, ()))
    image_name = "before" if op == "d" else "after"
    image = payload.get(image_name)
    if not isinstance(image, dict):
        if op == "d":
            raise BadRecord("delete without a 'before' image: the deleted key is unknown")
        raise BadRecord(f"op {op!r} without an 'after' image")
    row, columns, toast = _decode_image(image, _schema_plan(schema, image_name), spec)
    _check_key(row, toast, spec)
    end = snapshot_read and str(source.get("snapshot")) in SNAPSHOT_LAST
    change = Change(op, commit_lsn, lsn, ts_ms, row, columns, toast, snapshot_read)
    return Outcome("event", SNAPSHOT_END if end else None, change)


def _parse_flattened(payload: dict[str, Any], schema: dict[str, Any] | None, spec: TableSpec):  # type: ignore[no-untyped-def]
    deleted = str(payload.get("__deleted", "false")).lower() == "true"
    op = payload.get("__op")
    if deleted:
        op = "d"
    if op == "m":
        return skip("logical decoding message (op m)")
    if op not in OPS - {"t"}:
        raise BadRecord(f"unknown op {op!r} in flattened record")
    if "__lsn" not in payload:
        raise BadRecord("flattened record without __lsn: add.fields must include lsn")
    lsn = _lsn(payload["__lsn"], "__lsn")
    ts_ms = payload.get("__source_ts_ms")
    image = {k: v for k, v in payload.items() if not k.startswith("__")}
    row, columns, toast = _decode_image(image, _schema_plan(schema, None), spec)
    _check_key(row, toast, spec)
    ts = ts_ms if isinstance(ts_ms, int) and not isinstance(ts_ms, bool) else None
    return Outcome("event", change=Change(op, lsn, lsn, ts, row, columns, toast))


def _lsn(value: Any, where: str) -> int:
    if isinstance(value, bool) or value is None:
        raise BadRecord(f"{where} is {value!r}, not an LSN: the event cannot be ordered")
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int):
        raise BadRecord(f"{where} {value!r} is not an integer LSN")
    if not 0 <= value <= MAX_LSN:
        raise BadRecord(f"{where} {value} is outside the range of a PostgreSQL LSN")
    return value


def _positions(source: dict[str, Any]) -> tuple[int, int]:
    """(commit LSN, change LSN): the per-key order; never the timestamps.

    Debezium's ``sequence[0]`` is where the last commit it streamed before this change ended
    (PostgresStreamingChangeEventSource.commitMessage, 2.7): the same for every change of one
    transaction, growing with each commit, so transactions sort in commit order and a
    transaction's changes by their LSN. It is null for the first transaction streamed after
    a snapshot taken with no stored commit: :data:`UNKNOWN_COMMIT` then. A record with no
    ``sequence`` (not Debezium 2.x's) is ordered by its LSN alone.

    An incremental-snapshot read (``snapshot: incremental``) has no LSN of its own: Debezium
    emits it when its snapshot window closes, and its ``sequence`` holds the stream position
    of that moment ([last commit LSN, last processed LSN]). That position is its place in the
    per-key order: after every change streamed before the window closed, before every change
    streamed after it (Debezium 2.7, DBLog watermarks).
    """
    if source.get("lsn") is None:
        if source.get("snapshot") == "incremental" and source.get("sequence"):
            commit, position = _sequence(source["sequence"])
            if commit is not None and position is not None:
                return (
                    _lsn(commit, "source.sequence[0]"),
                    _lsn(position, "source.sequence[1]"),
                )
        raise BadRecord("source.lsn is missing: the event cannot be ordered")
    lsn = _lsn(source["lsn"], "source.lsn")
    commit = lsn
    if source.get("sequence"):
        first = _sequence(source["sequence"])[0]
        commit = UNKNOWN_COMMIT if first is None else _lsn(first, "source.sequence[0]")
    return commit, lsn


def _sequence(sequence: Any) -> tuple[Any, Any]:
    """``source.sequence``, ``'["<commit LSN>","<LSN>"]'`` (either may be null), unconverted."""
    try:
        parts = loads(sequence) if isinstance(sequence, str) else sequence
    except ValueError as exc:
        raise BadRecord(f"source.sequence {sequence!r} is not a JSON array") from exc
    if not isinstance(parts, list) or len(parts) != 2:
        raise BadRecord(f"source.sequence {sequence!r} is not [commitLsn, lsn]")
    return parts[0], parts[1]


def _source_ts_ms(source: dict[str, Any]) -> int | None:
    ts = source.get("ts_ms")
    if isinstance(ts, int) and not isinstance(ts, bool):
        return ts
    legacy = source.get("ts_usec")  # Debezium 0.9
    if isinstance(legacy, int) and not isinstance(legacy, bool):
        return legacy // 1000
    return None


def _fields_by_name(fields: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(fields, list):
        return {}
    return {f["field"]: f for f in fields if isinstance(f, dict) and "field" in f}


def _image_fields(schema: dict[str, Any], image_name: str | None) -> dict[str, dict[str, Any]]:
    if image_name is None:  # flattened record: the row's fields are the schema's fields
        return _fields_by_name(schema.get("fields"))
    for f in schema.get("fields") or ():
        if isinstance(f, dict) and f.get("field") == image_name:
            return _fields_by_name(f.get("fields"))
    return {}


class SchemaPlan:
    """The (Spark type, decoder) of each field of one row schema, derived once per schema.

    Every line of a schema-included change file repeats the same schema; deriving
    the decoders again for each line was most of the parser's time.
    """

    def __init__(self, fields: dict[str, dict[str, Any]]) -> None:
        self._fields = fields
        self._decoders: dict[str, tuple[str, Any]] = {}

    def get(self, name: str) -> tuple[str, Any] | None:
        planned = self._decoders.get(name)
        if planned is None and name in self._fields:
            # An unsupported type raises BadRecord here each time; nothing is cached for it.
            planned = self._decoders[name] = schema_decoder(self._fields[name])
        return planned


_PLANS: dict[tuple[str | None, str], SchemaPlan] = {}
_MAX_PLANS = 256  # distinct schemas a worker remembers (each table version is one)


def _schema_plan(schema: dict[str, Any] | None, image_name: str | None) -> SchemaPlan | None:
    if not schema:
        return None
    cache_key = (image_name, _SCHEMA_PREFIX.key(schema))
    plan = _PLANS.get(cache_key)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[cache_key] = SchemaPlan(_image_fields(schema, image_name))
    return plan


def _check_key(row: dict[str, Any], toast: tuple[str, ...], spec: TableSpec) -> None:
    for key in spec.primary_key:
        if row.get(key) is None or key in toast:
            raise BadRecord(f"key column {key!r} is missing or null")


def _decode_image(
    image: dict[str, Any], plan: SchemaPlan | None, spec: TableSpec
) -> tuple[dict[str, Any], tuple[tuple[str, str], ...], tuple[str, ...]]:
    row: dict[str, Any] = {}
    columns: list[tuple[str, str]] = []
    toast: list[str] = []
    for name, value in image.items():
        if name in spec.exclude_columns:
            continue
        configured = spec.column_types.get(name)
        planned = plan.get(name) if plan is not None else None
        if planned is not None:
            spark_type, decoder = planned
            if configured == "string" and spark_type != "string":
                spark_type, decoder = "string", _as_text(decoder)
        elif configured is not None:
            spark_type, decoder = (
                configured,
                CONFIGURED_DECODERS.get(_base_type(configured), _decode_string),
            )
        else:
            spark_type, decoder = _inferred(value), _decode_inferred
        if isinstance(value, str) and value in UNAVAILABLE_FORMS:
            toast.append(name)
            row[name] = None
        elif value is None:
            row[name] = None
        else:
            try:
                row[name] = decoder(value, spark_type)
            except BadRecord as exc:
                raise BadRecord(f"column {name!r}: {exc}") from None
            except (ValueError, TypeError, ArithmeticError, binascii.Error) as exc:
                raise BadRecord(
                    f"column {name!r}: cannot decode {value!r} as {spark_type}: {exc}"
                ) from None
        columns.append((name, spark_type))
    return row, tuple(columns), tuple(toast)


# --- type mapping -------------------------------------------------------------------------------

_PLAIN_TYPES = {
    "int8": "smallint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float": "float",
    "float32": "float",
    "double": "double",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}


def schema_decoder(schema_field: dict[str, Any]) -> tuple[str, Any]:
    """Spark type and value decoder for one field of a JsonConverter schema."""
    name = schema_field.get("name")
    kafka_type = schema_field.get("type")
    params = schema_field.get("parameters") or {}
    if name == "org.apache.kafka.connect.data.Decimal":
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        if precision > 38 or scale > precision:
            return "string", _as_text(decode_decimal_bytes(scale))
        return f"decimal({precision},{scale})", decode_decimal_bytes(scale)
    if name == "io.debezium.data.VariableScaleDecimal":
        return VARIABLE_SCALE_DECIMAL, decode_variable_scale
    if name in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return "date", decode_int
    if name in ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"):
        return "timestamp", timestamp_from(1000)
    if name == "io.debezium.time.MicroTimestamp":
        return "timestamp", timestamp_from(1)
    if name == "io.debezium.time.NanoTimestamp":
        return "timestamp", timestamp_from(-1000)
    if name == "io.debezium.time.ZonedTimestamp":
        return "timestamp", decode_iso_timestamp
    if name in ("io.debezium.time.Time", "org.apache.kafka.connect.data.Time"):
        return "string", time_from(1000)
    if name == "io.debezium.time.MicroTime":
        return "string", time_from(1)
    if name == "io.debezium.time.NanoTime":
        return "string", time_from(-1000)
    if kafka_type in ("struct", "array", "map"):
        return "string", _decode_nested
    spark_type = _PLAIN_TYPES.get(str(kafka_type))
    if spark_type is None:
        raise BadRecord(f"unsupported schema type {kafka_type!r}")
    return spark_type, PLAIN_DECODERS[spark_type]


def _base_type(spark_type: str) -> str:
    return "decimal" if spark_type.startswith("decimal") else spark_type


def _inferred(value: Any) -> str:
    if value is None:
        return "void"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    return "string"


# --- value decoders that write JSON (the others: cdclake_merge.decoders) --------------------------


def _decode_string(value: Any, _: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return dumps(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _decode_nested(value: Any, _: str) -> str:
    return value if isinstance(value, str) else dumps(value)


def _decode_inferred(value: Any, spark_type: str) -> Any:
    return _decode_nested(value, spark_type) if isinstance(value, dict | list) else value


def _as_text(decoder):  # type: ignore[no-untyped-def]
    """A schema'd value kept as text (config asks for a string column, or it fits no type)."""

    def decode(value: Any, _: str) -> str:
        decoded = decoder(value, "string")
        return decoded if isinstance(decoded, str) else dumps(decoded)

    return decode


PLAIN_DECODERS = {
    "smallint": decode_int,
    "int": decode_int,
    "bigint": decode_int,
    "float": decode_float,
    "double": decode_float,
    "boolean": decode_bool,
    "string": _decode_string,
    "binary": decode_binary,
}
CONFIGURED_DECODERS = {
    **PLAIN_DECODERS,
    "decimal": decode_decimal_configured,
    "date": decode_configured_date,
    "timestamp": decode_configured_timestamp,
}
