"""How ``cdclake validate`` compares two sides: keys, hashes, column differences, the report."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from cdclake import comparison
from cdclake.comparison import Canonical, Key, RowsSide, compare, compare_rows

KINDS = {"id": "int", "name": "text", "n": "numeric"}


def rows(count: int, **values: Any) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"r{i}", "n": "1.0", **values} for i in range(1, count + 1)]


def test_compare_rows_counts_rows_of_both_sides() -> None:
    report = compare_rows("public.t", rows(3), rows(2), ["id"], KINDS)
    assert (report.source_rows, report.lake_rows) == (3, 2)
    assert report.missing_keys == [("3",)]
    assert (report.table, report.compared_columns, report.key_columns) == (
        "public.t",
        ["id", "name", "n"],
        ["id"],
    )


def test_compare_rows_column_examples_capped_while_count_stays_exact() -> None:
    report = compare_rows("public.t", rows(5), rows(5, name="other"), ["id"], KINDS)
    diff = report.columns["name"]
    assert (diff.column, diff.count) == ("name", 5)
    assert diff.examples == [
        {"key": {"id": str(i)}, "source": f"r{i}", "lake": "other"} for i in (1, 2, 3)
    ]
    assert set(report.columns) == {"name"}  # equal columns are not listed


def test_compare_rows_beyond_the_detail_limit_notes_it_and_counts_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(comparison, "MAX_DETAILED_KEYS", 2)
    report = compare_rows("public.t", rows(3), rows(3, n="2"), ["id"], KINDS)
    assert len(report.differing_keys) == 3
    assert report.columns["n"].count == 2
    assert report.notes == ["3 rows differ; columns counted over the first 2"]


def test_compare_rows_at_the_detail_limit_adds_no_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comparison, "MAX_DETAILED_KEYS", 3)
    report = compare_rows("public.t", rows(3), rows(3, n="2"), ["id"], KINDS)
    assert (report.columns["n"].count, report.notes) == (3, [])


def test_rows_side_absent_column_reads_as_null() -> None:
    source = [{"id": 1, "name": "a", "n": None}]
    lake = [{"id": 1, "name": "a"}]  # the column was added at the source after this change
    assert compare_rows("public.t", source, lake, ["id"], KINDS).equal


def test_rows_side_duplicate_key_is_recorded_and_the_last_row_kept() -> None:
    side = RowsSide([{"id": 1, "name": "a"}, {"id": "01", "name": "b"}], ["id"], KINDS)
    assert side.duplicates == [("1",)]
    assert side.rows([("1",), ("2",)]) == {("1",): {"id": "1", "name": "b", "n": None}}


def test_rows_side_composite_key_with_null_part_reads_as_empty() -> None:
    side = RowsSide([{"id": 1, "name": None}], ["id", "name"], KINDS)
    (key, _), *_ = side.key_hashes()
    assert key == ("1", "")


class Vanishing:
    """A side whose rows were deleted between the hash pass and the row fetch."""

    def __init__(self, hashes: dict[Key, str]) -> None:
        self.hashes = hashes

    def key_hashes(self) -> Iterator[tuple[Key, str]]:
        yield from self.hashes.items()

    def rows(self, keys: Sequence[Key]) -> dict[Key, dict[str, Canonical]]:
        return {}


def test_compare_row_gone_before_its_fetch_counts_as_null_values() -> None:
    lake = RowsSide(rows(1), ["id"], KINDS)
    report = compare("public.t", Vanishing({("1",): "0" * 32}), lake, ["id"], list(KINDS))
    assert report.differing_keys == [("1",)]
    assert report.columns["name"].examples == [{"key": {"id": "1"}, "source": None, "lake": "r1"}]
    report = compare("public.t", lake, Vanishing({("1",): "0" * 32}), ["id"], list(KINDS))
    assert report.columns["name"].examples == [{"key": {"id": "1"}, "source": "r1", "lake": None}]


def test_report_as_dict_names_every_finding() -> None:
    source = rows(2)
    lake = [{**source[0], "name": "x"}, {"id": 9, "name": "r9", "n": "1"}]
    report = compare_rows("public.t", source, lake, ["id"], KINDS)
    report.lake_version = 4
    report.attempts = 2
    assert report.as_dict() == {
        "table": "public.t",
        "equal": False,
        "source_rows": 2,
        "lake_rows": 2,
        "lake_version": 4,
        "missing_keys": 1,
        "extra_keys": 1,
        "differing_rows": 1,
        "missing_key_examples": [{"id": "2"}],
        "extra_key_examples": [{"id": "9"}],
        "columns": {
            "name": {
                "differences": 1,
                "examples": [{"key": {"id": "1"}, "source": "r1", "lake": "x"}],
            }
        },
        "compared_columns": ["id", "name", "n"],
        "key": ["id"],
        "attempts": 2,
        "notes": [],
    }


def test_report_as_dict_key_examples_capped_at_nine() -> None:
    report = compare_rows("public.t", rows(12), [], ["id"], KINDS)
    shown = report.as_dict()["missing_key_examples"]
    assert report.as_dict()["missing_keys"] == 12
    assert shown == [{"id": k} for (k,) in sorted((str(i),) for i in range(1, 13))[:9]]


def test_compare_rows_key_twice_in_the_lake_is_an_extra_key_beside_the_others() -> None:
    lake = [*rows(2), rows(2)[1], {"id": 7, "name": "r7", "n": "1"}]
    report = compare_rows("public.t", rows(2), lake, ["id"], KINDS)
    assert report.extra_keys == [("7",), ("2",)]
    assert report.notes == ["1 keys appear twice in the lake"]
    assert not report.equal
