"""A lake table's life (table-life issue): daily savepoints kept for ``savepoint_days``,
time-based cleaning, a restore and the catch-up after it, pending compactions completed, the
merge's own files pruned, the record index sized for the rows the table will reach."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.hudi_options import hudi_options
from cdclake_merge.pending import TablePaths
from cdclake_merge.recovery import (
    HudiProcedures,
    RestoreError,
    expired_savepoints,
    instant_time,
    parse_restore_target,
    prune_sidecar,
    restore_point,
    savepoint_due,
    savepoints_in,
    sidecar_garbage,
)
from tests.merge.support import Lake, envelope

NOW = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)


def _instant(moment: dt.datetime) -> str:
    return moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"


def _days_ago(days: float) -> str:
    return _instant(NOW - dt.timedelta(days=days))


def c(id_: int, lsn: int, name: str = "") -> dict[str, Any]:
    return envelope("c", lsn=lsn, after={"id": id_, "name": name or f"n{id_}"})


def u(id_: int, lsn: int, name: str) -> dict[str, Any]:
    return envelope("u", lsn=lsn, after={"id": id_, "name": name})


# --- the rules (no Spark) ----------------------------------------------------------------------


def test_instant_time_reads_hudi_milliseconds_as_utc() -> None:
    assert instant_time("20261128040935895") == dt.datetime(
        2026, 11, 28, 4, 9, 35, 895000, tzinfo=dt.UTC
    )


def test_instant_time_not_an_instant_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Hudi instant"):
        instant_time("latest")


def test_savepoints_in_keeps_completed_savepoints_only_oldest_first() -> None:
    files = [
        "20261128040935895.savepoint",
        "20261127040935895.savepoint",
        "20261128050000000.savepoint.inflight",
        "20261128040935895.deltacommit",
        "hoodie.properties",
    ]
    assert savepoints_in(files) == ["20261127040935895", "20261128040935895"]


def test_savepoint_due_none_yet_is_due() -> None:
    assert savepoint_due([], _days_ago(0), NOW)


def test_savepoint_due_newest_under_a_day_old_is_not_due() -> None:
    assert not savepoint_due([_days_ago(0.9)], _days_ago(0), NOW)


def test_savepoint_due_newest_a_day_old_is_due() -> None:
    assert savepoint_due([_days_ago(3), _days_ago(1)], _days_ago(0), NOW)


def test_savepoint_due_newest_commit_already_savepointed_is_not_due() -> None:
    # A quiet table: its one commit is a day old and already the newest savepoint.
    assert not savepoint_due([_days_ago(2)], _days_ago(2), NOW)


def test_expired_savepoints_past_keep_days_go_oldest_first() -> None:
    kept = [_days_ago(9), _days_ago(8), _days_ago(6), _days_ago(0)]
    assert expired_savepoints(kept, NOW, keep_days=7) == kept[:2]


def test_expired_savepoints_newest_is_kept_however_old() -> None:
    assert expired_savepoints([_days_ago(30), _days_ago(20)], NOW, keep_days=7) == [_days_ago(30)]


def test_restore_point_latest_is_the_newest_savepoint() -> None:
    assert restore_point("db.t", [_days_ago(2), _days_ago(1)], None) == _days_ago(1)


def test_restore_point_a_time_takes_the_newest_at_or_before_it() -> None:
    kept = [_days_ago(3), _days_ago(2), _days_ago(1)]
    assert restore_point("db.t", kept, NOW - dt.timedelta(days=1.5)) == _days_ago(2)


def test_restore_point_before_the_oldest_names_the_oldest() -> None:
    with pytest.raises(RestoreError, match=r"db\.t has no savepoint at or before .* oldest is"):
        restore_point("db.t", [_days_ago(2)], NOW - dt.timedelta(days=5))


def test_restore_point_no_savepoint_names_the_table() -> None:
    with pytest.raises(RestoreError, match=r"table db\.t has no savepoint"):
        restore_point("db.t", [], None)


def test_parse_restore_target_a_date_means_its_end_in_utc() -> None:
    assert parse_restore_target("2026-11-27") == dt.datetime(
        2026, 11, 27, 23, 59, 59, 999999, tzinfo=dt.UTC
    )


def test_parse_restore_target_a_time_without_zone_is_utc() -> None:
    assert parse_restore_target("2026-11-27T18:00:00") == dt.datetime(
        2026, 11, 27, 18, tzinfo=dt.UTC
    )


def test_parse_restore_target_latest_is_none() -> None:
    assert parse_restore_target("latest") is None


def test_parse_restore_target_other_text_names_the_forms() -> None:
    with pytest.raises(ValueError, match="expected latest, a date"):
        parse_restore_target("yesterday")


def test_hudi_options_clean_by_hours_retained() -> None:
    options = hudi_options(database="d", table="t", record_key=["id"], retain_hours=36)
    assert options["hoodie.clean.policy"] == "KEEP_LATEST_BY_HOURS"
    assert options["hoodie.cleaner.hours.retained"] == "36"


def test_hudi_options_clean_after_the_given_commits_else_each() -> None:
    every_fourth = hudi_options(database="d", table="t", record_key=["id"], clean_every_commits=4)
    by_default = hudi_options(database="d", table="t", record_key=["id"])
    assert every_fourth["hoodie.clean.max.commits"] == "4"
    assert by_default["hoodie.clean.max.commits"] == "1"


def test_hudi_options_record_index_sized_from_the_given_file_groups() -> None:
    options = hudi_options(database="d", table="t", record_key=["id"], record_index_file_groups=89)
    assert options["hoodie.metadata.record.index.min.filegroup.count"] == "89"


def test_hudi_options_merge_on_read_compaction_bounded_by_the_io_budget() -> None:
    options = hudi_options(
        database="d", table="t", record_key=["id"], table_type="MERGE_ON_READ", compaction_io_mb=900
    )
    assert options["hoodie.compaction.target.io"] == "900"


def test_hudi_options_archive_merges_small_files() -> None:
    options = hudi_options(database="d", table="t", record_key=["id"])
    assert options["hoodie.archive.merge.enable"] == "true"


# --- on real Hudi 0.15 ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Restored:
    """Two runs (the first savepointed), a restore to the savepoint and the run after it."""

    first: Any  # the runs' RunResults
    second: Any
    savepoints: list[str]  # after the second run
    caught_up: list[dict[str, Any]]  # the rows after the second run
    restored_version: int
    visible_after_restore: list[dict[str, Any]]
    again: Any
    visible_after_again: list[dict[str, Any]]


@pytest.fixture(scope="module", params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def restored(
    spark, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Restored:  # type: ignore[no-untyped-def]
    """One table's savepoint, restore and catch-up, each judged by its own test."""
    lake = Lake(spark, tmp_path_factory.mktemp("restored"), table_type=request.param)
    lake.write("0.json", [c(1, 10), c(2, 11)])
    first = lake.merge()  # savepointed
    lake.write("1.json", [u(1, 20, "one"), c(3, 21)])
    second = lake.merge()
    savepoints = lake.sink.savepoints()
    caught_up = lake.visible()
    version = lake.sink.restore(lake.spark, None).version
    after_restore = lake.visible()
    again = lake.merge()  # the change file after the savepoint is applied again
    return Restored(
        first, second, savepoints, caught_up, version, after_restore, again, lake.visible()
    )


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.parametrize("restored", ["MERGE_ON_READ"], indirect=True)  # the type vendors doubt
def test_recovery_first_commit_is_savepointed_and_the_second_the_same_day_is_not(
    restored: Restored,
) -> None:
    assert restored.first.savepoint_created is not None
    assert restored.second.savepoint_created is None
    assert restored.savepoints == [restored.first.savepoint_created]


