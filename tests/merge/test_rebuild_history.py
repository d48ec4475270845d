"""A table that keeps its history, rebuilt as a copy (issues #49 and #51; docs/lake.md "History
through a rebuild by copy") on real Hudi 0.15: a COPY_ON_WRITE table with history whose config
makes it MERGE_ON_READ refuses its merges; changes keep arriving (an update, an insert, a
delete, a stale redelivery of a deleted key); its rebuild copies the live generation into
generation 2, is cut once during the copy and once after it (as kills would leave it), and
then applies what waits from the live checkpoint on, with its history, and swaps. The history
holds each change once, with no gap, overlap or second current version; the live table is
untouched until the swap; the quarantine's waiting lines come along; the swap registers the
history's new partitions. Then back to COPY_ON_WRITE: the swap drops the `_rt` entry. Refusals: a
type change, a key change, a run without history; abandon."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.generations import (
    Generations,
    begin_rebuild,
    read_generations,
    write_generations,
)
from cdclake_merge.history import HISTORY_SUFFIX
from cdclake_merge.layout import LayoutNeedsRebuild
from cdclake_merge.rebuild import TableRun, abandon, history_refusal, merge_table, rebuild_step
from cdclake_merge.replay import listing
from cdclake_merge.sink import Sink, open_sink
from tests.merge.support import (
    SOURCE_TS,
    Lake,
    by_key,
    catalog_location,
    envelope,
    history_of,
    versions,
)

pytestmark = [pytest.mark.spark, pytest.mark.hudi]


def change(
    op: str, id_: int, lsn: int, name: str | None = None, *, later: int = 0
) -> dict[str, Any]:
    """A change committed ``lsn`` (and ``later``) seconds after the first (validity reads as
    LSNs)."""
    ts_ms = SOURCE_TS + (lsn + later) * 1000
    if op == "d":
        return envelope("d", lsn=lsn, before={"id": id_}, ts_ms=ts_ms)
    return envelope(op, lsn=lsn, after={"id": id_, "name": name}, ts_ms=ts_ms)


LIVE = [change("c", 1, 10, "a"), change("c", 2, 11, "a"), change("c", 3, 12, "a")]
LIVE += [change("u", 1, 20, "b"), change("d", 3, 30)]
# Written once the config asks for MERGE_ON_READ: the live table refuses them.
WAITING = [change("u", 2, 40, "b"), change("c", 4, 41, "a"), change("d", 1, 42)]
WAITING += [change("c", 3, 12, "a")]  # redelivered: older than key 3's tombstone, stale
DAY = 86_400  # DURING commits a day later: a history partition no live commit registered
DURING = [change("u", 4, 50, "b", later=DAY)]  # after the copy, before the rebuild's next run
BAD = "{not json"  # quarantined by the live table, waiting for a replay
CHANGES = len(LIVE) + len(WAITING) - 1 + len(DURING)
# (op, lsn, name, valid_from, valid_to) by key, times as LSNs.
EXPECTED = {
    1: [("c", 10, "a", 10, 20), ("u", 20, "b", 20, 42), ("d", 42, "b", 42, 42)],
    2: [("c", 11, "a", 11, 40), ("u", 40, "b", 40, None)],
    3: [("c", 12, "a", 12, 30), ("d", 30, "a", 30, 30)],
    4: [("c", 41, "a", 41, 50 + DAY), ("u", 50, "b", 50 + DAY, None)],
}


def generation_sink(lake: Lake, table_type: str = "MERGE_ON_READ", **spec: Any) -> Any:
    """The table's sink of a generation as config now opens it (history kept)."""

    def sink(generation: int, catalog: bool) -> Sink:
        return open_sink(
            warehouse=str(lake.warehouse),
            table=lake.table,
            key=spec.get("key", lake.key),
            fs=lake.fs,
            spark_factory=lambda: lake.spark,
            table_type=table_type,
            partition_fields=spec.get("partition", ()),
            sync_catalog=catalog,
            generation=generation,
            history=spec.get("history", 1),
        )

    return sink


def table_type(sink: Sink) -> str:
    properties = sink.fs.read_text(f"{sink.root}/.hoodie/hoodie.properties")
    return dict(line.split("=", 1) for line in properties.splitlines() if "=" in line)[
        "hoodie.table.type"
    ]


