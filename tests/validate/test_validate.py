"""The comparison core of ``cdclake validate`` on plain rows: values, not spellings."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from cdclake.cli import app
from cdclake.comparison import canonical, compare_rows, jsonb_text

KINDS = {
    "id": "int",
    "amount": "numeric",
    "ratio": "float",
    "at": "timestamptz",
    "day": "date",
    "doc": "json",
    "ref": "uuid",
    "ok": "bool",
    "blob": "bytes",
    "note": "text",
}


def _source() -> list[dict[str, Any]]:
    return [
        {
            "id": 1,
            "amount": "12.50",
            "ratio": 0.1,
            "at": "2024-01-01T12:00:00+02:00",
            "day": "2024-02-29",
            "doc": '{"b": 1, "a": [1, 2.50]}',
            "ref": "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "ok": True,
            "blob": b"\x00\xff",
            "note": None,
        },
        {"id": 2, "amount": "0", "note": ""},
    ]


def _lake() -> list[dict[str, Any]]:
    return [
        {
            "id": 1,
            "amount": "12.500000000000000000",
            "ratio": 0.1,
            "at": "2024-01-01T10:00:00.000000",
            "day": "2024-02-29",
            "doc": '{"a":[1,2.50],"b":1}',
            "ref": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "ok": True,
            "blob": "AP8=",
            "note": None,
        },
        {"id": 2, "amount": "0E-18", "note": ""},
    ]


def test_compare_rows_same_values_other_spellings_equal() -> None:
    report = compare_rows("public.t", _source(), _lake(), ["id"], KINDS)
    assert report.equal, report.as_dict()
    assert (report.source_rows, report.lake_rows) == (2, 2)


def test_compare_rows_changed_value_names_key_and_column() -> None:
    lake = _lake()
    lake[0]["amount"] = "12.51"
    lake[1]["note"] = None  # NULL is not the empty string
    report = compare_rows("public.t", _source(), lake, ["id"], KINDS)
    assert not report.equal
    assert report.differing_keys == [("1",), ("2",)]
    assert set(report.columns) == {"amount", "note"}
    example = report.columns["amount"].examples[0]
    assert example == {"key": {"id": "1"}, "source": "12.5", "lake": "12.51"}
    assert report.as_dict()["columns"]["note"]["examples"][0]["lake"] is None


def test_compare_rows_missing_and_extra_keys_counted() -> None:
    lake = [_lake()[0], {"id": 3, "amount": "1"}]
    report = compare_rows("public.t", _source(), lake, ["id"], KINDS)
    assert report.missing_keys == [("2",)] and report.extra_keys == [("3",)]
    assert not report.equal and not report.differing_keys


def test_canonical_json_is_postgres_jsonb_output() -> None:
    assert jsonb_text({"bb": 1, "a": None, "é": [True, "x\ny"]}) == (
        '{"a": null, "bb": 1, "é": [true, "x\\ny"]}'
    )
    assert canonical("json", '{"n": 1e3, "z": -0}') == '{"n": 1000, "z": 0}'


def test_canonical_float_compares_bits_not_spelling() -> None:
    assert canonical("float", 1e20) == canonical("float", "100000000000000000000")
    assert canonical("float", -0.0) == canonical("float", 0.0)
    assert canonical("float", 0.1) != canonical("float", 0.1000001)


def test_validate_unknown_table_exits_2() -> None:
    result = CliRunner().invoke(app, ["validate", "--env", "local", "--table", "public.nope"])
    assert result.exit_code == 2
    assert "not a lake table of local" in result.output


def test_compare_rows_key_twice_in_lake_is_a_difference() -> None:
    lake = [*_lake(), _lake()[1]]  # the same row twice: each copy equals the source's
    report = compare_rows("public.t", _source(), lake, ["id"], KINDS)
    assert not report.equal
    assert report.extra_keys == [("2",)]
    assert "1 keys appear twice in the lake" in report.notes
