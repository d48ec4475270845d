"""The JVM's fast lane decides lines exactly as the Python parser would, or leaves them to it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.debezium import SNAPSHOT_END, UNAVAILABLE, TableSpec
from cdclake_merge.generator import GeneratorOptions, generate_files
from cdclake_merge.job import parse_undecided, read_lines
from cdclake_merge.jvm_parse import (
    HEAD_END,
    classify_lines,
    heads_in,
    image_column,
    jvm_function,
    plan_head,
    plan_heads,
)
from tests.merge.support import (
    compact_line,
    decimal_b64,
    envelope,
    field,
    lines_frame,
    outcome_rows,
    parsed_in_python,
    with_schema,
)

pytestmark = pytest.mark.spark

SPEC = TableSpec(("id",))
FIELDS = [
    field("id", "int64"),
    field("name", "string"),
    field("price", "double"),
    field(
        "amount",
        "bytes",
        "org.apache.kafka.connect.data.Decimal",
        scale="2",
        **{"connect.decimal.precision": "6"},
    ),
    field("day", "int32", "io.debezium.time.Date"),
    field("at", "int64", "io.debezium.time.MicroTimestamp"),
    field("zoned", "string", "io.debezium.time.ZonedTimestamp"),
    field("clock", "int64", "io.debezium.time.MicroTime"),
    field("blob", "bytes"),
]
ROW = {
    "id": 1,
    "name": "a",
    "price": 2.5,
    "amount": decimal_b64("-12.34", 2),
    "day": 19000,
    "at": 1_700_000_000_123_456,
    "zoned": "2024-02-29T23:59:59.1234567Z",
    "clock": 3_600_000_001,
    "blob": "AQI=",
}


# One field of each other kind the JVM decodes.
KIND_FIELDS = [
    field("id", "int64"),
    field("ms", "int64", "io.debezium.time.Timestamp"),
    field("ns", "int64", "io.debezium.time.NanoTimestamp"),
    field("tms", "int32", "io.debezium.time.Time"),
    field("tns", "int64", "io.debezium.time.NanoTime"),
    field("f32", "float"),
    field("small", "int16"),
    field("flag", "boolean"),
    field(
        "tiny",
        "bytes",
        "org.apache.kafka.connect.data.Decimal",
        scale="8",
        **{"connect.decimal.precision": "10"},
    ),
    field(
        "wide",
        "bytes",
        "org.apache.kafka.connect.data.Decimal",
        scale="0",
        **{"connect.decimal.precision": "20"},
    ),
]
KIND_ROW = {
    "id": 1,
    "ms": 1_700_000_000_123,
    "ns": 1_700_000_000_123_456_789,
    "tms": 86_400_000,
    "tns": 1_000_000_001,
    "f32": 1.5,
    "small": -7,
    "flag": True,
    "tiny": decimal_b64("0.00000001", 8),
    "wide": decimal_b64(str(1 - 2**63), 0),
}


def line(payload: Any, fields: list[dict[str, Any]] = FIELDS) -> str:
    return compact_line(with_schema(payload, fields))


def event(op: str = "u", **row: Any) -> dict[str, Any]:
    image = {**ROW, **row}
    if op == "d":
        return envelope("d", lsn=40, commit=30, before=image)
    return envelope(op, lsn=40, commit=30, after=image)


def read(snapshot: str, op: str = "r") -> dict[str, Any]:
    """A snapshot's read with ``source.snapshot`` as given."""
    payload = event(op)
    payload["source"]["snapshot"] = snapshot
    return payload


def kind_line(**row: Any) -> str:
    return line(envelope("c", lsn=40, commit=30, after={**KIND_ROW, **row}), KIND_FIELDS)


def head_of(text: str) -> str:
    return text[: text.index(HEAD_END) + len(HEAD_END)]


# The placeholder in a bytea column: binary.handling.mode=base64 (the default) and =hex.
TOAST_BASE64 = base64.b64encode(UNAVAILABLE.encode()).decode()
TOAST_HEX = UNAVAILABLE.encode().hex()

