"""The Hudi sink on real Hudi 0.15: schema changes, catalog sync, deletes and tombstones,
checkpoints, record keys, and each defect found in it. Its writer options and schema rules
without Spark: tests/merge/test_hudi_rules.py."""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cdclake_merge.hudi import CHECKPOINT_KEY, MAX_NAMED_KEYS, TOMBSTONED_AT, CatalogSyncError
from cdclake_merge.hudi_options import key_generator
from cdclake_merge.job import MergeError, MergeOptions, TooManyBadRecords
from cdclake_merge.sink import Changes, Staged, TableState
from tests.merge.support import Lake, decimal_b64, envelope, with_schema


def c(id_: int, lsn: int, **values: Any) -> dict[str, Any]:
    return envelope("c", lsn=lsn, after={"id": id_, "name": f"n{id_}", **values})


def d(id_: int, lsn: int) -> dict[str, Any]:
    return envelope("d", lsn=lsn, before={"id": id_})


def _typed(id_: int, lsn: int, value: Any, field: dict[str, Any]) -> dict[str, Any]:
    return with_schema(
        envelope("c", lsn=lsn, after={"id": id_, "v": value}),
        [{"field": "id", "type": "int32"}, {"field": "v", "optional": True, **field}],
    )


def _decimal(precision: int, scale: int) -> dict[str, Any]:
    return {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)},
    }