def cut_at(sink: Sink, version: int) -> Path:
    """A folder where ``sink``'s checkpoint of ``version`` is to be staged: the run staging it
    fails there, as a kill would leave it."""
    folder = Path(sink.sidecar) / f"checkpoints/v{version:08d}.json"
    folder.mkdir(parents=True)
    return folder


def history_lake(spark: Any, root: Path) -> Lake:
    lake = Lake(spark, root, services={"history": 1}, max_bad_fraction=0.5)
    lake.write("a.json", [*LIVE, BAD])
    lake.merge()
    return lake


@dataclass(frozen=True)
class Copied:
    lake: Lake
    refused_merge: str  # the live table's run under the new config
    live_version: int  # before the rebuild
    live_rows: list[dict[str, Any]]
    history_before: list[dict[str, Any]]
    cut_in_copy: Generations  # the state after a run cut while it copied
    cut_in_copy_files: bool  # generation 2 has a committed checkpoint after that
    after_copy_rows: list[dict[str, Any]]  # generation 2's, after a run cut after the copy
    after_copy_history: list[dict[str, Any]]
    live_rows_during: list[dict[str, Any]]
    live_version_during: int
    step: TableRun  # the run that finished it
    state: Generations
    rows: list[dict[str, Any]]
    history: list[dict[str, Any]]
    generation_type: str
    location: str  # the catalog entry's, after the swap
    quarantine: list[str]  # the new generation's lines waiting for a replay
    history_partitions: list[str]  # the history's, in the catalog after the swap


def _rows(lake: Lake, sink: Sink) -> list[dict[str, Any]]:
    live = sink.read_live(lake.spark, sink.load())
    assert live is not None
    return sorted(({"id": r["id"], "name": r["name"]} for r in live.collect()), key=repr)


