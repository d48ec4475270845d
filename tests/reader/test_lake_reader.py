"""hudi-rs reads the tables the merge writes and returns the rows Spark (``cdclake export``)
returns."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cdclake.lake_reader import (
    METADATA_COLUMNS,
    LakeReadError,
    read_lake,
    read_live_rows,
    rows_from_batches,
)
from tests.reader.lakes import Lake, build_lake, build_lake_and_moved_copy

SEED = 7

# --- formatting (no Spark, no Hudi) -------------------------------------------------------------


def test_metadata_columns_match_the_merge() -> None:
    from cdclake_merge.transforms import METADATA_COLUMNS as MERGE_METADATA

    assert METADATA_COLUMNS == MERGE_METADATA


def _batch(**columns: pa.Array) -> pa.RecordBatch:
    meta = {
        "_cdc_order": pa.array(["2", "1"]),
        "_cdc_lsn": pa.array([2, 1], pa.int64()),
        "_cdc_op": pa.array(["u", "c"]),
        "_cdc_source_ts": pa.array([0, -1], pa.timestamp("us", tz="UTC")),
        "_hoodie_is_deleted": pa.array([False, False]),
    }
    return pa.RecordBatch.from_pydict({**columns, **meta})


def test_rows_from_batches_export_form_sorted_by_key() -> None:
    batch = _batch(
        id=pa.array([2, 1], pa.int32()),
        amount=pa.array([Decimal("12.50"), Decimal("0.00")], pa.decimal128(12, 2)),
        day=pa.array([dt.date(1969, 12, 31), None], pa.date32()),
        at=pa.array([-1, 1_700_000_000_000_000], pa.timestamp("us", tz="UTC")),
        raw=pa.array([b"\x00\xff", b""], pa.binary()),
        ok=pa.array([True, None]),
    )
    columns = [
        ("id", "int"),
        ("amount", "decimal(12,2)"),
        ("day", "date"),
        ("at", "timestamp"),
        ("raw", "binary"),
        ("ok", "boolean"),
    ]
    rows = rows_from_batches([batch], ("id",), columns)
    assert rows == [
        {"id": 1, "amount": "0.00", "day": None, "at": "2023-11-14T22:13:20.000000",
         "raw": "", "ok": None, "_cdc_order": "1", "_cdc_lsn": 1, "_cdc_op": "c",
         "_cdc_source_ts": "1969-12-31T23:59:59.999999"},
        {"id": 2, "amount": "12.50", "day": "1969-12-31", "at": "1969-12-31T23:59:59.999999",
         "raw": "AP8=", "ok": True, "_cdc_order": "2", "_cdc_lsn": 2, "_cdc_op": "u",
         "_cdc_source_ts": "1970-01-01T00:00:00.000000"},
    ]  # fmt: skip


def test_rows_from_batches_deleted_flag_drops_row() -> None:
    batch = _batch(id=pa.array([1, 2], pa.int32())).to_pydict()
    batch["_hoodie_is_deleted"] = [True, False]
    rows = rows_from_batches([pa.RecordBatch.from_pydict(batch)], ("id",), [("id", "int")])
    assert [r["id"] for r in rows] == [2]


def test_rows_from_batches_missing_column_raises() -> None:
    batch = _batch(id=pa.array([1, 2], pa.int32()))
    with pytest.raises(ValueError, match="no column 'gone'"):
        rows_from_batches([batch], ("id",), [("id", "int"), ("gone", "string")])


def test_rows_from_batches_decimal_zero_is_plain() -> None:
    batch = _batch(
        id=pa.array([1, 2], pa.int32()),
        d=pa.array([Decimal("0E-8"), Decimal("-1E-8")], pa.decimal128(20, 8)),
    )
    rows = rows_from_batches([batch], ("id",), [("id", "int"), ("d", "decimal(20,8)")])
    assert [r["d"] for r in rows] == ["0.00000000", "-0.00000001"]


def test_read_live_rows_not_a_table_raises_one_line(tmp_path: Path) -> None:
    with pytest.raises(LakeReadError, match=r"hudi-rs cannot read .*: ") as info:
        read_live_rows(str(tmp_path), ("id",), [("id", "int")])
    assert "\n" not in str(info.value)


# --- tables written by the real merge ------------------------------------------------------------


def _lake(spark: Any, tmp: pytest.TempPathFactory, name: str, **kwargs: Any) -> Lake:
    return build_lake(spark, tmp.mktemp(name), name=name, seed=SEED, **kwargs)


@pytest.fixture(scope="session")
def mor_lake(spark, tmp_path_factory: pytest.TempPathFactory) -> Lake:  # type: ignore[no-untyped-def]
    # 4 delta commits: inline compaction (every 5) has not run, so log files remain.
    return _lake(
        spark, tmp_path_factory, "mor", table_type="MERGE_ON_READ",
        generated_runs=2, update_runs=2,
    )  # fmt: skip


@pytest.fixture(scope="session")
def cow_lake(spark, tmp_path_factory: pytest.TempPathFactory) -> Lake:  # type: ignore[no-untyped-def]
    return _lake(
        spark, tmp_path_factory, "cow", table_type="COPY_ON_WRITE",
        generated_runs=3, update_runs=1,
    )  # fmt: skip


@pytest.fixture(scope="session")
def partitioned_lakes(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Lake, Lake]:  # type: ignore[no-untyped-def]
    # The moved lake is the partitioned one copied after its first update run and merged once
    # with rows moving: 4 delta commits each, so inline compaction (every 5) has not run.
    return build_lake_and_moved_copy(
        spark, tmp_path_factory.mktemp("part"), name="part", seed=SEED,
        table_type="MERGE_ON_READ", partition_fields=("active",), generated_runs=2,
        update_runs=2, moved_after=1, moving_runs=1,
    )  # fmt: skip


@pytest.fixture(scope="session")
def partitioned_lake(partitioned_lakes: tuple[Lake, Lake]) -> Lake:
    return partitioned_lakes[0]


@pytest.fixture(scope="session")
def moved_lake(partitioned_lakes: tuple[Lake, Lake]) -> Lake:
    return partitioned_lakes[1]


def _assert_same_rows(lake: Lake) -> None:
    assert lake.spark_rows, "the merge left no live rows to compare"
    rows = read_live_rows(lake.root, lake.key, lake.columns)
    assert len(rows) == len(lake.spark_rows)
    assert rows == lake.spark_rows


@pytest.mark.spark
@pytest.mark.hudi
def test_lake_merge_on_read_has_uncompacted_logs_with_deletes(mor_lake: Lake) -> None:
    assert mor_lake.files(".log.")
    assert not mor_lake.instants(".commit")  # no compaction yet
    assert all(r.committed for r in mor_lake.results)
    assert sum(r.deletes for r in mor_lake.results[2:]) > 0
    assert sum(r.upserts for r in mor_lake.results[2:]) > 0


@pytest.mark.spark
@pytest.mark.hudi
def test_read_live_rows_merge_on_read_with_logs_equals_spark(mor_lake: Lake) -> None:
    _assert_same_rows(mor_lake)


@pytest.mark.spark
@pytest.mark.hudi
def test_read_live_rows_copy_on_write_equals_spark(cow_lake: Lake) -> None:
    assert len(cow_lake.instants(".commit")) == len(cow_lake.results)
    _assert_same_rows(cow_lake)


@pytest.mark.spark
@pytest.mark.hudi
def test_read_live_rows_partitioned_merge_on_read_equals_spark(partitioned_lake: Lake) -> None:
    assert {p.parent.name for p in partitioned_lake.files(".log.")} >= {"active=true"}
    _assert_same_rows(partitioned_lake)


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.xfail(
    raises=LakeReadError,
    strict=True,
    reason=(
        "hudi-rs 0.5.0 decodes a log delete block with one Arrow type for orderingVal, taken "
        "from its first record, and fails with 'Delete block mixes ordering types (union "
        "branches 2 and 7)': a row moving partition makes Hudi 0.15 write a delete with the "
        "default ordering value 0 (OrderingIntWrapper, branch 2) into the same delete block "
        "as the merge's deletes ordered by _cdc_order (OrderingStringWrapper, branch 7)"
    ),
)
def test_read_live_rows_partition_move_in_log_equals_spark(moved_lake: Lake) -> None:
    _assert_same_rows(moved_lake)


def _no_spark() -> Any:
    raise AssertionError("hudi-rs reads this table: Spark must not start")


@pytest.mark.spark
@pytest.mark.hudi
def test_read_lake_copy_on_write_through_hudi_rs_equals_spark(cow_lake: Lake) -> None:
    lake = read_lake(cow_lake.warehouse, cow_lake.table, _no_spark)
    assert lake is not None
    assert lake.reader == "hudi-rs"
    assert lake.key == cow_lake.key
    assert lake.rows == cow_lake.spark_rows
    assert lake.version == sum(r.committed for r in cow_lake.results)


def test_read_lake_no_table_is_none(tmp_path: Path) -> None:
    assert read_lake(tmp_path, "reader.none", _no_spark) is None