@pytest.mark.spark
@pytest.mark.hudi
def test_recovery_restore_rolls_back_then_next_run_catches_up(restored: Restored) -> None:
    assert restored.restored_version == 1
    assert restored.visible_after_restore == [{"id": 1, "name": "n1"}, {"id": 2, "name": "n2"}]
    assert restored.again.files_applied == 1
    assert restored.visible_after_again == restored.caught_up


@dataclass(frozen=True)
class LeftPlan:
    """A MERGE_ON_READ table whose compaction was planned and left, then merged again."""

    plan: str  # the left plan's instant
    planned_after_next: set[str]  # the plans on the timeline after the next run
    completed_after_next: set[str]  # the compactions completed by then
    visible_after_next: list[dict[str, Any]]
    metadata_compactions: list[str]  # the metadata table's, after six more runs
    visible_at_end: list[dict[str, Any]]


@pytest.fixture(scope="module")
def left_plan(spark, tmp_path_factory: pytest.TempPathFactory) -> LeftPlan:  # type: ignore[no-untyped-def]
    """One table for both tests of a left plan: what its first run after the plan completes,
    and what the metadata table does over the runs after it (each test judges one)."""
    lake = Lake(spark, tmp_path_factory.mktemp("left-plan"), table_type="MERGE_ON_READ")
    lake.write("00.json", [c(1, 10)])
    lake.merge()
    lake.write("01.json", [u(1, 11, "v1")])
    lake.merge()  # a log file: something to compact
    root = Path(lake.sink.root)
    timeline = root / ".hoodie"
    # A compaction planned and left: what a run killed after scheduling leaves behind.
    due_now = "hoodie.compact.inline.max.delta.commits=1"
    spark.sql(
        f"CALL run_compaction(op => 'schedule', path => 'file://{root}', options => '{due_now}')"
    ).collect()
    [plan] = [p.name.split(".")[0] for p in timeline.glob("*.compaction.requested")]

    after_next: tuple[set[str], set[str], list[dict[str, Any]]] | None = None
    for i in range(2, 8):  # the metadata table's 10th delta commit is in the 7th run
        lake.write(f"{i:02d}.json", [u(1, 10 + i, f"v{i}")])
        lake.merge()
        if after_next is None:
            planned = {p.name.split(".")[0] for p in timeline.glob("*.compaction.requested")}
            completed = {p.name.split(".")[0] for p in timeline.glob("*.commit")}
            after_next = (planned, completed, lake.visible())
    assert after_next is not None

    metadata = timeline / "metadata" / ".hoodie"
    return LeftPlan(
        plan=plan,
        planned_after_next=after_next[0],
        completed_after_next=after_next[1],
        visible_after_next=after_next[2],
        metadata_compactions=sorted(p.name.split(".")[0] for p in metadata.glob("*.commit")),
        visible_at_end=lake.visible(),
    )