def _table_properties(spark: Any, table: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def _hudi_rows(lake: Lake) -> list[dict[str, Any]]:
    """The table as Hudi itself reads it, every column, no cdclake code in between."""
    root = lake.sink.root  # type: ignore[attr-defined]
    return [r.asDict() for r in lake.spark.read.format("hudi").load(root).collect()]


@pytest.fixture(params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def lake(spark, tmp_path: Path, request: pytest.FixtureRequest) -> Lake:  # type: ignore[no-untyped-def]
    return Lake(spark, tmp_path, table_type=request.param)


@pytest.fixture
def cow(spark, tmp_path: Path) -> Lake:  # type: ignore[no-untyped-def]
    return Lake(spark, tmp_path)


@pytest.fixture(scope="module", params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def two_runs(
    spark, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Lake:  # type: ignore[no-untyped-def]
    """A first load, then a run updating a stored row (1), inserting one with a column the
    table lacks (4) and deleting a stored row (5); row 2 is left as loaded. Several tests
    judge it and none writes to it."""
    lake = Lake(spark, tmp_path_factory.mktemp("two-runs"), table_type=request.param)
    lake.write("a.json", [c(1, 10), c(2, 11), c(3, 12), d(3, 13), c(5, 14)])
    lake.merge()
    lake.write("b.json", [c(1, 20, name="again"), c(4, 21, email="b@x"), d(5, 22)])
    lake.merge()
    return lake


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_added_column_is_stored_after_existing_columns(two_runs: Lake) -> None:
    stored = two_runs.spark.read.format("hudi").load(two_runs.sink.root).columns  # type: ignore[attr-defined]
    assert stored[-2:] == ["_hoodie_is_deleted", "email"]
    catalog = two_runs.spark.table(two_runs.table).columns
    assert catalog[-1] == "email" and "_cdc_order" in catalog
    assert two_runs.visible() == [
        {"id": 1, "name": "again", "email": None},
        {"id": 2, "name": "n2", "email": None},
        {"id": 4, "name": "n4", "email": "b@x"},
    ]


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.parametrize(
    ("first", "second", "value"),
    [
        (_decimal(10, 2), _decimal(12, 2), decimal_b64("1.50", 2)),
        ({"type": "int32"}, {"type": "double"}, 2.5),
    ],
    ids=["decimal-precision", "int-to-double"],
)
def test_hudi_unstorable_type_change_fails_naming_column_without_commit(
    cow: Lake, first: dict[str, Any], second: dict[str, Any], value: Any
) -> None:
    start = decimal_b64("1.25", 2) if first.get("name") else 1
    cow.write("a.json", [_typed(1, 10, start, first)])
    version = cow.merge().version
    cow.write("b.json", [_typed(2, 20, value, second)])
    with pytest.raises(MergeError, match=rf"table {cow.table}: column 'v' changed type from"):
        cow.merge()
    assert cow.sink.load().version == version


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_merge_on_read_registers_table_and_rt_without_ro_suffix(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lake = Lake(spark, tmp_path, table_type="MERGE_ON_READ")
    lake.write("a.json", [c(1, 10)])
    lake.merge()
    database, name = lake.table.split(".")
    tables = {t.name for t in spark.catalog.listTables(database)}
    assert tables == {name, f"{name}_rt"}
    assert [r["id"] for r in spark.table(lake.table).collect()] == [1]


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_partitioned_table_is_registered_with_its_partitions(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lake = Lake(spark, tmp_path, partition=("region",))
    lake.write("a.json", [c(1, 10, region="eu"), c(2, 11, region="us")])
    lake.merge()
    partitions = {r[0] for r in spark.sql(f"SHOW PARTITIONS {lake.table}").collect()}
    assert partitions == {"region=eu", "region=us"}
    assert {(r["id"], r["region"]) for r in spark.table(lake.table).collect()} == {
        (1, "eu"),
        (2, "us"),
    }


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_partition_value_change_moves_the_row(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lake = Lake(spark, tmp_path, partition=("region",))
    lake.write("a.json", [c(1, 10, region="eu")])
    lake.merge()
    lake.write("b.json", [envelope("u", lsn=20, after={"id": 1, "name": "m", "region": "us"})])
    lake.merge()
    assert [(r["id"], r["region"]) for r in _hudi_rows(lake)] == [(1, "us")]


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_catalog_syncs_only_when_schema_changes(cow: Lake) -> None:
    cow.write("a.json", [c(1, 10)])
    cow.merge()
    first = _table_properties(cow.spark, cow.table)["last_commit_time_sync"]
    cow.write("b.json", [c(2, 20)])
    cow.merge()
    assert _table_properties(cow.spark, cow.table)["last_commit_time_sync"] == first
    cow.write("c.json", [c(3, 30, email="e")])
    cow.merge()
    assert _table_properties(cow.spark, cow.table)["last_commit_time_sync"] > first


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_delete_in_later_run_removes_the_row_from_hudi(two_runs: Lake) -> None:
    rows = _hudi_rows(two_runs)
    assert sorted(r["id"] for r in rows) == [1, 2, 4]
    assert not any(r["_hoodie_is_deleted"] for r in rows)


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_truncate_in_later_run_removes_stored_rows_and_tombstones(lake: Lake) -> None:
    lake.write("a.json", [c(1, 10), c(2, 11), c(3, 12), d(3, 13)])
    lake.merge()
    assert lake.sink.load().tombstones
    lake.write("b.json", [envelope("t", lsn=30)])
    result = lake.merge()
    assert result.committed
    assert lake.rows() == []
    assert lake.sink.load().tombstones == ()
    lake.write("c.json", [c(2, 11), c(3, 12), c(4, 40)], partition=1)  # late and new
    lake.merge()
    assert [r["id"] for r in lake.visible()] == [4]


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_tombstones_stop_late_older_change_across_runs(cow: Lake) -> None:
    cow.write("a.json", [c(1, 10), d(1, 20)])
    cow.merge()
    cow.write("b.json", [envelope("u", lsn=15, after={"id": 1, "name": "late"})], partition=1)
    assert cow.merge().stale_skipped == 1
    assert cow.rows() == []


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_run_of_only_skipped_and_bad_lines_commits_its_checkpoint(cow: Lake) -> None:
    cow.options = MergeOptions(cow.table, ("id",), str(cow.changes), max_bad_fraction=1.0)
    cow.write("a.json", [c(1, 10)])
    cow.merge()
    cow.write("b.json", ["null", "{broken"])
    second = cow.merge()
    assert (second.committed, second.version, second.quarantined) == (True, 2, 1)
    third = cow.merge()
    assert (third.committed, third.files_applied) == (False, 0)
    quarantined = list(Path(cow.sink.quarantine_root).rglob("part-*.json"))
    assert len(quarantined) == 1


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_first_runs_without_any_row_are_remembered(cow: Lake) -> None:
    cow.write("a.json", ["null", ""])
    assert cow.merge().committed
    assert cow.merge().files_applied == 0
    cow.write("b.json", [c(1, 10)])
    result = cow.merge()
    assert (result.version, result.files_applied) == (2, 1)
    assert cow.visible() == [{"id": 1, "name": "n1"}]


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_version_survives_archived_commits(cow: Lake) -> None:
    for i in range(3):
        cow.write(f"{i}.json", [c(i, 10 + i)])
        cow.merge()
    timeline = Path(cow.sink.root) / ".hoodie"  # type: ignore[attr-defined]
    # What archival does to old instants: every file of each leaves the active timeline.
    for commit in sorted(timeline.glob("*.commit"))[:2]:
        instant = commit.name.split(".")[0]
        for path in [*timeline.glob(f"{instant}.*"), *timeline.glob(f".{instant}.*")]:
            path.rename(timeline / "archived" / path.name)
    assert cow.sink.load().version == 3
    cow.write("3.json", [c(3, 13)])
    assert cow.merge().version == 4


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_commit_names_checkpoint_file_instead_of_carrying_it(cow: Lake) -> None:
    cow.write("orders-file-with-a-name.json", [c(1, 10)])
    cow.merge()
    commit = sorted((Path(cow.sink.root) / ".hoodie").glob("*.commit"))[-1].read_text()  # type: ignore[attr-defined]
    assert json.loads(commit)["extraMetadata"][CHECKPOINT_KEY] == "checkpoints/v00000001.json"
    assert "orders-file-with-a-name" not in commit
    position = cow.sink.load().positions["topics/app.public.orders/partition=0"]
    assert [name for name, _, _ in position.recent] == ["orders-file-with-a-name.json"]


class RecordingSink:
    """The real sink, remembering the rows each run hands it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.handed = inner, []
        self.quarantine_root = inner.quarantine_root

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def stage(self, spark: Any, previous: TableState, changes: Changes) -> Staged:
        if changes.rows is not None:
            self.handed.extend(r.asDict() for r in changes.rows.collect())
        return self.inner.stage(spark, previous, changes)  # type: ignore[no-any-return]


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_fold_never_hands_hudi_a_stale_delete_or_upsert(cow: Lake) -> None:
    recording = RecordingSink(cow.sink)
    cow.sink = recording  # type: ignore[assignment]
    cow.write("a.json", [c(1, 50), c(2, 50), d(2, 60)])
    cow.merge()
    recording.handed.clear()
    late = [d(1, 40), envelope("u", lsn=45, after={"id": 2, "name": "stale"}), c(3, 70)]
    cow.write("b.json", late, partition=1)
    cow.merge()
    assert [(r["id"], r["_cdc_deleted"]) for r in recording.handed] == [(3, False)]
    cow.write("c.json", [envelope("u", lsn=80, after={"id": 1, "name": "new"})])
    cow.merge()
    assert sorted((r["id"], r["name"]) for r in _hudi_rows(cow)) == [(1, "new"), (3, "n3")]


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.parametrize(("bad", "commits"), [(1, True), (2, False)])
def test_hudi_bad_fraction_at_the_limit_commits_and_above_fails(
    cow: Lake, bad: int, commits: bool
) -> None:
    cow.options = MergeOptions(cow.table, ("id",), str(cow.changes), max_bad_fraction=0.01)
    good = [c(i, 10 + i) for i in range(100 - bad)]
    cow.write("a.json", [*good, *(["{bad"] * bad)])
    if commits:
        assert cow.merge().quarantined == 1
    else:
        with pytest.raises(TooManyBadRecords, match="2 of 100 lines"):
            cow.merge()
        assert cow.sink.load().version == 0


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_tombstone_inside_retention_stops_redelivered_older_change(cow: Lake) -> None:
    cow.options = MergeOptions(cow.table, ("id",), str(cow.changes), tombstone_retention_days=1)
    cow.write("a.json", [c(1, 10), d(1, 20)])
    cow.merge()
    cow.write("b.json", [c(2, 30)])
    cow.merge()  # a later commit inside the window keeps the tombstone
    cow.write("c.json", [c(1, 10)], partition=1)  # the connector redelivers the insert
    assert cow.merge().stale_skipped == 1
    assert [r["id"] for r in cow.visible()] == [2]
    assert len(cow.sink.load().tombstones) == 1


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_tombstone_past_retention_is_dropped_at_next_commit(cow: Lake) -> None:
    cow.options = MergeOptions(cow.table, ("id",), str(cow.changes), tombstone_retention_days=0)
    cow.write("a.json", [c(1, 10), d(1, 20)])
    cow.merge()
    [written] = cow.sink.load().tombstones
    assert cow.sink.load().tombstone_written[written]
    cow.write("b.json", [c(2, 30)])
    cow.merge()
    assert cow.sink.load().tombstones == ()


class LookupRecordingSink(RecordingSink):
    """The real sink, remembering the keys of the state each run reads."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.looked_up: list[int] = []

    def lookup_state(self, spark: Any, state: TableState, keys: Any, columns: Any) -> Any:
        frame = self.inner.lookup_state(spark, state, keys, columns)
        if frame is not None:
            self.looked_up = sorted(r["id"] for r in frame.select("id").collect())
        return frame


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_run_reads_state_of_its_own_keys_only(lake: Lake) -> None:
    recording = LookupRecordingSink(lake.sink)
    lake.sink = recording  # type: ignore[assignment]
    lake.write("a.json", [c(i, 10 + i) for i in range(50)] + [d(7, 70)])
    lake.merge()
    lake.write(
        "b.json", [envelope("u", lsn=100, after={"id": 3, "name": "x"}), c(7, 101), c(99, 102)]
    )
    lake.merge()
    assert recording.looked_up == [3, 7]  # a live row and a tombstone; 99 is new
    assert sorted(r["id"] for r in lake.visible()) == [*range(50), 99]


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_run_above_named_key_limit_fills_toast_and_skips_stale(cow: Lake) -> None:
    """Past ``MAX_NAMED_KEYS`` the state is semi-joined, not named: the normal case at volume."""
    count = MAX_NAMED_KEYS + 100
    recording = LookupRecordingSink(cow.sink)
    cow.sink = recording  # type: ignore[assignment]
    cow.write(
        "a.json", [c(i, 10_000 + i, bio=f"b{i}") for i in range(count)] + [d(count - 1, 20_000)]
    )
    cow.merge()
    toast = "__debezium_unavailable_value"
    run = [
        envelope("u", lsn=30_000 + i, after={"id": i, "name": "u", "bio": toast})
        for i in range(count - 2)
    ]
    run += [
        envelope("u", lsn=9_000, after={"id": count - 2, "name": "stale", "bio": "x"}),  # older
        c(count - 1, 10_000 + count - 1, bio="again"),  # redelivered insert of a deleted key
    ]
    cow.write("b.json", run, partition=1)
    assert len(run) > MAX_NAMED_KEYS
    assert cow.merge().stale_skipped == 2
    assert recording.looked_up == list(range(count))  # the run's keys: live rows, a tombstone
    rows = {r["id"]: (r["name"], r["bio"]) for r in cow.visible()}
    assert len(rows) == count - 1
    assert all(rows[i] == ("u", f"b{i}") for i in range(count - 2))
    assert rows[count - 2] == (f"n{count - 2}", f"b{count - 2}")


# --- record keys Glue 5.0 stores alike (its Hudi reverts HUDI-7001) -----------------------------


def _hoodie_properties(lake: Lake) -> dict[str, str]:
    text = (Path(lake.sink.root) / ".hoodie" / "hoodie.properties").read_text()  # type: ignore[attr-defined]
    return dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.parametrize(
    ("key", "row", "stored_key"),
    [
        (("id",), {"id": 1}, "1"),
        (("id", "line"), {"id": 1, "line": 2}, "id:1,line:2"),
    ],
    ids=["one-column-key", "two-column-key"],
)
def test_hudi_two_partition_columns_record_key_is_not_hudi_7001s_path(
    spark: Any, tmp_path: Path, key: tuple[str, ...], row: dict[str, Any], stored_key: str
) -> None:
    # ComplexKeyGenerator writes a one-column key as "1" in OSS 0.15 and as "id:1" on Glue 5.0:
    # a one-column key must not reach it. A key of several columns goes through its
    # several-column branch, which HUDI-7001 left as it was ("id:1,line:2" in both).
    lake = Lake(spark, tmp_path, key=key, partition=("region", "day"))
    lake.write("a.json", [envelope("c", lsn=10, after={**row, "region": "eu", "day": "d1"})])
    lake.merge()
    generator = _hoodie_properties(lake)["hoodie.table.keygenerator.class"]
    assert generator == key_generator(key, ("region", "day"))
    assert generator.endswith("ComplexKeyGenerator") == (len(key) > 1)
    stored = _hudi_rows(lake)
    assert [(r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in stored] == [
        (stored_key, "region=eu/day=d1")
    ]


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_one_column_key_two_partition_columns_updates_moves_and_registers(
    spark: Any, tmp_path: Path
) -> None:
    lake = Lake(spark, tmp_path, partition=("region", "day"))
    lake.write("a.json", [c(1, 10, region="eu", day="d1"), c(2, 11, region="us", day="d1")])
    lake.merge()
    lake.write(
        "b.json",
        [
            envelope("u", lsn=20, after={"id": 1, "name": "m", "region": "us", "day": "d2"}),
            d(2, 21),
        ],
    )
    lake.merge()
    assert [(r["id"], r["name"], r["region"], r["day"]) for r in _hudi_rows(lake)] == [
        (1, "m", "us", "d2")
    ]
    assert lake.visible() == [{"id": 1, "name": "m", "region": "us", "day": "d2"}]
    partitions = {r[0] for r in spark.sql(f"SHOW PARTITIONS {lake.table}").collect()}
    assert "region=us/day=d2" in partitions


def _tombstone_times(lake: Lake) -> dict[int, str]:
    """Key → ``_cdc_tombstoned_at`` of the table's only tombstone set."""
    [name] = lake.sink.load().tombstones
    path = str(Path(lake.sink.sidecar) / name)  # type: ignore[attr-defined]
    return {r["id"]: r[TOMBSTONED_AT] for r in lake.spark.read.parquet(path).collect()}


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_tombstone_retention_applies_per_row_when_sets_are_rewritten(cow: Lake) -> None:
    cow.write("a.json", [c(1, 10), d(1, 20)])
    cow.merge()
    time.sleep(2)
    # A truncate rewrites the sets as one; each row keeps the time it was tombstoned.
    cow.write("b.json", [envelope("t", lsn=15), c(2, 30), d(2, 40)], partition=1)
    cow.merge()
    times = _tombstone_times(cow)
    assert times[1] < times[2]
    # Retention whose cutoff falls between them: the older row goes, the younger stays.
    cutoff = dt.datetime.fromisoformat(times[1]) + dt.timedelta(seconds=1)
    retention = (dt.datetime.now(dt.UTC) - cutoff) / dt.timedelta(days=1)
    cow.options = replace(cow.options, tombstone_retention_days=retention)
    cow.write("c.json", [envelope("t", lsn=16), c(3, 50), d(3, 60)], partition=2)
    cow.merge()
    assert sorted(_tombstone_times(cow)) == [2, 3]


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_failed_catalog_sync_is_registered_by_the_next_run_without_changes(
    cow: Lake,
) -> None:
    database = cow.table.split(".")[0]
    # A table registered by hand under the same name, with a key the sync cannot convert.
    cow.spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    cow.spark.sql(f"CREATE TABLE {cow.table} (id array<string>) STORED AS PARQUET")
    cow.write("a.json", [c(1, 10)])
    with pytest.raises(CatalogSyncError, match="version 1 is committed"):
        cow.merge()
    assert cow.sink.load().catalog_unsynced
    cow.spark.sql(f"DROP TABLE {cow.table}")  # the operator's fix
    result = cow.merge()
    assert (result.committed, result.catalog_synced) == (False, True)
    assert [r["id"] for r in cow.spark.table(cow.table).collect()] == [1]
    assert not cow.sink.load().catalog_unsynced


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_run_without_changes_after_a_synced_commit_starts_no_spark(cow: Lake) -> None:
    from cdclake_merge.job import run_merge

    cow.write("a.json", [c(1, 10)])
    cow.merge()

    def no_spark() -> None:
        raise AssertionError("a run with nothing to do started Spark")

    result = run_merge(no_spark, cow.fs, cow.sink, cow.options)  # type: ignore[arg-type]
    assert (result.committed, result.catalog_synced) == (False, False)


def _operations(lake: Lake) -> list[str]:
    """The write operation of each completed commit, oldest first."""
    timeline = Path(lake.sink.timeline)  # type: ignore[attr-defined]
    instants = sorted(p for p in timeline.iterdir() if p.name.endswith((".commit", ".deltacommit")))
    return [json.loads(p.read_text())["operationType"] for p in instants]


@pytest.mark.spark
@pytest.mark.hudi
def test_hudi_first_load_is_bulk_inserted_and_later_runs_upsert(two_runs: Lake) -> None:
    assert _operations(two_runs) == ["BULK_INSERT", "UPSERT"]
    # The record index knows the bulk-inserted keys: key 1 is updated, not written twice.
    rows = sorted((r["id"], r["name"]) for r in _hudi_rows(two_runs))
    assert rows == [(1, "again"), (2, "n2"), (4, "n4")]


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.parametrize("two_runs", ["COPY_ON_WRITE"], indirect=True)
def test_hudi_base_files_of_bulk_insert_and_upsert_are_zstd_compressed(two_runs: Lake) -> None:
    root = Path(two_runs.sink.root)  # type: ignore[attr-defined]
    # Only files holding rows: a file group whose rows the upsert all deleted gets a base
    # file without a row group (how the bulk insert spread the keys decides whether one does).
    files = [
        p
        for p in root.rglob("*.parquet")
        if ".hoodie" not in p.parts and pq.ParquetFile(p).metadata.num_row_groups
    ]
    codecs = {pq.ParquetFile(p).metadata.row_group(0).column(0).compression for p in files}
    # A base file's name ends with the instant that wrote it: files of both commits.
    assert len({p.stem.rsplit("_", 1)[1] for p in files}) == 2
    assert codecs == {"ZSTD"}
