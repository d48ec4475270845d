"""The line parser: shapes, ops, ordering positions, logical types, bad records."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import sys
from types import ModuleType
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cdclake_merge import debezium
from cdclake_merge.debezium import UNKNOWN_COMMIT, TableSpec, parse_line, parse_value
from cdclake_merge.schema import raw_ddl
from tests.merge.support import compact_line, decimal_b64, envelope, field, line, with_schema

SPEC = TableSpec(primary_key=("id",))


def decode(value: object, schema_field: dict[str, object]) -> object:
    event = with_schema(
        envelope("c", lsn=10, after={"id": 1, "v": value}),
        [field("id", "int32"), {**schema_field, "field": "v"}],
    )
    outcome = parse_value(event, SPEC)
    assert outcome.kind == "event", outcome.reason
    assert outcome.change is not None and outcome.change.row is not None
    return outcome.change.row["v"], dict(outcome.change.columns)["v"]


def test_parse_line_blank_line_is_skipped_with_reason() -> None:
    assert (parse_line("\r", SPEC).kind, parse_line("  ", SPEC).reason) == ("skip", "blank line")


def test_parse_line_null_tombstone_is_skipped_with_reason() -> None:
    outcome = parse_line("null", SPEC)
    assert (outcome.kind, outcome.reason) == ("skip", "tombstone (null value)")


def test_parse_line_invalid_json_is_bad_with_reason() -> None:
    outcome = parse_line('{"op": "c",', SPEC)
    assert outcome.kind == "bad"
    assert outcome.reason is not None and outcome.reason.startswith("not valid JSON")


def test_parse_value_envelope_update_takes_after_image() -> None:
    outcome = parse_value(envelope("u", lsn=42, commit=40, after={"id": 7, "name": "x"}), SPEC)
    change = outcome.change
    assert change is not None
    assert (change.op, change.commit_lsn, change.lsn) == ("u", 40, 42)
    assert change.row == {"id": 7, "name": "x"}


def test_parse_value_delete_takes_key_from_before_image() -> None:
    outcome = parse_value(envelope("d", lsn=50, before={"id": 7}), SPEC)
    assert outcome.change is not None
    assert (outcome.change.op, outcome.change.row) == ("d", {"id": 7})


def test_parse_value_delete_without_before_is_bad() -> None:
    outcome = parse_value(envelope("d", lsn=50), SPEC)
    assert outcome.kind == "bad"
    assert "deleted key is unknown" in (outcome.reason or "")


def test_parse_value_snapshot_read_orders_at_its_position_before_changes_committed_there() -> None:
    outcome = parse_value(envelope("r", lsn=30, after={"id": 1}, first_after_snapshot=True), SPEC)
    assert outcome.change is not None
    assert (outcome.change.order, outcome.change.lsn) == ((30, 0), 30)


def test_parse_value_snapshot_read_after_a_streamed_commit_orders_at_its_position() -> None:
    # sequence[0] is the last commit streamed before the snapshot: not the read's place.
    outcome = parse_value(envelope("r", lsn=30, commit=12, after={"id": 1}), SPEC)
    assert outcome.change is not None and outcome.change.order == (30, 0)


def test_parse_value_first_change_after_a_snapshot_has_unknown_commit() -> None:
    event = envelope("u", lsn=25, after={"id": 1}, first_after_snapshot=True)
    outcome = parse_value(event, SPEC)
    assert outcome.change is not None
    assert (outcome.change.order, outcome.change.commit_lsn) == ((UNKNOWN_COMMIT, 25), 0)


@pytest.mark.parametrize(
    ("op", "snapshot", "reason"),
    [
        ("r", "last_in_data_collection", debezium.SNAPSHOT_END),
        ("r", "last", debezium.SNAPSHOT_END),
        ("r", "true", None),
        ("r", "first_in_data_collection", None),
        ("r", "incremental", None),
        ("u", "last", None),
    ],
)
def test_parse_value_snapshot_last_read_marked_as_its_end(
    op: str, snapshot: str, reason: str | None
) -> None:
    event = envelope(op, lsn=50, after={"id": 1})
    event["source"]["snapshot"] = snapshot
    outcome = parse_value(event, SPEC)
    assert (outcome.kind, outcome.reason) == ("event", reason)


def test_parse_value_truncate_has_no_row() -> None:
    outcome = parse_value(envelope("t", lsn=99), SPEC)
    assert outcome.change is not None
    assert (outcome.change.op, outcome.change.row) == ("t", None)


def test_parse_value_message_op_is_skipped() -> None:
    outcome = parse_value(envelope("m", lsn=99), SPEC)
    assert (outcome.kind, outcome.reason) == ("skip", "logical decoding message (op m)")


def test_parse_value_unknown_op_is_bad() -> None:
    outcome = parse_value(envelope("x", lsn=99, after={"id": 1}), SPEC)
    assert (outcome.kind, outcome.reason) == ("bad", "unknown op 'x'")


def test_parse_value_missing_key_is_bad() -> None:
    outcome = parse_value(envelope("c", lsn=1, after={"name": "no id"}), SPEC)
    assert (outcome.kind, outcome.reason) == ("bad", "key column 'id' is missing or null")


def test_parse_value_missing_lsn_is_bad() -> None:
    event = envelope("c", lsn=1, after={"id": 1})
    del event["source"]["lsn"]
    outcome = parse_value(event, SPEC)
    assert outcome.kind == "bad" and "cannot be ordered" in (outcome.reason or "")


def _incremental_read(sequence: str | None) -> dict[str, object]:
    """A read as Debezium 2.7.4 emits it for an incremental snapshot (seen on the local stack)."""
    event = envelope("r", lsn=1, after={"id": 1})
    event["source"].update(snapshot="incremental", lsn=None, txId=None, sequence=sequence)
    return event


def test_parse_value_incremental_snapshot_read_orders_by_sequence() -> None:
    outcome = parse_value(_incremental_read('["26414048","26414050"]'), SPEC)
    assert outcome.change is not None
    assert (outcome.change.op, outcome.change.commit_lsn, outcome.change.lsn) == (
        "r",
        26414048,
        26414050,
    )


def test_parse_value_incremental_snapshot_read_without_sequence_is_bad() -> None:
    outcome = parse_value(_incremental_read('[null,"26414048"]'), SPEC)
    assert outcome.kind == "bad" and "cannot be ordered" in (outcome.reason or "")


def test_parse_value_lsn_beyond_int64_is_bad() -> None:
    event = envelope("c", lsn=1, after={"id": 1})
    event["source"]["lsn"] = -9223372036854776000
    outcome = parse_value(event, SPEC)
    assert outcome.kind == "bad" and "outside the range" in (outcome.reason or "")


def test_parse_value_toast_placeholder_is_flagged_and_nulled() -> None:
    after = {"id": 1, "bio": "__debezium_unavailable_value", "name": "n"}
    outcome = parse_value(envelope("u", lsn=5, after=after), SPEC)
    assert outcome.change is not None
    assert outcome.change.toast_columns == ("bio",)
    assert outcome.change.row == {"id": 1, "bio": None, "name": "n"}


def test_parse_value_toast_placeholder_bytes_form_is_flagged() -> None:
    after = {"id": 1, "blob": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="}
    outcome = parse_value(envelope("u", lsn=5, after=after), SPEC)
    assert outcome.change is not None and outcome.change.toast_columns == ("blob",)


def test_parse_value_excluded_column_is_dropped() -> None:
    spec = TableSpec(primary_key=("id",), exclude_columns=frozenset({"secret"}))
    outcome = parse_value(envelope("c", lsn=5, after={"id": 1, "secret": "x"}), spec)
    assert outcome.change is not None and outcome.change.row == {"id": 1}


def test_parse_value_flattened_delete_uses_deleted_flag() -> None:
    record = {"id": 3, "name": None, "__op": "d", "__lsn": 77, "__deleted": "true"}
    outcome = parse_value(record, SPEC)
    assert outcome.change is not None
    assert (outcome.change.op, outcome.change.lsn, outcome.change.row) == (
        "d",
        77,
        {"id": 3, "name": None},
    )


def test_parse_value_flattened_without_lsn_is_bad() -> None:
    outcome = parse_value({"id": 3, "__op": "c", "__deleted": "false"}, SPEC)
    assert outcome.kind == "bad" and "__lsn" in (outcome.reason or "")


def test_parse_value_schema_wrapper_with_null_payload_is_tombstone() -> None:
    outcome = parse_value({"schema": None, "payload": None}, SPEC)
    assert outcome.kind == "skip"


@pytest.mark.parametrize(
    ("value", "schema_field", "expected"),
    [
        (
            decimal_b64("12.50", 2),
            field(
                "v",
                "bytes",
                "org.apache.kafka.connect.data.Decimal",
                scale="2",
                **{"connect.decimal.precision": "10"},
            ),
            ("12.50", "decimal(10,2)"),
        ),
        (
            decimal_b64("-0.07", 2),
            field(
                "v",
                "bytes",
                "org.apache.kafka.connect.data.Decimal",
                scale="2",
                **{"connect.decimal.precision": "5"},
            ),
            ("-0.07", "decimal(5,2)"),
        ),
        (
            {"scale": 3, "value": decimal_b64("1.234", 3)},
            field("v", "struct", "io.debezium.data.VariableScaleDecimal"),
            ("1.234000000000000000", "decimal(38,18)"),
        ),
        (19000, field("v", "int32", "io.debezium.time.Date"), (19000, "date")),
        (
            1_700_000_000_123,
            field("v", "int64", "io.debezium.time.Timestamp"),
            (1_700_000_000_123_000, "timestamp"),
        ),
        (
            1_700_000_000_123_456,
            field("v", "int64", "io.debezium.time.MicroTimestamp"),
            (1_700_000_000_123_456, "timestamp"),
        ),
        (
            1_700_000_000_123_456_789,
            field("v", "int64", "io.debezium.time.NanoTimestamp"),
            (1_700_000_000_123_456, "timestamp"),
        ),
        (
            "2024-01-01T10:00:00.123456Z",
            field("v", "string", "io.debezium.time.ZonedTimestamp"),
            (1_704_103_200_123_456, "timestamp"),
        ),
        (
            "2024-01-01T12:00:00+02:00",
            field("v", "string", "io.debezium.time.ZonedTimestamp"),
            (1_704_103_200_000_000, "timestamp"),
        ),
        (
            64_834_000_000,
            field("v", "int64", "io.debezium.time.MicroTime"),
            ("18:00:34.000000", "string"),
        ),
        (64_838_000, field("v", "int32", "io.debezium.time.Time"), ("18:00:38.000000", "string")),
        ('{"a": 1}', field("v", "string", "io.debezium.data.Json"), ('{"a": 1}', "string")),
        ("b1e8", field("v", "string", "io.debezium.data.Uuid"), ("b1e8", "string")),
        ([1, 2], field("v", "array"), ("[1,2]", "string")),
        (7, field("v", "int16"), (7, "smallint")),
        (7, field("v", "int64"), (7, "bigint")),
        (1.5, field("v", "float"), (1.5, "float")),
        (True, field("v", "boolean"), (True, "boolean")),
        ("AQI=", field("v", "bytes"), ("AQI=", "binary")),
    ],
)
def test_schema_decoder_logical_type_decodes_to_canonical_value(
    value: object, schema_field: dict[str, object], expected: tuple[object, str]
) -> None:
    assert decode(value, schema_field) == expected


def test_schema_decoder_decimal_beyond_precision_is_bad() -> None:
    schema_field = field(
        "v",
        "bytes",
        "org.apache.kafka.connect.data.Decimal",
        scale="0",
        **{"connect.decimal.precision": "2"},
    )
    event = with_schema(
        envelope("c", lsn=10, after={"id": 1, "v": decimal_b64("123", 0)}),
        [field("id", "int32"), {**schema_field, "field": "v"}],
    )
    outcome = parse_value(event, SPEC)
    assert outcome.kind == "bad"
    assert outcome.reason is not None and "column 'v'" in outcome.reason
    assert "does not fit decimal(2,0)" in outcome.reason


def test_schema_decoder_variable_scale_too_large_suggests_string() -> None:
    value = {"scale": 25, "value": decimal_b64("1.0000000000000000000000001", 25)}
    event = with_schema(
        envelope("c", lsn=10, after={"id": 1, "v": value}),
        [field("id", "int32"), field("v", "struct", "io.debezium.data.VariableScaleDecimal")],
    )
    outcome = parse_value(event, SPEC)
    assert outcome.kind == "bad" and "more than 18 fractional digits" in (outcome.reason or "")
    assert "column_types" in (outcome.reason or "")


def test_schema_decoder_variable_scale_configured_string_keeps_exact_text() -> None:
    spec = TableSpec(primary_key=("id",), column_types={"v": "string"})
    event = with_schema(
        envelope("c", lsn=10, after={"id": 1, "v": {"scale": 25, "value": decimal_b64("1", 25)}}),
        [field("id", "int32"), field("v", "struct", "io.debezium.data.VariableScaleDecimal")],
    )
    outcome = parse_value(event, spec)
    assert outcome.change is not None and outcome.change.row is not None
    assert outcome.change.row["v"] == "1.0000000000000000000000000"


def test_schema_decoder_wrong_value_type_is_bad_naming_column() -> None:
    event = with_schema(
        envelope("c", lsn=10, after={"id": 1, "v": "seven"}),
        [field("id", "int32"), field("v", "int32")],
    )
    outcome = parse_value(event, SPEC)
    assert outcome.kind == "bad"
    assert outcome.reason == "column 'v': expected an integer, got 'seven'"


@pytest.mark.parametrize(
    ("value", "spark_type", "expected"),
    [
        (19000, "date", 19000),
        ("2022-01-08", "date", 19000),
        (1_700_000_000_123, "timestamp", 1_700_000_000_123_000),  # ms
        (1_700_000_000_123_456, "timestamp", 1_700_000_000_123_456),  # µs
        ("2024-01-01T10:00:00Z", "timestamp", 1_704_103_200_000_000),
        ("12.5", "decimal(5,2)", "12.50"),
        (decimal_b64("12.50", 2), "decimal(5,2)", "12.50"),
        (3, "bigint", 3),
    ],
)
def test_configured_types_decode_schemaless_values(
    value: object, spark_type: str, expected: object
) -> None:
    spec = TableSpec(primary_key=("id",), column_types={"v": spark_type})
    outcome = parse_value(envelope("c", lsn=1, after={"id": 1, "v": value}), spec)
    assert outcome.change is not None and outcome.change.row is not None
    assert outcome.change.row["v"] == expected
    assert dict(outcome.change.columns)["v"] == spark_type


def test_inferred_types_without_schema_or_config() -> None:
    after = {"id": 1, "f": 1.5, "b": True, "s": "x", "n": None, "o": {"k": 1}}
    outcome = parse_value(envelope("c", lsn=1, after=after), SPEC)
    assert outcome.change is not None
    assert dict(outcome.change.columns) == {
        "id": "bigint",
        "f": "double",
        "b": "boolean",
        "s": "string",
        "n": "void",
        "o": "string",
    }
    assert outcome.change.row is not None and outcome.change.row["o"] == json.dumps(
        {"k": 1}, separators=(",", ":")
    )


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "42",
        '"x"',
        '{"payload": 5, "schema": {}}',
        '{"op": "c", "source": "x"}',
        '{"op": "u", "source": {"lsn": 1}, "after": [1]}',
        '{"after": {"id": 1}}',
    ],
)
def test_parse_line_malformed_events_are_bad_not_raised(text: str) -> None:
    outcome = parse_line(text, SPEC)
    assert outcome.kind == "bad" and outcome.reason


def test_parse_line_key_order_does_not_matter() -> None:
    event = envelope("c", lsn=3, after={"id": 1})
    reordered = dict(reversed(list(event.items())))
    assert parse_line(line(reordered), SPEC) == parse_line(line(event), SPEC)


def compact(event: dict[str, object]) -> str:
    """A line as Kafka Connect's JSON converter writes it: no spaces after separators."""
    return json.dumps(event, separators=(",", ":"))


