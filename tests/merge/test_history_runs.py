"""A lake table's history over whole runs on real Hudi (issue #51): inserts, two updates a key,
deletes, a key change and a truncate over two runs, a rerun, a replay of the same change files,
and a run cut between the history's commit and the table's, then run again."""

from __future__ import annotations

import datetime as dt
import itertools
import runpy
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.history import HISTORY_SUFFIX
from tests.merge.support import (
    SOURCE_TS,
    Lake,
    by_key,
    envelope,
    history_of,
    seconds,
    snapshot_reads,
    versions,
)

pytestmark = [pytest.mark.spark, pytest.mark.hudi]

ENTRY = Path(__file__).resolve().parents[2] / "glue_jobs" / "merge_job.py"
TOAST = "__debezium_unavailable_value"
TRUNCATE_LSN = 70


def at(lsn: int) -> dt.datetime:
    """Each change commits ``lsn`` seconds after the first: validity reads as LSNs."""
    return dt.datetime.fromtimestamp(SOURCE_TS / 1000, dt.UTC).replace(tzinfo=None) + (
        dt.timedelta(seconds=lsn)
    )


def change(op: str, id_: int, lsn: int, name: str | None = None, **extra: Any) -> dict[str, Any]:
    ts_ms = SOURCE_TS + lsn * 1000
    if op == "d":
        return envelope("d", lsn=lsn, before={"id": id_}, ts_ms=ts_ms)
    return envelope(op, lsn=lsn, after={"id": id_, "name": name, **extra}, ts_ms=ts_ms)


# Each list a change file; every change but the truncate and the stale one is a history row.
FIRST = [
    change("c", 1, 10, "a", bio="x"),
    change("c", 2, 11, "a"),
    change("c", 3, 12, "a"),
    change("c", 4, 13, "a"),
    change("u", 1, 20, "b", bio=TOAST),
    change("u", 2, 21, "b"),
    change("u", 1, 30, "c", bio="x"),
    change("u", 2, 31, "c"),
    change("d", 3, 40),
    change("d", 4, 50),  # key 4 becomes key 5: a delete and a create
    change("c", 5, 51, "a"),
]
SECOND = [
    change("u", 1, 60, "d", bio=TOAST),  # filled from the stored row
    change("u", 5, 61, "b"),
    change("c", 6, 62, "a"),
    change("u", 2, 21, "b"),  # redelivered: stale, no row
    envelope("t", lsn=TRUNCATE_LSN, ts_ms=SOURCE_TS + TRUNCATE_LSN * 1000),
    change("c", 1, 80, "e", bio="y"),
    change("c", 8, 81, "a"),
    change("u", 8, 82, "b"),
]
THIRD = [change("u", 8, 90, "c"), change("d", 1, 91)]
CHANGES = len(FIRST) + len(SECOND) + len(THIRD) - 2  # less the truncate and the stale one
# (op, lsn, name, bio, valid_from, valid_to) by key, times as LSNs.
EXPECTED = {
    1: [
        ("c", 10, "a", "x", 10, 20),
        ("u", 20, "b", "x", 20, 30),
        ("u", 30, "c", "x", 30, 60),
        ("u", 60, "d", "x", 60, TRUNCATE_LSN),
        ("c", 80, "e", "y", 80, 91),
        ("d", 91, "e", "y", 91, 91),
    ],
    2: [("c", 11, "a", None, 11, 21), ("u", 21, "b", None, 21, 31), ("u", 31, "c", None, 31, 70)],
    3: [("c", 12, "a", None, 12, 40), ("d", 40, "a", None, 40, 40)],
    4: [("c", 13, "a", None, 13, 50), ("d", 50, "a", None, 50, 50)],
    5: [("c", 51, "a", None, 51, 61), ("u", 61, "b", None, 61, 70)],
    6: [("c", 62, "a", None, 62, 70)],
    8: [("c", 81, "a", None, 81, 82), ("u", 82, "b", None, 82, 90), ("u", 90, "c", None, 90, None)],
}


@dataclass(frozen=True)
class HistoryLake:
    """A lake with history and what each step left in it; the tests only read it."""

    lake: Lake
    after_second: list[dict[str, Any]]
    after_rerun: list[dict[str, Any]]
    after_replay: list[dict[str, Any]]
    cut: list[dict[str, Any]]  # after the run cut between the two commits
    cut_version: int  # the table's version after the cut run
    final: list[dict[str, Any]]
    final_version: int
    live_keys: set[int]
    catalog_rows: int


