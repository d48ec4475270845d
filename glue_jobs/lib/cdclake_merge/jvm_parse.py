"""Schema-included Debezium envelopes parsed in the JVM: the cold path's fast lane.

The JSON converter writes each line of a table version as ``{"schema":S,"payload":P}`` with
the same ``S``, and ``S`` is most of the line. The driver turns each distinct line *head*
(``{"schema":S,"payload":``) into a :class:`HeadPlan`: the Spark type the payload's fields
are read with, and the SQL that decodes each value the way :mod:`cdclake_merge.debezium`
does. Lines of a planned head have only their payload parsed, by the project's
``io.cdclake.merge.PayloadParser`` (``jvm/merge``: ``cdclake-merge.jar``, on the local
session's classpath and shipped with the Glue job), and are decoded without leaving the JVM.

A line is taken here only when every check the Python parser makes is known to hold for it:
the payload is one JSON value and nothing follows it, every value has its schema's JSON type
and decodes (decimals fit, timestamps are in range, ...), the event can be ordered and its key
is present. Any other line (no schema, a head without a plan, anything doubtful) is left to
the Python parser with its file and line number, which decides its outcome and quarantine
reason exactly as before; so the parser's rules stay in one place and this module is only a
faster road to the same result (``tests/merge/test_jvm_parse.py`` compares the two).

Where the two can still differ, for lines the JSON converter never writes: a field of an
image that the line's schema does not declare is ignored here (Python types it by its value);
a field the schema declares but the line omits counts as present with null.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from py4j.java_gateway import JavaPackage
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake_merge.debezium import (
    UNAVAILABLE,
    BadRecord,
    TableSpec,
    loads,
    schema_decoder,
)
from cdclake_merge.session import MERGE_JAR, MissingJars
from cdclake_merge.transforms import IMAGE_PREFIX

HEAD_START = '{"schema":'
HEAD_END = ',"payload":'
# The payload's parser (jvm/merge), a Spark UDF: bytes in, a struct of the plan's types out,
# null for any line it is not certain of.
PARSER_CLASS = "io.cdclake.merge.PayloadParser"
MAX_PLANS = 32  # distinct heads planned per run; lines of any others go to Python
# What the JVM decided about a line (a struct column, null where it decided nothing).
_FAST_FIELDS = (
    ("ok", "boolean"),
    ("kind", "string"),
    ("reason", "string"),
    ("head", "int"),
    ("op", "string"),
    ("order", "string"),
    ("lsn", "bigint"),
    ("source_ts_ms", "bigint"),
    ("toast", "array<string>"),
)
FAST_TYPE = "struct<" + ",".join(f"`{name}`:{t}" for name, t in _FAST_FIELDS) + ">"
# Lines skipped without parsing, with the Python parser's reasons.
_SKIPPED = {"": "blank line", "null": "tombstone (null value)"}
_HEX_PLACEHOLDER = UNAVAILABLE.encode().hex()
_TOAST_TEXT = (UNAVAILABLE, base64.b64encode(UNAVAILABLE.encode()).decode(), _HEX_PLACEHOLDER)
# A bytes field read as binary: the base64 form decodes to the placeholder itself, the hex
# form (binary.handling.mode=hex) to what its characters mean as base64.
_TOAST_BYTES = (UNAVAILABLE.encode(), base64.b64decode(_HEX_PLACEHOLDER))
_MIN_MICROS = -62135596800 * 1_000_000  # 0001-01-01T00:00:00Z
_MAX_MICROS = 253402300799 * 1_000_000 + 999_999  # 9999-12-31T23:59:59.999999Z
_DAY_MICROS = 86_400_000_000
_ISO_UTC = r"^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-5][0-9])(\.[0-9]{1,9})?Z$"
# source.sequence as Debezium writes it, ["<commit LSN>","<LSN>"] (either may be null), in
# JSON Python reads the same (no leading zeros, no control characters in a string); any
# other spelling is the Python parser's to judge.
_SEQUENCE = (
    r'^\[[ \t\r\n]*(null|"[0-9]{1,18}"|0|[1-9][0-9]{0,17})[ \t\r\n]*,'
    r'[ \t\r\n]*(null|"[^"\\\x00-\x1f]*"|-?(?:0|[1-9][0-9]{0,17}))[ \t\r\n]*\]$'
)
_PARSE_TYPES: dict[str, T.DataType] = {
    "int8": T.ShortType(),
    "int16": T.ShortType(),
    "int32": T.IntegerType(),
    "int64": T.LongType(),
    "float": T.FloatType(),
    "float32": T.FloatType(),
    "double": T.DoubleType(),
    "float64": T.DoubleType(),
    "boolean": T.BooleanType(),
    "string": T.StringType(),
    "bytes": T.BinaryType(),
}
_KINDS = {
    "org.apache.kafka.connect.data.Decimal": "decimal",
    "io.debezium.time.Date": "plain",
    "org.apache.kafka.connect.data.Date": "plain",
    "io.debezium.time.Timestamp": "ts_ms",
    "org.apache.kafka.connect.data.Timestamp": "ts_ms",
    "io.debezium.time.MicroTimestamp": "ts_us",
    "io.debezium.time.NanoTimestamp": "ts_ns",
    "io.debezium.time.ZonedTimestamp": "ts_iso",
    "io.debezium.time.Time": "time_ms",
    "org.apache.kafka.connect.data.Time": "time_ms",
    "io.debezium.time.MicroTime": "time_us",
    "io.debezium.time.NanoTime": "time_ns",
}


@dataclass(frozen=True)
class Field:
    """One image field: its column, how the payload parser reads it, how it is decoded."""

    name: str
    spark_type: str  # the column's type, as the Python parser reports it
    read_as: T.DataType
    kind: str  # plain, float, binary, decimal, ts_ms, ts_us, ts_ns, ts_iso, time_*


@dataclass(frozen=True)
class HeadPlan:
    head: str
    key: tuple[str, ...]
    before: tuple[Field, ...] | None  # None: lines that need this image go to Python
    after: tuple[Field, ...] | None

    def signature(self, op: str) -> tuple[tuple[str, str], ...]:
        image = self.before if op == "d" else self.after
        return tuple((f.name, f.spark_type) for f in image or ())


def heads_in(prefix: bytes) -> list[str]:
    """The heads of the schema-included lines that start within ``prefix`` (a file's start)."""
    heads: list[str] = []
    for line in prefix.decode("utf-8", "replace").split("\n"):
        end = line.find(HEAD_END) if line.startswith(HEAD_START) else -1
        if end > 0 and line[: end + len(HEAD_END)] not in heads:
            heads.append(line[: end + len(HEAD_END)])
    return heads


def plan_heads(heads: Sequence[str], spec: TableSpec) -> list[HeadPlan]:
    """Plans for the heads the JVM can decode, in the order given, at most MAX_PLANS."""
    plans = [plan for plan in (plan_head(h, spec) for h in heads) if plan is not None]
    return plans[:MAX_PLANS]


def plan_head(head: str, spec: TableSpec) -> HeadPlan | None:
    """The plan for one head, or None when its lines are better left to the Python parser."""
    if not (head.startswith(HEAD_START) and head.endswith(HEAD_END)):
        return None
    try:  # read as the Python parser reads lines: what it refuses in a head, it refuses
        schema = loads(head[len(HEAD_START) : -len(HEAD_END)])
    except ValueError:
        return None
    if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
        return None
    top = {f.get("field"): f for f in schema["fields"] if isinstance(f, dict)}
    if "op" not in top or "source" not in top:  # a flattened record, or not Debezium's
        return None
    before, after = (_plan_image(top.get(name), spec) for name in ("before", "after"))
    if before is None and after is None:
        return None
    return HeadPlan(head=head, key=tuple(spec.primary_key), before=before, after=after)


def _plan_image(schema_field: object, spec: TableSpec) -> tuple[Field, ...] | None:
    if not isinstance(schema_field, dict) or not isinstance(schema_field.get("fields"), list):
        return None
    fields: list[Field] = []
    for f in schema_field["fields"]:
        if not isinstance(f, dict) or not isinstance(f.get("field"), str):
            return None
        name = f["field"]
        if name in spec.exclude_columns:
            continue
        planned = _plan_field(name, f, spec)
        if planned is None:
            return None
        fields.append(planned)
    names = [f.name for f in fields]
    lowered = {n.lower() for n in names}
    if len(lowered) != len(names) or not set(spec.primary_key) <= set(names):
        return None
    return tuple(fields)


def _plan_field(name: str, schema_field: dict[str, object], spec: TableSpec) -> Field | None:
    try:
        spark_type, _ = schema_decoder(schema_field)
    except BadRecord:
        return None
    configured = spec.column_types.get(name)
    if configured == "string" and spark_type != "string":
        return None  # kept as the decoded value's text: Python's job
    read_as = _PARSE_TYPES.get(str(schema_field.get("type")))
    logical = schema_field.get("name")
    kind = _KINDS.get(str(logical), "plain") if logical is not None else "plain"
    if read_as is None or logical == "io.debezium.data.VariableScaleDecimal":
        return None  # nested values and variable-scale decimals: Python's job
    if kind == "decimal" and not spark_type.startswith("decimal"):
        return None  # wider than Spark's decimals: kept as text by Python
    if kind == "plain":
        if isinstance(read_as, T.FloatType | T.DoubleType):
            kind = "float"
        elif isinstance(read_as, T.BinaryType):
            kind = "binary"
    return Field(name=name, spark_type=spark_type, read_as=read_as, kind=kind)


def image_column(plan: int, image: str) -> str:
    """The column of the ``before`` or ``after`` images that plan ``plan`` decoded."""
    return f"{IMAGE_PREFIX}{plan}_{image}"


def classify_lines(lines: DataFrame, plans: Sequence[HeadPlan]) -> DataFrame:
    """``lines`` as read (``file``, ``_split``, ``_row``, ``text``) plus ``fast``
    (``FAST_TYPE``) and, for each plan, a column of the images it decoded
    (:func:`image_column`: a struct of the image's raw values, null on other lines).

    ``fast.ok`` marks the lines decoded here; every other line keeps only its text, for the
    Python parser. Each stage is its own projection so that the parser runs once a line.
    The images stay typed: written out as JSON text and parsed again, as the Python parser's
    rows are, they cost a million events 6 s of their read and fold (reliability.md).
    """
    where = [c for c in lines.columns if c != "text"]
    text = F.col("text")
    skipped = F.lit(None).cast(FAST_TYPE)
    for line_text, reason in _SKIPPED.items():
        outcome = _fast_struct(ok=F.lit(True), kind="skip", reason=reason)
        skipped = F.when(text == line_text, outcome).otherwise(skipped)
    if not plans:
        decided = lines.select(*where, "text", skipped.alias("fast"))
        return decided.select(*where, F.when(F.col("fast").isNull(), text).alias("text"), "fast")
    which = F.lit(None).cast("int")
    for i, plan in reversed(list(enumerate(plans))):
        which = F.when(text.startswith(plan.head), F.lit(i)).otherwise(which)
    staged = lines.select("*", F.when(text.endswith("}"), which).alias("_head"))
    # What follows the head up to the line's closing brace (the payload), cut at the head's
    # length in bytes: searching for the last ',"payload":' from the line's end tried each
    # byte of the payload and took a sixteenth of the read; as binary, the cut copies instead,
    # and the parser reads the bytes as they are.
    head_bytes = F.lit(None).cast("int")
    for i, plan in enumerate(plans):
        head_bytes = F.when(F.col("_head") == i, F.lit(len(plan.head.encode()) + 1)).otherwise(
            head_bytes
        )
    length = F.octet_length(text) - head_bytes
    after_head = text.cast("binary").substr(head_bytes, length)
    cut = staged.select("*", after_head.alias("_rest"))
    spark = lines.sparkSession
    parsed = cut.select(
        "*", *[_parse(spark, plan, i).alias(f"_w{i}") for i, plan in enumerate(plans)]
    )
    # Checks and decoding in a projection of their own, compiled: under array_compact (which
    # Spark only interprets) they would be evaluated row by row by the interpreter, and once
    # more by every filter on the outcome. Compiled into one method, they would be too large
    # for the JIT: session.SPARK_CONF's hugeMethodLimit splits them.
    checks = [_checked(plan, i).alias(f"_e{i}") for i, plan in enumerate(plans)]
    checked = parsed.select(*where, "text", "_head", *checks)
    outcomes = [_outcome(i) for i in range(len(plans))]
    images = {
        image_column(i, name): F.when(F.col(f"_e{i}")["ok"], F.col(f"_e{i}")[name])
        for i, plan in enumerate(plans)
        for name, image in (("before", plan.before), ("after", plan.after))
        if image is not None
    }
    decided = checked.select(
        *where,
        "text",
        F.coalesce(skipped, *outcomes).alias("fast"),
        *[value.alias(column) for column, value in images.items()],
    )
    # A decoded line's text is not kept: only the Python parser reads it, for the rest.
    text_left = F.when(~F.coalesce(F.col("fast.ok"), F.lit(False)), text)
    return decided.select(*where, text_left.alias("text"), "fast", *images)


def _parse(spark: SparkSession, plan: HeadPlan, i: int) -> Column:
    """The payload of a line with plan ``i``'s head: a struct, null where the parser is not
    certain of the line (it is stricter than Spark's ``from_json``: see its class comment)."""
    payload = [
        T.StructField("op", T.StringType()),
        T.StructField(
            "source",
            T.StructType(
                [
                    T.StructField("lsn", T.LongType()),
                    T.StructField("sequence", T.StringType()),
                    T.StructField("ts_ms", T.LongType()),
                    T.StructField("ts_usec", T.LongType()),
                ]
            ),
        ),
    ]
    for image_name, image in (("before", plan.before), ("after", plan.after)):
        if image is not None:
            payload.append(
                T.StructField(
                    image_name, T.StructType([T.StructField(f.name, f.read_as) for f in image])
                )
            )
    # spark_partition_id() is non-deterministic, so no filter on the outcome is pushed below
    # this projection: that would copy the parser into every reference to its result.
    this_head = (F.col("_head") == i) & (F.spark_partition_id() >= 0)
    return F.when(this_head, F.call_function(payload_parser(spark, T.StructType(payload)), "_rest"))


def payload_parser(spark: SparkSession, payload: T.StructType) -> str:
    """The name of the session's function that parses payloads of type ``payload``.

    One function per type, named by it, so runs of one long-lived session share it.
    """
    type_json = payload.json()
    name = "cdclake_payload_" + hashlib.sha256(type_json.encode()).hexdigest()[:16]
    parser_class = functools.reduce(getattr, PARSER_CLASS.split("."), spark.sparkContext._jvm)
    if isinstance(parser_class, JavaPackage):  # py4j's stand-in for a class it cannot find
        raise MissingJars(
            f"{PARSER_CLASS} is not on the Spark classpath: run `make setup` to build "
            f"jvm/lib/spark/{MERGE_JAR} (the Glue job ships it with --extra-jars)"
        )
    parser = parser_class(type_json)
    spark._jsparkSession.udf().register(name, parser, parser.dataType())
    return name


def _checked(plan: HeadPlan, i: int) -> Column:
    """What plan ``i`` makes of a line with its head: the checks, the order and the
    images decoded (as structs; the one its op does not use is null)."""
    p = F.col(f"_w{i}")
    op, source = p["op"], p["source"]
    lsn = source["lsn"]
    rest = F.col("_rest").cast("string")
    sequence = source["sequence"]
    no_sequence = sequence.isNull() | (sequence == "")
    first = F.regexp_extract(sequence, _SEQUENCE, 1)  # "" when the pattern does not match
    sequence_ok = no_sequence | (first != "")
    first_lsn = F.translate(first, '"', "")
    commit = F.when(no_sequence | (first_lsn == "null"), lsn).otherwise(first_lsn.cast("bigint"))
    ts_usec = source["ts_usec"]
    source_ts_ms = F.coalesce(source["ts_ms"], _floor_div(ts_usec, 1000))
    checks = [
        # Searched with a rare first byte: a quote starts a compare at every key and string.
        # It finds a little more than it must, which only sends a line to Python.
        ~rest.contains("__") | _lacks(rest, '"__op"', '"__deleted"', '"__lsn"'),
        p.isNotNull(),
        op.isin("c", "u", "d", "r", "t"),
        lsn >= 0,
        sequence_ok,
    ]
    images: dict[str, Column] = {}
    toast_names = F.array().cast("array<string>")
    image_ok = op == "t"  # a truncate has no image
    for ops, image_name, image in (
        (("d",), "before", plan.before),
        (("c", "u", "r"), "after", plan.after),
    ):
        if image is None:
            continue
        values = [_Value(p[image_name][f.name], f) for f in image]
        matches = op.isin(*ops)
        row = F.struct(*[v.raw.alias(v.field.name) for v in values])
        images[image_name] = F.when(matches, row)
        toast = F.array(*[F.when(v.toast, F.lit(v.field.name)) for v in values])
        ok = p[image_name].isNotNull()
        for v in values:
            ok = ok & v.ok
            if v.field.name in plan.key:
                ok = ok & v.value.isNotNull() & ~v.toast
        image_ok = F.when(matches, ok).otherwise(image_ok)
        toast_names = F.when(matches, toast).otherwise(toast_names)
    ok = F.lit(True)
    for check in [*checks, image_ok]:
        ok = ok & F.coalesce(check, F.lit(False))
    checked = F.struct(
        ok.alias("ok"),
        op.alias("op"),
        F.concat(_padded(commit), _padded(lsn)).alias("order"),
        lsn.alias("lsn"),
        source_ts_ms.alias("source_ts_ms"),
        toast_names.alias("toast"),
        *[row.alias(name) for name, row in images.items()],
    )
    # Not deterministic, so the projection that serialises it is not merged into this one.
    return F.when((F.col("_head") == i) & (F.spark_partition_id() >= 0), checked)


def _outcome(i: int) -> Column:
    """The ``FAST_TYPE`` outcome of a line with plan ``i``'s head, from :func:`_checked`."""
    e = F.col(f"_e{i}")
    return F.when(
        F.col("_head") == i,
        _fast_struct(
            ok=e["ok"],
            kind="event",
            head=F.lit(i),
            op=e["op"],
            order=e["order"],
            lsn=e["lsn"],
            source_ts_ms=e["source_ts_ms"],
            toast=F.array_compact(e["toast"]),
        ),
    )


def _lacks(text: Column, *markers: str) -> Column:
    lacks = F.lit(True)
    for marker in markers:
        lacks = lacks & ~text.contains(marker)
    return lacks


def _fast_struct(*, ok: Column, kind: str, reason: str | None = None, **values: Column) -> Column:
    """A ``FAST_TYPE`` value; fields not given are null."""
    given = {"ok": ok, "kind": F.lit(kind), "reason": F.lit(reason), **values}
    return F.struct(*[given.get(name, F.lit(None)).cast(t).alias(name) for name, t in _FAST_FIELDS])


class _Value:
    """One field of one line: is it a TOAST placeholder, does it decode, its canonical value."""

    def __init__(self, value: Column, field: Field) -> None:
        self.value, self.field = value, field
        if isinstance(field.read_as, T.StringType):
            self.toast = value.isin(*_TOAST_TEXT)
        elif isinstance(field.read_as, T.BinaryType):
            self.toast = value.isin(*[F.lit(b) for b in _TOAST_BYTES])
        else:
            self.toast = F.lit(False)
        decoded, valid = _decode(value, field)
        self.raw = F.when(~self.toast, decoded)
        self.ok = value.isNull() | self.toast | F.coalesce(valid, F.lit(False))


def _decode(v: Column, field: Field) -> tuple[Column, Column]:
    """(canonical value, whether it decodes) as the Python parser would write it."""
    kind = field.kind
    if kind == "float":
        return v, ~F.isnan(v) & (F.abs(v) != F.lit(float("inf")))
    if kind == "binary":
        return F.base64(v), F.lit(True)
    if kind == "decimal":
        return _decimal(v, field.spark_type)
    if kind in ("ts_ms", "ts_us", "ts_ns"):
        micros = {
            "ts_ms": v.cast("bigint") * 1000,
            "ts_us": v.cast("bigint"),
            "ts_ns": _floor_div(v.cast("bigint"), 1000),
        }[kind]
        if kind == "ts_ms":  # checked before multiplying, which could overflow
            return micros, v.between(_MIN_MICROS // 1000, _MAX_MICROS // 1000)
        return micros, micros.between(_MIN_MICROS, _MAX_MICROS)
    if kind == "ts_iso":
        return _iso_timestamp(v)
    if kind.startswith("time_"):
        micros = {
            "time_ms": v.cast("bigint") * 1000,
            "time_us": v.cast("bigint"),
            "time_ns": _floor_div(v.cast("bigint"), 1000),
        }[kind]
        if kind == "time_ms":
            valid = v.between(0, _DAY_MICROS // 1000)
        else:
            valid = micros.between(0, _DAY_MICROS)
        return _time_text(micros), valid
    return v, F.lit(True)


def _decimal(v: Column, spark_type: str) -> tuple[Column, Column]:
    """Base64 big-endian two's complement → its exact text, for unscaled values of ≤ 8 bytes."""
    scale = int(spark_type[len("decimal(") : -1].split(",")[1])
    digits = F.hex(v)
    negative = (F.length(v) > 0) & (F.substring(digits, 1, 1) >= F.lit("8"))
    padded = F.when(negative, F.lpad(digits, 16, "F")).otherwise(F.lpad(digits, 16, "0"))
    unscaled = F.conv(padded, 16, -10).cast("decimal(19,0)")
    # decimal(19,0) times decimal(s,s) is exact up to scale 18; the cast is null on overflow
    number = unscaled if scale == 0 else unscaled * F.lit(Decimal(1).scaleb(-scale))
    value = number.cast(spark_type)
    if scale > 18:
        return value.cast("string"), F.lit(False)
    return value.cast("string"), (F.length(v) <= 8) & value.isNotNull()


def _iso_timestamp(v: Column) -> tuple[Column, Column]:
    """Debezium's ZonedTimestamp in UTC (``...Z``), nanoseconds cut to microseconds.

    Spark's cast reads exactly the text the pattern lets through (it cuts nanoseconds as
    the Python parser does, and is null on a day or hour that does not exist); year 0,
    which Python refuses, is refused here. ``make_timestamp`` of the parts gave the same
    values at an eighth of the read's time: it looks its time zone up again on every row.
    """
    valid = v.rlike(_ISO_UTC) & ~v.startswith("0000")
    micros = F.unix_micros(v.cast("timestamp"))
    return micros, valid & micros.isNotNull()


def _time_text(micros: Column) -> Column:
    """``HH:MM:SS.ffffff`` of a time of day in µs (0 to 24:00 inclusive, checked before)."""
    return F.format_string(
        "%02d:%02d:%02d.%06d",
        _floor_div(micros, 3_600_000_000),
        _floor_div(micros, 60_000_000) % 60,
        _floor_div(micros, 1_000_000) % 60,
        micros % 1_000_000,
    )


def _floor_div(v: Column, n: int) -> Column:
    """Python's ``//`` on bigints, exact (``/`` on bigints goes through double)."""
    exact = v.cast("decimal(20,0)") - F.pmod(v, F.lit(n))
    return (exact / n).cast("bigint")


def _padded(number: Column) -> Column:
    return F.lpad(number.cast("string"), 20, "0")