def typed_line(id_type: str, lsn: int, value: int = 1) -> str:
    return compact(
        with_schema(
            envelope("c", lsn=lsn, after={"id": 1, "v": value}),
            [field("id", "int32"), field("v", id_type)],
        )
    )


def test_parse_line_repeated_schema_same_outcome_as_full_parse() -> None:
    lines = [typed_line("int64", lsn) for lsn in (10, 11, 12)]
    got = [parse_line(text, SPEC) for text in lines]
    assert got == [parse_value(json.loads(text), SPEC) for text in lines]
    assert [o.change.lsn for o in got if o.change] == [10, 11, 12]


def test_parse_line_known_schema_with_trailing_garbage_is_bad() -> None:
    first = typed_line("int64", 10)
    assert parse_line(first, SPEC).kind == "event"
    outcome = parse_line(typed_line("int64", 11) + "}", SPEC)
    assert outcome.kind == "bad"
    assert outcome.reason is not None and outcome.reason.startswith("not valid JSON")


def test_parse_line_known_schema_truncated_line_is_bad() -> None:
    first = typed_line("int64", 10)
    assert parse_line(first, SPEC).kind == "event"
    head = first[: first.index(',"payload":') + len(',"payload":')]
    outcome = parse_line(head + "12", SPEC)
    assert outcome.kind == "bad"
    assert outcome.reason is not None and outcome.reason.startswith("not valid JSON")