# Each line the JVM must leave to Python, next to why; every one also differs from the clean
# line in one place only, so a check that is lost shows here as a wrong outcome.
UNDECIDED = {
    "int64 value written as a string": line(event(id="1")),
    "text after the payload": line(event())[:-1] + ' "x"}',
    "payload closed early": line(event())[:-1] + "}}",
    "schema repeated after the payload": line(event())[:-1] + ',"schema":null}',
    "schema repeated after the payload, not null": line(event())[:-1] + ',"schema":{}}',
    # The last of two keys wins, in Spark as in Python; the JVM's parser leaves it to Python.
    "second payload key": line(event())[:-1] + ',"payload":' + json.dumps(event(id=2)) + "}",
    "a payload field named twice": line(event()).replace('"op":"u"', '"op":"u","op":"u"'),
    "an image field named twice": line(event()).replace('"id":1,', '"id":1,"id":1,'),
    "a lone surrogate escaped in a value": line(event(name="=s=")).replace("=s=", "\\ud800x"),
    "a lone surrogate escaped in a key": line({**event(), "=s=": 1}).replace("=s=", "\\udc00"),
    "a number for a text field": line(event(name=5)),
    "an object for a number field": line(event(clock={"v": 1})),
    "int32 past its range": line(event(day=2**31)),
    "NaN as text": line(event(price="NaN")),
    "decimal wider than its precision": line(event(amount=decimal_b64("12345.67", 2))),
    "timestamp outside years 1-9999": line(event(at=10**18)),
    "zoned timestamp with an offset": line(event(zoned="2024-01-01T00:00:00+02:00")),
    "zoned timestamp in year 0": line(event(zoned="0000-01-01T00:00:00Z")),
    "zoned timestamp on a day that does not exist": line(event(zoned="2023-02-29T12:00:00Z")),
    "zoned timestamp at hour 24": line(event(zoned="2024-01-01T24:00:00Z")),
    "time of day past 24:00": line(event(clock=86_400_000_001)),
    "base64 with a bad alphabet": line(event(blob="a!==")),
    "missing key": line(event(id=None)),
    "TOAST placeholder in the key": line(event(id=UNAVAILABLE)),
    "a flattened record's key in the payload": line({**event(), "__op": "u", "__lsn": 40}),
    "incremental snapshot (no LSN)": line(
        {**event("r"), "source": {"snapshot": "incremental", "sequence": '["5","6"]'}}
    ),
    "sequence with a leading zero": line(
        {**event(), "source": {**event()["source"], "sequence": '[030,"40"]'}}
    ),
    "sequence with a line break in a string": line(
        {**event(), "source": {**event()["source"], "sequence": '["30","4\n0"]'}}
    ),
    "sequence that is not [commit, lsn]": line(
        {**event(), "source": {**event()["source"], "sequence": '["1"]'}}
    ),
    "millisecond timestamp past year 9999": kind_line(ms=253_402_300_800_000),
    "nanosecond timestamp past 64 bits": kind_line(ns=-(2**63) - 1),
    "time of day in milliseconds past 24:00": kind_line(tms=86_400_001),
    "time of day in nanoseconds before midnight": kind_line(tns=-1),
    "float32 past its range": kind_line(f32=1e39),
    "int16 past its range": kind_line(small=2**15),
    "decimal of more than 8 bytes": kind_line(wide=decimal_b64(str(2**64), 0)),
    "logical decoding message": line({**event(), "op": "m"}),
    "unknown op": line({**event(), "op": "x"}),
    "null payload": line(None),
    "no schema": compact_line(event()),
}
DECIDED = {
    "update": line(event()),
    "delete": line(event("d")),
    "a snapshot's read after a streamed commit": line(event("r")),
    "the first change after a snapshot (commit unknown)": line(
        {**event(), "source": {**event()["source"], "sequence": '[null,"40"]'}}
    ),
    "truncate": line({**event(), "op": "t", "after": None}),
    "TOAST placeholder": line(event(name=UNAVAILABLE)),
    "TOAST placeholder in bytes, base64": line(event(blob=TOAST_BASE64)),
    "TOAST placeholder in bytes, hex": line(event(blob=TOAST_HEX)),
    "null values": line(event(name=None, amount=None, zoned=None)),
    # As Kafka Connect's JsonConverter writes it: UTF-8, not \u escapes.
    "text beyond ASCII": line(event(name="=t=")).replace("=t=", "Zoë 😀 東京"),
    "an unknown field holding objects": line({**event(), "extra": {"a": [1, {"b": None}]}}),
    # Python looks for a flattened record's keys among the payload's own keys only.
    "a flattened record's key below the payload": line({**event(), "extra": {"__op": "u"}}),
    "a value spelled as a flattened record's key": line(event(name="__op")),
    "a value of every other kind": kind_line(),
    "values of every other kind, below zero": kind_line(
        ms=-1, ns=-1, tns=999, f32=-0.0, small=-(2**15), tiny=decimal_b64("-99.99999999", 8)
    ),
    # A table's last read of a snapshot carries SNAPSHOT_END as its reason; other reads, a
    # value spelling the same words and an update marked so (Debezium marks none) do not.
    "a snapshot's last read": line(read("last_in_data_collection")),
    "a snapshot's last read of its last table": line(read("last")),
    "a snapshot's read": line(read("true")),
    "an incremental snapshot's read": line(read("incremental")),
    "a value spelling a snapshot's end": line(event("r", name='"snapshot":"last"')),
    "an update marked as a snapshot's end": line(read("last", op="u")),
    "tombstone": "null",
    "blank line": "",
}