@pytest.fixture(scope="module")
def copied(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Copied:
    lake = history_lake(spark, tmp_path_factory.mktemp("history-copy"))
    sinks = generation_sink(lake)
    live_version, history_before = lake.sink.load().version, history_of(lake)
    live_rows = _rows(lake, lake.sink)
    lake.write("b.json", WAITING)
    with pytest.raises(LayoutNeedsRebuild) as refused:
        from cdclake_merge.job import run_merge

        run_merge(lambda: spark, lake.fs, sinks(1, True), lake.options)

    def step() -> TableRun:
        return rebuild_step(lambda: spark, lake.fs, sinks, lake.options)

    target = sinks(2, False)
    cut = cut_at(target, 1)
    with pytest.raises(IsADirectoryError):
        step()
    cut.rmdir()
    cut_in_copy = read_generations(lake.fs, lake.sink.sidecar)
    cut_in_copy_files = target.newest_checkpoint() is not None
    cut = cut_at(target, 2)  # the copy is version 1: its run of what waits is cut
    with pytest.raises(IsADirectoryError):
        step()
    cut.rmdir()
    after_copy_rows, after_copy_history = _rows(lake, target), history_of(lake)
    lake.write("c.json", DURING)
    live_rows_during, live_version_during = _rows(lake, lake.sink), lake.sink.load().version
    finished = step()
    state = read_generations(lake.fs, lake.sink.sidecar)
    live = sinks(state.live, False)
    return Copied(
        lake,
        str(refused.value),
        live_version,
        live_rows,
        history_before,
        cut_in_copy,
        cut_in_copy_files,
        after_copy_rows,
        after_copy_history,
        live_rows_during,
        live_version_during,
        finished,
        state,
        _rows(lake, live),
        history_of(lake),
        table_type(live),
        catalog_location(lake),
        [q.raw for q in listing(lake.fs, live.quarantine_root, state_version(live)).pending],
        _history_partitions(lake),
    )


def state_version(sink: Sink) -> int:
    return sink.load().version


def _history_partitions(lake: Lake) -> list[str]:
    """As the metastore holds them (Spark's SHOW PARTITIONS of a Hudi table lists its files)."""
    database, name = lake.table.split(".")
    catalog = lake.spark._jsparkSession.sharedState().externalCatalog()
    none = lake.spark.sparkContext._jvm.scala.Option.empty()
    names = catalog.listPartitionNames(database, f"{name}{HISTORY_SUFFIX}", none)
    return sorted(str(names.apply(i)) for i in range(names.size()))


def test_rebuild_copy_live_merge_under_new_config_refused(copied: Copied) -> None:
    assert "table type COPY_ON_WRITE -> MERGE_ON_READ" in copied.refused_merge


def test_rebuild_copy_cut_during_the_copy_begun_as_copy_nothing_committed(copied: Copied) -> None:
    assert copied.cut_in_copy.building == 2 and copied.cut_in_copy.copy
    assert not copied.cut_in_copy.snapshot_id and not copied.cut_in_copy_files


def test_rebuild_copy_generation_holds_the_live_rows_after_the_copy(copied: Copied) -> None:
    assert (
        copied.after_copy_rows
        == copied.live_rows
        == [{"id": 1, "name": "b"}, {"id": 2, "name": "a"}]
    )


def test_rebuild_copy_cut_after_the_copy_history_has_only_the_cut_runs_rows(
    copied: Copied,
) -> None:
    # The copy writes no history row (it is no change); the cut run wrote its own before the
    # table's commit, as any run does, and the run after it writes the same rows again.
    before = {r["_cdc_lsn"] for r in copied.history_before}
    after = [r["_cdc_lsn"] for r in copied.after_copy_history]
    assert len(before) == len(LIVE)
    assert sorted(set(after) - before) == [40, 41, 42] and len(after) == len(LIVE) + 3


def test_rebuild_copy_live_generation_untouched_until_the_swap(copied: Copied) -> None:
    assert copied.live_version_during == copied.live_version
    assert copied.live_rows_during == copied.live_rows


def test_rebuild_copy_applies_what_waited_and_swaps(copied: Copied) -> None:
    assert copied.step.swapped and copied.state.live == 2 and copied.state.building is None
    assert copied.rows == [{"id": 2, "name": "b"}, {"id": 4, "name": "b"}]


def test_rebuild_copy_new_generation_takes_the_configs_table_type(copied: Copied) -> None:
    assert copied.generation_type == "MERGE_ON_READ"


def test_rebuild_copy_catalog_entry_points_at_the_new_generation(copied: Copied) -> None:
    assert copied.location.rstrip("/").endswith("__g2")


def test_rebuild_copy_history_holds_each_change_once(copied: Copied) -> None:
    assert len(copied.history) == CHANGES


def test_rebuild_copy_history_versions_per_key_are_the_changes_made(copied: Copied) -> None:
    assert versions(copied.history, "name") == EXPECTED


def test_rebuild_copy_history_validity_has_no_gap_or_overlap(copied: Copied) -> None:
    for rows in by_key(copied.history).values():
        for version, following in itertools.pairwise(rows):
            assert version["_cdc_valid_to"] == following["_cdc_valid_from"]


def test_rebuild_copy_history_one_current_version_per_live_key(copied: Copied) -> None:
    current = Counter(r["id"] for r in copied.history if r["_cdc_current"])
    assert current == Counter(r["id"] for r in copied.rows)


def test_rebuild_copy_redelivered_change_of_a_deleted_key_stays_out(copied: Copied) -> None:
    # Key 3's tombstone came with the copy: its create, redelivered, is stale.
    assert copied.step.result.stale_skipped == 1
    assert 3 not in {r["id"] for r in copied.rows}


# --- refusals --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def refusing(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    return history_lake(spark, tmp_path_factory.mktemp("history-refused"))


def test_rebuild_copy_type_change_refused_nothing_begun(refusing: Lake, tmp_path: Path) -> None:
    sinks = generation_sink(refusing, "COPY_ON_WRITE")
    with pytest.raises(
        ValueError,
        match=r"keeps its history .* for anything but a change of its layout .*nothing was begun",
    ):
        rebuild_step(lambda: refusing.spark, refusing.fs, sinks, refusing.options)
    assert read_generations(refusing.fs, refusing.sink.sidecar) == Generations()


def test_rebuild_copy_key_change_refused_naming_it(refusing: Lake) -> None:
    sinks = generation_sink(refusing, "MERGE_ON_READ", key=("id", "name"))
    refused = history_refusal(sinks(1, False), Generations())
    assert refused is not None
    assert "for record key [id] -> [id, name], which" in refused
    assert "table type" not in refused.split("which")[0]


def test_rebuild_copy_layout_change_accepted(refusing: Lake) -> None:
    assert history_refusal(generation_sink(refusing)(1, False), Generations()) is None


def test_rebuild_copy_a_snapshot_rebuild_in_progress_not_continued(refusing: Lake) -> None:
    refused = history_refusal(generation_sink(refusing)(1, False), Generations(building=2))
    assert refused is not None and "for a rebuild from a snapshot" in refused


def test_rebuild_copy_carries_the_quarantined_lines_waiting_for_a_replay(copied: Copied) -> None:
    # A replay reads only its own generation's quarantine: the live one's lines come along.
    assert copied.quarantine == [BAD]


def test_rebuild_copy_swap_registers_the_historys_new_partitions(copied: Copied) -> None:
    # DURING's day had no history partition until the rebuild's run, which syncs no catalog.
    assert copied.history_partitions == [
        "_cdc_source_date=2023-11-14",
        "_cdc_source_date=2023-11-15",
    ]


def test_rebuild_copy_continued_without_history_refused(refusing: Lake) -> None:
    # A run without the table's config (no history) would apply changes without versions.
    home = refusing.sink.sidecar
    write_generations(refusing.fs, home, Generations(building=2, copy=True))
    try:
        with pytest.raises(ValueError, match=r"a rebuild by copy is in progress and keeps"):
            rebuild_step(
                lambda: refusing.spark,
                refusing.fs,
                generation_sink(refusing, history=0),
                refusing.options,
            )
    finally:
        write_generations(refusing.fs, home, Generations())


def test_rebuild_abandon_deletes_the_generation_being_built(refusing: Lake) -> None:
    sinks = generation_sink(refusing)
    begun = begin_rebuild(refusing.fs, refusing.sink.sidecar, str(refusing.changes), copy=True)
    built = sinks(2, False)
    for folder in (built.root, built.sidecar, built.quarantine_root):
        Path(folder).mkdir(parents=True)
    state = abandon(sinks)
    assert begun.building == 2 and begun.copy
    assert (state.building, state.copy, state.live) == (None, False, 1)
    assert read_generations(refusing.fs, refusing.sink.sidecar) == state
    assert not any(Path(f).exists() for f in (built.root, built.sidecar, built.quarantine_root))


# --- and back: MERGE_ON_READ rebuilt as COPY_ON_WRITE ------------------------------------------


@dataclass(frozen=True)
class Reverted:
    name: str  # the table's catalog entry
    tables: set[str]  # the database's catalog entries after the swap
    location: str
    rows: list[dict[str, Any]]
    rt_before: bool  # the MERGE_ON_READ generation's `_rt` entry, before this rebuild
    old_generation_kept: bool  # generation 2's files, after the swap (removed a run later)


@pytest.fixture(scope="module")
def reverted(copied: Copied) -> Reverted:
    """``copied``'s table (MERGE_ON_READ, generation 2) rebuilt as COPY_ON_WRITE again."""
    lake = copied.lake
    database, name = lake.table.split(".")
    catalog = lake.spark._jsparkSession.sharedState().externalCatalog()
    rt_before = bool(catalog.tableExists(database, f"{name}_rt"))
    lake.write("d.json", [change("u", 2, 60, "c")])  # its commit removes generation 1
    merged = merge_table(lambda: lake.spark, lake.fs, generation_sink(lake), lake.options)
    assert merged.removed == 1, merged
    sinks = generation_sink(lake, "COPY_ON_WRITE")
    for _ in range(3):
        if rebuild_step(lambda: lake.spark, lake.fs, sinks, lake.options).swapped:
            break
    state = read_generations(lake.fs, lake.sink.sidecar)
    assert state.live == 3, state
    tables = {t.name for t in lake.spark.catalog.listTables(database)}
    return Reverted(
        name,
        tables,
        catalog_location(lake),
        _rows(lake, sinks(3, False)),
        rt_before,
        Path(sinks(2, False).root).is_dir(),
    )


def test_rebuild_back_to_copy_on_write_drops_the_rt_entry(reverted: Reverted) -> None:
    # Left, it would read generation 2 until that is removed, and then fail.
    assert reverted.rt_before
    assert f"{reverted.name}_rt" not in reverted.tables and reverted.name in reverted.tables


def test_rebuild_back_to_copy_on_write_entry_reads_the_new_generation(
    reverted: Reverted,
) -> None:
    assert reverted.location.rstrip("/").endswith("__g3")
    assert reverted.rows == [{"id": 2, "name": "c"}, {"id": 4, "name": "b"}]


def test_rebuild_back_to_copy_on_write_old_generation_files_left_for_the_next_run(
    reverted: Reverted,
) -> None:
    assert reverted.old_generation_kept