def test_parse_line_schema_change_with_same_head_takes_new_type() -> None:
    narrow, wide = typed_line("int32", 10), typed_line("int64", 11)
    assert [dict(parse_line(t, SPEC).change.columns)["v"] for t in (narrow, wide)] == [  # type: ignore[union-attr]
        "int",
        "bigint",
    ]
    # The older schema again, written another way, must not reuse the newer plan.
    spaced = json.dumps(json.loads(narrow))
    assert dict(parse_line(spaced, SPEC).change.columns)["v"] == "int"  # type: ignore[union-attr]


def test_parse_line_schema_with_payload_key_inside_parses_every_line() -> None:
    def odd_line(lsn: int) -> str:
        event = with_schema(
            envelope("c", lsn=lsn, after={"id": 1, "v": 5}),
            [field("id", "int32"), field("v", "int64")],
        )
        event["schema"]["payload"] = {"doc": ',"payload":'}  # type: ignore[index]
        return compact(event)

    got = [parse_line(odd_line(lsn), SPEC) for lsn in (10, 11)]
    assert [(o.kind, o.change.row) for o in got if o.change] == [  # type: ignore[union-attr]
        ("event", {"id": 1, "v": 5}),
        ("event", {"id": 1, "v": 5}),
    ]


# --- the same outcome with and without orjson (Glue without --additional-python-modules) ------


