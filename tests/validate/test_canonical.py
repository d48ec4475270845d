"""Canonical texts of ``cdclake validate``: one spelling per value, as PostgreSQL prints it.

The source side computes these in SQL (:func:`sql_canonical`, exercised against a real
server by the local-stack tests); here, the Python side that reads the lake.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from decimal import Decimal

import pytest

from cdclake.comparison import KINDS, canonical, jsonb_text, kind_of, row_hash, row_text


@pytest.mark.parametrize(
    ("pg_type", "category", "kind"),
    [
        ("smallint", "N", "int"),
        ("integer", "N", "int"),
        ("bigint", "N", "int"),
        ("numeric(10,2)", "N", "numeric"),
        ("numeric", "N", "numeric"),
        ("real", "N", "float"),
        ("double precision", "N", "float"),
        ("boolean", "B", "bool"),
        ("date", "D", "date"),
        ("timestamp without time zone", "D", "timestamp"),
        ("timestamp with time zone", "D", "timestamptz"),
        ("time without time zone", "D", "time"),
        ("uuid", "U", "uuid"),
        ("json", "U", "json"),
        ("jsonb", "U", "json"),
        ("bytea", "U", "bytes"),
        ("integer[]", "A", "json"),
        ("text[]", "", "json"),
        ("int2vector", "A", "json"),
        ("character varying(20)", "S", "text"),
        ("inet", "I", "text"),
    ],
)
def test_kind_of_postgres_type_gets_its_comparison_kind(
    pg_type: str, category: str, kind: str
) -> None:
    assert kind_of(pg_type, category) == kind


def test_kind_of_without_category_reads_the_type_alone() -> None:
    assert (kind_of("bigint"), kind_of("jsonb"), kind_of("point")) == ("int", "json", "text")


@pytest.mark.parametrize("kind", KINDS)
def test_canonical_null_stays_null_for_every_kind(kind: str) -> None:
    assert canonical(kind, None) is None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("12.50", "12.5"),
        ("12.500000000000000000", "12.5"),
        (Decimal("1.500"), "1.5"),
        ("0E-18", "0"),
        ("-0.00", "0"),
        ("100", "100"),
        ("1E+2", "100"),
        (10.0, "10"),
        ("-3.25", "-3.25"),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        ("not a number", "not a number"),
    ],
)
def test_canonical_numeric_is_trim_scale_text(value: object, text: str) -> None:
    assert canonical("numeric", value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.5, "3ff8000000000000"),
        ("1.5", "3ff8000000000000"),
        (-2.0, "c000000000000000"),
        (0.0, "0000000000000000"),
        (-0.0, "0000000000000000"),  # float8send(-0 + 0.0) is +0
        (float("nan"), "NaN"),
        (float("inf"), "7ff0000000000000"),
    ],
)
def test_canonical_float_is_the_doubles_bits_in_hex(value: object, text: str) -> None:
    assert canonical("float", value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (1, "true"),
        (0, "false"),
        ("t", "true"),
        ("TRUE", "true"),
        ("1", "true"),
        ("f", "false"),
        ("false", "false"),
        ("yes", "false"),
    ],
)
def test_canonical_bool_is_true_or_false(value: object, text: str) -> None:
    assert canonical("bool", value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (19000, "2022-01-08"),  # days since the epoch
        (0, "1970-01-01"),
        (dt.date(2024, 2, 29), "2024-02-29"),
        (dt.datetime(2024, 2, 29, 23, 59), "2024-02-29"),
        ("2024-02-29", "2024-02-29"),
        ("2024-02-29T10:00:00", "2024-02-29"),
    ],
)
def test_canonical_date_is_iso_day(value: object, text: str) -> None:
    assert canonical("date", value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1_700_000_000_123_456, "2023-11-14T22:13:20.123456"),  # epoch microseconds
        (1_700_000_000_123, "2023-11-14T22:13:20.123000"),  # epoch milliseconds
        (10**14, "1973-03-03T09:46:40.000000"),  # the smallest read as microseconds
        (10**14 - 1, "5138-11-16T09:46:39.999000"),  # the largest read as milliseconds
        (-(10**15), "1938-04-24T22:13:20.000000"),
        (1.7e12, "2023-11-14T22:13:20.000000"),
        ("2024-01-01T12:00:00Z", "2024-01-01T12:00:00.000000"),
        ("2024-01-01T12:00:00+02:00", "2024-01-01T10:00:00.000000"),
        ("2024-01-01 12:00:00.5", "2024-01-01T12:00:00.500000"),
        (
            dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
            "2024-01-01T17:00:00.000000",
        ),
        (dt.datetime(2024, 1, 1, 12, 0, 0, 7), "2024-01-01T12:00:00.000007"),
    ],
)
def test_canonical_timestamp_is_utc_with_microseconds(value: object, text: str) -> None:
    assert canonical("timestamp", value) == text
    assert canonical("timestamptz", value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (dt.time(1, 2, 3), "01:02:03.000000"),
        (dt.time(23, 59, 59, 999999), "23:59:59.999999"),
        ("01:02:03.5", "01:02:03.500000"),
        ("00:00:00", "00:00:00.000000"),
    ],
)
def test_canonical_time_is_time_of_day_with_microseconds(value: object, text: str) -> None:
    assert canonical("time", value) == text


def test_canonical_uuid_is_lower_case_with_hyphens() -> None:
    expected = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert canonical("uuid", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11") == expected
    assert canonical("uuid", "a0eebc999c0b4ef8bb6d6bb9bd380a11") == expected


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ('{"b": 1, "a": [1, 2.50]}', '{"a": [1, 2.50], "b": 1}'),
        (b'{"a":1e2}', '{"a": 100}'),
        ({"z": None, "a": True}, '{"a": true, "z": null}'),
        ([1, "x"], '[1, "x"]'),
        ("12345678901234567890", "12345678901234567890"),
    ],
)
def test_canonical_json_is_jsonb_output_of_text_bytes_or_values(value: object, text: str) -> None:
    assert canonical("json", value) == text


@pytest.mark.parametrize(
    "value", [b"\x00\xff", bytearray(b"\x00\xff"), memoryview(b"\x00\xff"), "AP8="]
)
def test_canonical_bytes_is_hex_of_bytes_or_base64(value: object) -> None:
    assert canonical("bytes", value) == "00ff"


def test_canonical_int_and_text_are_plain_text() -> None:
    assert (canonical("int", "007"), canonical("int", 7.0)) == ("7", "7")
    assert (canonical("text", 5), canonical("text", ""), canonical("other", "x")) == ("5", "", "x")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (7, "7"),
        (Decimal("2.50"), "2.50"),
        (Decimal("1E+3"), "1000"),
        (Decimal("-0"), "0"),
        (Decimal("-0.00"), "0.00"),
        (-1.25, "-1.25"),
        (-0.0, "0.0"),
        ((1, "a"), '[1, "a"]'),
        ([], "[]"),
        ({}, "{}"),
    ],
)
def test_jsonb_text_scalars_and_containers_print_as_postgres_does(value: object, text: str) -> None:
    assert jsonb_text(value) == text


def test_jsonb_text_keys_sorted_by_byte_length_then_bytes() -> None:
    value = {"bb": 1, "é": 2, "a": 3, "ba": 4, "ccc": 5}
    assert jsonb_text(value) == '{"a": 3, "ba": 4, "bb": 1, "é": 2, "ccc": 5}'


def test_jsonb_text_strings_escape_quotes_backslashes_and_control_characters() -> None:
    text = 'q"b\\\b\f\n\r\t\x01\x1f é'
    assert jsonb_text(text) == '"q\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f é"'
    assert jsonb_text({"k\n": "v"}) == '{"k\\n": "v"}'


def test_jsonb_text_non_json_value_is_rejected_naming_its_type() -> None:
    with pytest.raises(TypeError, match=r"^not a JSON value: set$"):
        jsonb_text({1, 2})


def test_row_text_length_prefixes_values_and_marks_null() -> None:
    assert row_text(["a", None, "", "x|y"]) == "1:a|N|0:|3:x|y"
    assert row_text([]) == ""


def test_row_hash_is_md5_of_row_text_and_tells_null_from_empty() -> None:
    assert row_hash(["a", None]) == hashlib.md5(b"1:a|N").hexdigest()
    assert row_hash([None]) != row_hash([""])


def test_canonical_timestamp_does_not_depend_on_the_machine_time_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    aware = dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC)
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert canonical("timestamptz", aware) == "2024-01-01T12:00:00.000000"
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    ("pg_type", "kind"),
    [
        ("timestamp(3) without time zone", "timestamp"),
        ("timestamp(6) with time zone", "timestamptz"),
        ("time(0) without time zone", "time"),
        ("numeric(10,2)", "numeric"),
        ("numeric(10, 2)[]", "json"),
        ("character varying(20)", "text"),
    ],
)
def test_kind_of_type_with_precision_keeps_its_kind(pg_type: str, kind: str) -> None:
    assert kind_of(pg_type) == kind