def run_composition(spark: Any, texts: list[str]) -> tuple[Any, Any]:
    """``texts`` as one change file read: (its classified lines, their outcomes as a run
    parses them), collected."""
    plans = plan_heads(heads_in("\n".join(texts).encode()), SPEC)
    classified = classify_lines(lines_frame(spark, texts), plans)
    cached: list[Any] = []
    fast = parse_undecided(classified, SPEC, cached)
    rows = fast.where("kind != 'schema'").collect()
    for frame in cached:
        frame.unpersist()
    return classified, rows


@pytest.fixture(scope="module")
def edge_cases(spark):  # type: ignore[no-untyped-def]
    texts = [*DECIDED.values(), *UNDECIDED.values()]
    classified, fast = run_composition(spark, texts)
    decided = {r["_row"] + 1 for r in classified.where("fast.ok").select("_row").collect()}
    return {
        "names": [*DECIDED, *UNDECIDED],
        "decided": decided,
        "fast": fast,
        "python": outcome_rows(parsed_in_python(lines_frame(spark, texts), SPEC).collect()),
    }


@pytest.fixture(scope="module")
def generated(spark, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("generated")
    generate_files(root, GeneratorOptions(events=2_000, keys=150, seed=5, flush_size=400))
    paths = sorted(str(p) for p in (root / "topics").rglob("*.json"))
    read = read_lines(spark, paths)
    heads = [h for p in paths for h in heads_in(Path(p).read_bytes()[:65536])]
    classified = classify_lines(read, plan_heads(list(dict.fromkeys(heads)), SPEC))
    cached: list[Any] = []
    fast = parse_undecided(classified, SPEC, cached)  # the run's own composition
    fast_rows = outcome_rows(fast.collect())
    for frame in cached:
        frame.unpersist()
    return {
        "lines": read.count(),
        "decided": classified.where("fast.ok").count(),
        "fast": fast_rows,
        "python": outcome_rows(parsed_in_python(read, SPEC).collect()),
    }


def test_classify_lines_generated_changes_mostly_decided_in_jvm(generated) -> None:  # type: ignore[no-untyped-def]
    assert generated["decided"] >= 0.95 * generated["lines"]


def test_classify_lines_generated_changes_same_outcomes_as_python(generated) -> None:  # type: ignore[no-untyped-def]
    assert generated["fast"] == generated["python"]


def test_classify_lines_clean_lines_decided_in_jvm(edge_cases) -> None:  # type: ignore[no-untyped-def]
    numbers = {name: n for n, name in enumerate(edge_cases["names"], start=1)}
    assert {name for name in DECIDED if numbers[name] not in edge_cases["decided"]} == set()


def test_classify_lines_doubtful_lines_left_to_python(edge_cases) -> None:  # type: ignore[no-untyped-def]
    numbers = {name: n for n, name in enumerate(edge_cases["names"], start=1)}
    assert {name for name in UNDECIDED if numbers[name] in edge_cases["decided"]} == set()


def test_classify_lines_edge_cases_same_outcomes_as_python(edge_cases) -> None:  # type: ignore[no-untyped-def]
    assert outcome_rows(edge_cases["fast"]) == edge_cases["python"]


def test_classify_lines_two_schemas_in_one_file_each_cut_at_its_own_head(spark) -> None:  # type: ignore[no-untyped-def]
    # Heads of different lengths: each line's payload starts where its own head ends.
    short = line(envelope("u", lsn=41, commit=30, after={"id": 2, "name": "b"}), FIELDS[:2])
    texts = [line(event()), short, line(event(id=3))]
    classified, fast = run_composition(spark, texts)
    python = parsed_in_python(lines_frame(spark, texts), SPEC).collect()
    assert classified.where("fast.ok").count() == 3
    assert outcome_rows(fast) == outcome_rows(python)


def test_classify_lines_snapshot_last_reads_marked_as_its_end_in_jvm(spark) -> None:  # type: ignore[no-untyped-def]
    names = [
        "a snapshot's last read",
        "a snapshot's read",
        "a snapshot's last read of its last table",
        "a value spelling a snapshot's end",
    ]
    classified, rows = run_composition(spark, [DECIDED[name] for name in names])
    assert classified.where("fast.ok").count() == len(names)
    assert sorted(r["reason"] or "" for r in rows) == ["", "", SNAPSHOT_END, SNAPSHOT_END]


def test_classify_lines_image_its_op_does_not_use_is_null(spark) -> None:  # type: ignore[no-untyped-def]
    # Only the image an event's op uses is kept: the run caches every decided line's images.
    classified, _ = run_composition(spark, [DECIDED["update"], DECIDED["delete"]])
    rows = classified.orderBy("_row").collect()
    before, after = image_column(0, "before"), image_column(0, "after")
    assert [(r[before] is None, r[after] is None) for r in rows] == [(True, False), (False, True)]


def test_parse_undecided_lines_parsed_in_python_numbered_in_their_file(edge_cases) -> None:  # type: ignore[no-untyped-def]
    lines = [r["line"] for r in edge_cases["fast"] if r["line"] is not None]
    undecided = [n for n, name in enumerate(edge_cases["names"], start=1) if name in UNDECIDED]
    assert sorted(lines) == undecided


def test_heads_in_finds_each_schema_once() -> None:
    other = FIELDS[:2]
    text = "\n".join([line(event()), "null", line(event(id=2)), line(event(), other)])
    assert heads_in(text.encode()) == [head_of(line(event())), head_of(line(event(), other))]


@pytest.mark.parametrize(
    ("why", "fields"),
    [
        ("nested value", [field("id", "int64"), field("tags", "array")]),
        (
            "variable-scale decimal",
            [field("id", "int64"), field("n", "struct", "io.debezium.data.VariableScaleDecimal")],
        ),
        ("no key column", [field("name", "string")]),
        ("a lone surrogate in the schema", [field("id", "int64"), field("x\ud800", "string")]),
        (
            "NaN in the schema",
            [field("id", "int64"), {**field("n", "double"), "default": float("nan")}],
        ),
    ],
)
def test_plan_head_schemas_it_cannot_decode_get_no_plan(
    why: str, fields: list[dict[str, Any]]
) -> None:
    assert plan_head(head_of(line(event(), fields)), SPEC) is None, why


def test_plan_head_configured_text_column_gets_no_plan() -> None:
    spec = TableSpec(("id",), column_types={"price": "string"})
    assert plan_head(head_of(line(event())), spec) is None


@pytest.mark.parametrize("form", ["base64", "hex"])
def test_classify_lines_bytes_toast_placeholder_decided_as_toast(spark, form: str) -> None:  # type: ignore[no-untyped-def]
    text = DECIDED[f"TOAST placeholder in bytes, {form}"]
    classified, [fast] = run_composition(spark, [text])
    python = parsed_in_python(lines_frame(spark, [text]), SPEC)
    [python] = python.where("kind != 'schema'").collect()
    assert classified.where("fast.ok").count() == 1
    assert fast["toast"] == python["toast"] == ["blob"]


PAYLOAD_TYPE = (
    "struct<op:string,"
    "n:struct<s:string,l:bigint,i:int,h:smallint,d:double,f:float,b:boolean,x:binary>>"
)


def parse_payloads(spark: Any, payloads: list[bytes]) -> list[Any]:
    """Each of ``payloads`` read by the JVM's payload parser (``PAYLOAD_TYPE``), in order."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    payload_type = T._parse_datatype_string(PAYLOAD_TYPE)
    name = jvm_function(spark, "io.cdclake.merge.PayloadParser", payload_type.json())
    frame = spark.createDataFrame([(i, p) for i, p in enumerate(payloads)], "i int, p binary")
    rows = frame.select("i", F.call_function(name, "p").alias("v")).orderBy("i").collect()
    return [r["v"] for r in rows]


def test_payload_parser_values_equal_from_json(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    values = [
        '{"s":"Zoë 😀","l":-9223372036854775808,"i":2147483647,"h":-32768,'
        '"d":0.1,"f":3.4e38,"b":true,"x":"AQI="}',
        '{"s":"","l":0,"i":-1,"h":7,"d":-0.0,"f":1e-45,"b":false,"x":""}',
        '{"s":"a\\\\\\"b\\\\ud800","l":123456789012,"d":12,"f":16777216,"x":"/w=="}',
        '{"d":1.7976931348623157e308,"f":0.30000001192092896,"unknown":{"a":[1,{}]}}',
        '{"s":null,"l":null}',
        "{}",
    ]
    payloads = [f'{{"op":"u","n":{v}}}' for v in values]
    parsed = parse_payloads(spark, [p.encode() for p in payloads])
    frame = spark.createDataFrame([(i, p) for i, p in enumerate(payloads)], "i int, p string")
    expected = [
        r["v"]
        for r in frame.select("i", F.from_json("p", PAYLOAD_TYPE).alias("v")).orderBy("i").collect()
    ]
    assert None not in parsed
    assert parsed == expected


@pytest.mark.parametrize(
    ("why", "payload"),
    [
        ("overlong UTF-8 form", b'{"op":"\xc0\xaf"}'),
        ("UTF-8 of a surrogate", b'{"op":"\xed\xa0\x80"}'),
        ("cut UTF-8 sequence", b'{"op":"\xe6\x9d"}'),
        ("byte that starts no UTF-8 sequence", b'{"op":"\xff"}'),
        ("surrogate escape", b'{"op":"\\uD83D\\uDE00"}'),
        ("any backslash-u escape", b'{"op":"\\u0041"}'),
        ("escaped key of a flattened record", b'{"op":"u","\\u005f_op":"u"}'),
        ("byte order mark", b'\xef\xbb\xbf{"op":"u"}'),
        ("UTF-16", '{"op":"u"}'.encode("utf-16-le")),
        ("overlong three-byte form", b'{"op":"\xe0\x80\xaf"}'),
        ("overlong four-byte form", b'{"op":"\xf0\x8f\xbf\xbf"}'),
        ("past U+10FFFF", b'{"op":"\xf4\x90\x80\x80"}'),
        (
            "integer past 64 bits in a field no plan reads",
            b'{"op":"u","t":123456789012345678901234}',
        ),
        ("infinite number in a field no plan reads", b'{"op":"u","t":1e400}'),
        (
            "nesting too deep in a field no plan reads",
            b'{"op":"u","t":' + b"[" * 70 + b"]" * 70 + b"}",
        ),
        ("integer not exact as a double", b'{"n":{"d":9007199254740993}}'),
        ("integer not exact as a float", b'{"n":{"f":16777217}}'),
        ("double halfway between two floats", b'{"n":{"f":1.000000059604644775390625}}'),
        ("base64 without its padding", b'{"n":{"x":"QQ"}}'),
        ("base64 with stray bits", b'{"n":{"x":"QR=="}}'),
        ("base64 with a line break", b'{"n":{"x":"QUJD\\nQUJD"}}'),
        ("text after the object", b'{"op":"u"} {}'),
        ("no object", b'"u"'),
        ("field named twice", b'{"op":"u","op":"c"}'),
        ("number past a long", b'{"n":{"l":9223372036854775808}}'),
        ("fraction for an int", b'{"n":{"i":1.5}}'),
        ("text for a boolean", b'{"n":{"b":"true"}}'),
        ("NaN token", b'{"n":{"d":NaN}}'),
        ("not base64", b'{"n":{"x":"a!=="}}'),
        ("array for a struct", b'{"n":[]}'),
    ],
)
def test_payload_parser_doubtful_payload_is_null(spark, why: str, payload: bytes) -> None:  # type: ignore[no-untyped-def]
    assert parse_payloads(spark, [payload, b'{"op":"u"}']) == [None, ("u", None)], why