def load_parser(name: str, *, without_orjson: bool) -> ModuleType:
    """A fresh copy of the parser module, imported with orjson importable or blocked."""
    spec = importlib.util.spec_from_file_location(name, debezium.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with mock.patch.dict(sys.modules, {"orjson": None} if without_orjson else {}):
        sys.modules[name] = module  # dataclasses look their module up while it runs
        spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def backends() -> dict[str, ModuleType]:
    found = {
        "orjson": load_parser("_parser_with_orjson", without_orjson=False),
        "stdlib": load_parser("_parser_without_orjson", without_orjson=True),
    }
    # Not vacuous: the two copies really read JSON differently.
    assert (found["orjson"]._orjson, found["stdlib"]._orjson) == (orjson, None)
    return found


DOUBLE_FIELDS = [field("id", "int64"), field("v", "double")]


def raw_line(v: str, fields: list[dict[str, Any]] | None = DOUBLE_FIELDS) -> str:
    """A compact line whose ``after.v`` is the JSON text ``v`` (schema-included unless None)."""
    event = envelope("c", lsn=10, after={"id": 1, "v": "@V@"})
    value = event if fields is None else with_schema(event, fields)
    return compact_line(value).replace('"@V@"', v)


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


PARITY_LINES = {
    "NaN double": raw_line('"NaN"'),
    "Infinity double": raw_line('"Infinity"'),
    "-Infinity double": raw_line('"-Infinity"'),
    "NaN float32": raw_line('"NaN"', [field("id", "int64"), field("v", "float")]),
    "bare NaN": raw_line("NaN"),
    "bare Infinity": raw_line("Infinity"),
    "bare -Infinity": raw_line("-Infinity"),
    "bare NaN schemaless": raw_line("NaN", None),
    "double past the largest": raw_line("1e400"),
    "integer past 64 bits": raw_line(str(2**64), [field("id", "int64"), field("v", "int64")]),
    "integer below -2^63": raw_line(str(-(2**63) - 1), None),
    "largest unsigned 64-bit integer": raw_line(str(2**64 - 1), None),
    "smallest signed 64-bit integer": raw_line(str(-(2**63)), None),
    "integer past 64 bits in the key": raw_line("1").replace('"id":1', f'"id":{2**70}'),
    "long digits inside a string": raw_line('"123456789012345678901234567890"', None),
    "large and small doubles": raw_line("[1e16,1e-5,1.5e-7,0.0001,-0.0,1e15]", None),
    "large double": raw_line("1e16"),
    "duplicate keys": raw_line("1").replace('{"id":1,', '{"id":1,"id":2,'),
    "lone surrogate": raw_line('"\\ud800x"'),
    "surrogate pair": raw_line('"\\ud83d\\ude00"'),
    "nested at the limit": raw_line(nested(debezium.MAX_DEPTH - 5), None),
    "nested past the limit": raw_line(nested(debezium.MAX_DEPTH + 1), None),
    "nested past orjson's limit": raw_line(nested(2000), None),
}


def outcome_of(module: ModuleType, text: str, column_types: dict[str, str]) -> Any:
    spec = module.TableSpec(primary_key=("id",), column_types=column_types)
    outcome = module.parse_line(text, spec)
    reason = outcome.reason or ""
    change = outcome.change
    return (
        outcome.kind,
        # Two JSON parsers word a syntax error differently; every other reason is ours.
        "not valid JSON" if reason.startswith("not valid JSON") else reason,
        None if change is None else dataclasses.asdict(change),
        None if change is None or change.row is None else module.dumps(change.row),
    )


@pytest.mark.parametrize("text", list(PARITY_LINES.values()), ids=list(PARITY_LINES))
def test_parse_line_same_outcome_with_and_without_orjson(
    backends: dict[str, ModuleType], text: str
) -> None:
    # Each line also with its column configured as text (decoded values written as JSON).
    for column_types in ({}, {"v": "string"}):
        # Twice each: the second schema-included line takes the schema-prefix path.
        outcomes = [
            outcome_of(backends[name], text, column_types)
            for name in ("orjson", "stdlib")
            for _ in range(2)
        ]
        assert outcomes == [outcomes[0]] * 4


@pytest.mark.parametrize(
    "name", ["bare NaN", "double past the largest", "integer past 64 bits", "lone surrogate"]
)
def test_parse_line_json_orjson_refuses_is_bad_without_orjson(
    backends: dict[str, ModuleType], name: str
) -> None:
    outcome = outcome_of(backends["stdlib"], PARITY_LINES[name], {})
    assert outcome[0] == "bad"


def test_parse_line_integer_past_64_bits_is_bad_not_rounded() -> None:
    outcome = parse_line(PARITY_LINES["integer past 64 bits in the key"], SPEC)
    assert (outcome.kind, outcome.reason) == (
        "bad",
        f"not valid JSON: integer {2**70} does not fit 64 bits",
    )


def test_parse_line_nested_past_limit_is_bad_with_reason() -> None:
    outcome = parse_line(PARITY_LINES["nested past orjson's limit"], SPEC)
    assert (outcome.kind, outcome.reason) == (
        "bad",
        f"not valid JSON: nested deeper than {debezium.MAX_DEPTH} levels",
    )


@pytest.mark.parametrize("special", ["NaN", "Infinity", "-Infinity"])
def test_parse_line_special_double_decodes_to_its_value(spark: Any, special: str) -> None:
    # As text in the row (JSON has no such numbers; orjson would write null), read by Spark's
    # JSON reader into the double column as the value itself.
    outcome = parse_line(raw_line(f'"{special}"'), SPEC)
    assert outcome.change is not None and outcome.change.row is not None
    assert outcome.change.row["v"] == special
    row_json = debezium.dumps(outcome.change.row)
    frame = spark.createDataFrame([(row_json,)], "j string")
    decoded = frame.selectExpr(f"from_json(j, '{raw_ddl(outcome.change.columns)}').v AS v")
    value = decoded.collect()[0]["v"]
    assert math.isnan(value) if special == "NaN" else value == float(special)


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=debezium.MIN_INTEGER, max_value=debezium.MAX_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",))),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(st.characters(exclude_categories=("Cs",))), children, max_size=4)
    ),
    max_leaves=20,
)


@given(_JSON_VALUES)
@example([1e-05, -2.5e-05, 1e16, 1.5e-07, 1e15, 0.0001, -0.0])  # where the notations differ
def test_dumps_without_orjson_writes_what_orjson_writes(value: Any) -> None:
    # Nested columns are stored as this text: it must not depend on the host.
    written = debezium._stdlib_dumps(value)
    assert written == orjson.dumps(value).decode()
    assert debezium._stdlib_loads(written) == orjson.loads(written)


def test_parse_line_nanosecond_timestamps_stay_on_orjson() -> None:
    # Debezium 2.6+ writes ts_ns (19 digits) in every event: such a line must not be sent to
    # the standard library's slower reading, and still parses as before.
    ts_ns = 1_764_000_000_123_456_789
    text = raw_line("2.5").replace('"ts_ms":', f'"ts_ns":{ts_ns},"ts_ms":', 1)
    assert debezium._LONG_DIGITS.search(text) is None
    assert parse_line(text, SPEC).kind == "event"
    assert debezium._LONG_DIGITS.search(raw_line(str(2**64))) is not None
    assert debezium._LONG_DIGITS.search(raw_line(str(-(2**63) - 1))) is not None