@pytest.mark.spark
@pytest.mark.hudi
def test_recovery_pending_compaction_is_completed_by_the_next_run(left_plan: LeftPlan) -> None:
    assert left_plan.plan in left_plan.planned_after_next
    assert left_plan.planned_after_next <= left_plan.completed_after_next
    assert left_plan.visible_after_next == [{"id": 1, "name": "v2"}]


@pytest.mark.spark
@pytest.mark.hudi
def test_recovery_metadata_table_compacts_after_a_compaction_left_pending(
    left_plan: LeftPlan,
) -> None:
    # Hudi skips the metadata table's compaction while a data instant before it is pending,
    # and stops every write after 1,000 metadata delta commits so: the left plan must not hold
    # it back. The metadata table compacts every 10 of its delta commits (Hudi's default).
    compacted = left_plan.metadata_compactions
    assert compacted and compacted[-1] > left_plan.plan, compacted
    assert left_plan.visible_at_end == [{"id": 1, "name": "v7"}]


def test_sidecar_garbage_checkpoints_before_the_oldest_kept_go() -> None:
    names = ["v00000001.json", "v00000002.json", "v00000003.json", "standalone.json"]
    assert sidecar_garbage(names, [], 3, []) == [
        "checkpoints/v00000001.json",
        "checkpoints/v00000002.json",
    ]