@pytest.fixture(scope="module")
def history_lake(spark, tmp_path_factory: pytest.TempPathFactory) -> HistoryLake:  # type: ignore[no-untyped-def]
    lake = Lake(spark, tmp_path_factory.mktemp("history"), services={"history": 1})
    lake.write("a.json", FIRST)
    lake.merge()
    lake.write("b.json", SECOND)
    lake.merge()
    after_second = history_of(lake)
    lake.merge()  # a rerun: nothing new
    after_rerun = history_of(lake)
    for name in ("a.json", "b.json"):  # the same change files again, under other names
        lake.write(f"again-{name}", FIRST if name == "a.json" else SECOND, partition=1)
    lake.merge()
    after_replay = history_of(lake)
    # Cut the next run after the history's commit: a folder where the table's next checkpoint
    # is to be staged makes the table's commit fail there, as a kill would leave it.
    checkpoint = Path(lake.sink.sidecar) / f"checkpoints/v{lake.sink.load().version + 1:08d}.json"
    checkpoint.mkdir(parents=True)
    lake.write("c.json", THIRD)
    with pytest.raises(IsADirectoryError):
        lake.merge()
    cut, cut_version = history_of(lake), lake.sink.load().version
    checkpoint.rmdir()
    final_version = lake.merge().version
    database = lake.table.split(".")[0]
    name = lake.table.split(".")[1] + HISTORY_SUFFIX
    catalog_rows = spark.table(f"`{database}`.`{name}`").count()
    return HistoryLake(
        lake,
        after_second,
        after_rerun,
        after_replay,
        cut,
        cut_version,
        history_of(lake),
        final_version,
        {row["id"] for row in lake.rows()},
        catalog_rows,
    )


def test_history_row_count_is_the_changes_applied(history_lake: HistoryLake) -> None:
    assert len(history_lake.final) == CHANGES


def test_history_versions_per_key_are_the_changes_made(history_lake: HistoryLake) -> None:
    assert versions(history_lake.final, "name", "bio") == EXPECTED


def test_history_validity_has_no_gap_or_overlap(history_lake: HistoryLake) -> None:
    truncated_at = at(TRUNCATE_LSN)
    for rows in by_key(history_lake.final).values():
        for version, following in itertools.pairwise(rows):
            if version["_cdc_op"] == "d":
                assert version["_cdc_valid_to"] == version["_cdc_valid_from"]
            elif following["_cdc_valid_from"] > truncated_at >= version["_cdc_valid_from"]:
                assert version["_cdc_valid_to"] == truncated_at
            else:
                assert version["_cdc_valid_to"] == following["_cdc_valid_from"]


def test_history_current_row_only_for_each_live_key(history_lake: HistoryLake) -> None:
    current = Counter(r["id"] for r in history_lake.final if r["_cdc_current"])
    assert current == Counter(history_lake.live_keys)
    assert history_lake.live_keys == {8}


def test_history_rerun_and_replay_add_and_change_no_row(history_lake: HistoryLake) -> None:
    assert history_lake.after_rerun == history_lake.after_second
    assert history_lake.after_replay == history_lake.after_second


def test_history_run_cut_after_the_history_commit_leaves_the_table_where_it_was(
    history_lake: HistoryLake,
) -> None:
    assert history_lake.cut_version == history_lake.final_version - 1
    assert len(history_lake.cut) == CHANGES  # the cut run's rows were written


def test_history_run_again_after_a_cut_holds_each_change_once(history_lake: HistoryLake) -> None:
    keys = Counter((r["id"], r["_cdc_order"]) for r in history_lake.final)
    assert max(keys.values()) == 1
    assert sorted(history_lake.final, key=repr) == sorted(history_lake.cut, key=repr)


def test_history_table_is_partitioned_by_source_date(history_lake: HistoryLake) -> None:
    root = Path(history_lake.lake.sink.history_root)
    assert sorted(p.name for p in root.glob("_cdc_source_date=*")) == [
        f"_cdc_source_date={at(0):%Y-%m-%d}"
    ]


def test_history_table_is_registered_in_the_catalog_beside_the_table(
    history_lake: HistoryLake,
) -> None:
    assert history_lake.catalog_rows == CHANGES


def test_glue_entry_history_argument_reaches_the_sink(tmp_path: Path) -> None:
    module = runpy.run_path(str(ENTRY))
    argv = ["merge_job.py", "--table", "public.orders", "--changes_path", str(tmp_path)]
    argv += ["--warehouse_path", str(tmp_path), "--database", "lake", "--record_key", "id"]
    argv += ["--quarantine_path", str(tmp_path), "--max_bad_fraction", "0.01"]
    for extra, kept in (([], False), (["--history", "1"], True)):
        args = module["parse_arguments"]([*argv, *extra])
        assert module["open_table"](args, module["merge_options"](args), None).history is kept


def test_history_snapshot_taken_again_closes_the_rows_it_did_not_read(  # type: ignore[no-untyped-def]
    spark, tmp_path: Path
) -> None:
    lake = Lake(spark, tmp_path, services={"history": 1})
    lake.write("a.json", snapshot_reads([(1, "a"), (2, "a")], 10))
    lake.merge()
    lake.write("b.json", snapshot_reads([(1, "again")], 50, ts_ms=SOURCE_TS + 50 * 1000))
    lake.merge()
    versions = {
        (r["id"], r["name"]): (r["_cdc_current"], seconds(r["_cdc_valid_to"]))
        for r in history_of(lake)
    }
    # Key 2, deleted while the connector was not streaming, ends where the snapshot began.
    assert versions == {(1, "a"): (False, 50), (1, "again"): (True, None), (2, "a"): (False, 50)}
