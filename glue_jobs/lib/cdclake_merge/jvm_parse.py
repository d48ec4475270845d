"""Schema-included Debezium envelopes parsed in the JVM: the cold path's fast lane.

The JSON converter writes each line of a table version as ``{"schema":S,"payload":P}`` with
the same ``S``, and ``S`` is most of the line. The driver turns each distinct line *head*
(``{"schema":S,"payload":``) into a :class:`HeadPlan`: the Spark type the payload's fields
are read with and how each value decodes, the way :mod:`cdclake_merge.debezium` decodes it.
Lines of a planned head have only their payload read, checked and decoded, in one call of
the project's ``io.cdclake.merge.EventDecoder`` (``jvm/merge``: ``cdclake-merge.jar``, on the
local session's classpath and shipped with the Glue job), without leaving the JVM.

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

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from py4j.java_gateway import JavaPackage
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake_merge.debezium import (
    SNAPSHOT_END,
    SNAPSHOT_LAST,
    UNAVAILABLE,
    TableSpec,
    loads,
    schema_decoder,
)
from cdclake_merge.decoders import BadRecord
from cdclake_merge.schema import decimal_parts
from cdclake_merge.session import MERGE_JAR, MissingJars
from cdclake_merge.transforms import IMAGE_PREFIX

HEAD_START = '{"schema":'
HEAD_END = ',"payload":'
# The event decoder (jvm/merge), a Spark UDF: a payload's bytes in, the event decoded out, null
# for any line it is not certain of.
DECODER_CLASS = "io.cdclake.merge.EventDecoder"
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
# The source block's snapshot field at a table's last read (see _snapshot_end).
_SNAPSHOT_LAST = r'"source":\{[^{}]*"snapshot":"(' + "|".join(sorted(SNAPSHOT_LAST)) + ')"'
# Lines skipped without parsing, with the Python parser's reasons.
_SKIPPED = {"": "blank line", "null": "tombstone (null value)"}
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
    kind: str  # how EventDecoder decodes it: plain, float, binary, decimal, ts_*, time_*


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
    if kind == "decimal" and decimal_parts(spark_type) is None:
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
    Python parser. Each stage is its own projection so that the decoder runs once a line.
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
    decoded = cut.select(
        "*", *[_decoded(spark, plan, i).alias(f"_e{i}") for i, plan in enumerate(plans)]
    )
    outcomes = [_outcome(i) for i in range(len(plans))]
    images = {
        image_column(i, name): F.col(f"_e{i}")[name]
        for i, plan in enumerate(plans)
        for name, image in (("before", plan.before), ("after", plan.after))
        if image is not None
    }
    decided = decoded.select(
        *where,
        "text",
        F.coalesce(skipped, *outcomes).alias("fast"),
        *[value.alias(column) for column, value in images.items()],
    )
    # A decoded line's text is not kept: only the Python parser reads it, for the rest.
    text_left = F.when(~F.coalesce(F.col("fast.ok"), F.lit(False)), text)
    return decided.select(*where, text_left.alias("text"), "fast", *images)


def _decoded(spark: SparkSession, plan: HeadPlan, i: int) -> Column:
    """What plan ``i`` makes of a line with its head, decoded by ``DECODER_CLASS``: a struct
    of its op, order, LSN, source time, TOAST columns and images (the one its op uses, in
    the canonical form :func:`~cdclake_merge.transforms.decode_events` reads), null where the
    decoder is not certain of the line (it is stricter than the Python parser: see its class
    comment)."""
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
            fields = [T.StructField(f.name, f.read_as, metadata=_decoding(f, plan)) for f in image]
            payload.append(T.StructField(image_name, T.StructType(fields)))
    decoder = jvm_function(spark, DECODER_CLASS, T.StructType(payload).json(), UNAVAILABLE)
    # spark_partition_id() is non-deterministic, so the projections that read the outcome
    # are not merged into this one: that would copy the decoder into every reference to it.
    this_head = (F.col("_head") == i) & (F.spark_partition_id() >= 0)
    return F.when(this_head, F.call_function(decoder, "_rest"))


def _decoding(field: Field, plan: HeadPlan) -> dict[str, object]:
    """How ``DECODER_CLASS`` decodes ``field``: the metadata of its payload field."""
    decoding: dict[str, object] = {"kind": field.kind, "key": field.name in plan.key}
    parts = decimal_parts(field.spark_type) if field.kind == "decimal" else None
    if parts is not None:
        decoding.update(precision=parts[0], scale=parts[1])
    return decoding


def jvm_function(spark: SparkSession, class_name: str, *arguments: str) -> str:
    """The name of the session's function made by the project's UDF ``class_name`` (a class
    of ``jvm/merge``) from ``arguments``: named by both, so that each run of a long-lived
    session registers the same function under the same name instead of adding one."""
    key = "\0".join([class_name, *arguments])
    simple = class_name.rsplit(".", 1)[-1].lower()
    name = f"cdclake_{simple}_{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    udf_class: Any = functools.reduce(getattr, class_name.split("."), spark.sparkContext._jvm)
    if isinstance(udf_class, JavaPackage):  # py4j's stand-in for a class it cannot find
        raise MissingJars(
            f"{class_name} is not on the Spark classpath: run `make setup` to build "
            f"jvm/lib/spark/{MERGE_JAR} (the Glue job ships it with --extra-jars)"
        )
    function = udf_class(*arguments)
    spark._jsparkSession.udf().register(name, function, function.dataType())
    return name


def _snapshot_end(text: Column) -> Column:
    """Whether the line is a table's last read of a snapshot (``source.snapshot`` ``last`` or
    ``last_in_data_collection``), from its text: the JSON converter writes the source block as
    one flat object, and a column's text value holding the same words is escaped (``\\"``),
    so the pattern matches only the block's own field. The cheap test first: Spark stops an
    ``AND`` at its first false."""
    return text.contains('"snapshot":"last') & text.rlike(_SNAPSHOT_LAST)


def _outcome(i: int) -> Column:
    """The ``FAST_TYPE`` outcome of a line with plan ``i``'s head, from :func:`_decoded`."""
    e = F.col(f"_e{i}")
    end = (e["op"] == "r") & _snapshot_end(F.col("text"))
    return F.when(
        F.col("_head") == i,
        _fast_struct(
            ok=e.isNotNull(),
            kind="event",
            reason=F.when(end, F.lit(SNAPSHOT_END)),
            head=F.lit(i),
            op=e["op"],
            order=e["order"],
            lsn=e["lsn"],
            source_ts_ms=e["source_ts_ms"],
            toast=e["toast"],
        ),
    )


def _fast_struct(
    *, ok: Column, kind: str, reason: str | Column | None = None, **values: Column
) -> Column:
    """A ``FAST_TYPE`` value; fields not given are null."""
    given = {"ok": ok, "kind": F.lit(kind), "reason": F.lit(reason), **values}
    return F.struct(*[given.get(name, F.lit(None)).cast(t).alias(name) for name, t in _FAST_FIELDS])