def test_sidecar_garbage_older_set_the_oldest_checkpoint_lists_is_kept() -> None:
    sets = ["v00000001", "v00000002", "v00000004"]
    assert sidecar_garbage([], sets, 3, ["tombstones/v00000001", "tombstones/v00000004"]) == [
        "tombstones/v00000002"
    ]


@pytest.mark.spark
@pytest.mark.hudi
def test_recovery_prune_sidecar_keeps_what_the_oldest_savepoint_needs(
    spark,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    lake = Lake(spark, tmp_path)
    lake.write("0.json", [c(1, 10), c(2, 11)])
    lake.merge()
    lake.write("1.json", [envelope("d", lsn=20, before={"id": 1})])
    lake.merge()  # writes tombstone set v00000002
    lake.write("2.json", [c(3, 30)])
    lake.merge()
    sink = lake.sink
    paths = TablePaths.of(str(lake.warehouse), lake.table)
    names = lake.fs.list_dir(paths.timeline)
    newest = sorted(n.split(".")[0] for n in names if n.endswith((".commit", ".deltacommit")))[-1]
    HudiProcedures(spark, f"file://{paths.root}").create_savepoint(newest)

    pruned = prune_sidecar(lake.fs, paths, lake.fs.list_dir(paths.timeline), newest)

    assert pruned == ["checkpoints/v00000001.json", "checkpoints/v00000002.json"]
    assert lake.fs.list_dir(str(Path(paths.sidecar) / "tombstones")) == ["v00000002"]
    sink.restore(spark, None)  # to the newest savepoint: everything it needs is there
    lake.write("3.json", [c(1, 9)])  # older than the delete: its tombstone stops it
    lake.merge()
    assert lake.visible() == [{"id": 2, "name": "n2"}, {"id": 3, "name": "n3"}]


@pytest.mark.spark
@pytest.mark.hudi
def test_table_life_record_index_of_a_small_first_commit_has_the_configured_file_groups(
    spark,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    lake = Lake(spark, tmp_path, services={"record_index_file_groups": 12})
    lake.write("0.json", [c(1, 10), c(2, 11)])
    lake.merge()
    index = Path(lake.sink.root) / ".hoodie" / "metadata" / "record_index"
    groups = {p.name.split("_")[0].lstrip(".") for p in index.iterdir() if "record-index" in p.name}
    assert len(groups) == 12


@pytest.mark.spark
@pytest.mark.hudi
def test_table_life_compaction_within_its_io_budget_leaves_the_rest_to_the_next_plan(
    spark,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    # Hudi counts each file group's IO in whole MB, and these are under one: a budget of 0 is
    # spent by the first file group it takes.
    lake = Lake(
        spark,
        tmp_path,
        table_type="MERGE_ON_READ",
        partition=("region",),
        services={"compaction_io_mb": 0},
    )
    regions = ("eu", "us", "ap")

    def row(op: str, id_: int, lsn: int) -> dict[str, Any]:
        return envelope(op, lsn=lsn, after={"id": id_, "name": f"v{lsn}", "region": regions[id_]})

    lake.write("0.json", [row("c", i, 10 + i) for i in range(3)])
    lake.merge()  # a file group per region
    for run in range(1, 5):  # the 5th delta commit compacts inline
        lake.write(f"{run}.json", [row("u", i, 100 * run + i) for i in range(3)])
        lake.merge()

    timeline = Path(lake.sink.root) / ".hoodie"
    [compaction] = sorted(timeline.glob("*.commit"))
    stats = json.loads(compaction.read_text())["partitionToWriteStats"]
    assert sum(len(s) for s in stats.values()) == 1  # one of the three file groups
    assert len(lake.visible()) == 3
