"""The merge side of a rebuild beside the live table (issue #49; docs/merge-job.md "Rebuild
beside the live table") on real Hudi 0.15: a table of numeric(10,2) amounts whose column became
numeric(14,4) is rebuilt as generation 2 beside it from the change files written after the
rebuild began (Debezium's incremental-snapshot reads, then a streamed update), the live table
untouched and readable meanwhile, then swapped in by moving its catalog entry."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.erase_request import request_folder
from cdclake_merge.generations import begin_rebuild, read_generations
from cdclake_merge.job import RunResult, TableNeedsRebuild
from cdclake_merge.rebuild import run_rebuild, swap
from cdclake_merge.sink import Sink, open_sink
from tests.merge.support import Lake, catalog_location, decimal_b64, envelope, with_schema

pytestmark = [pytest.mark.spark, pytest.mark.hudi]


def _amounts(
    op: str, id_: int, lsn: int, amount: str, scale: int, source: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A change of ``amount`` as the JsonConverter writes numeric(10 + 2 * (scale - 2), scale)."""
    event = envelope(
        op, lsn=lsn, commit=lsn, after={"id": id_, "amount": decimal_b64(amount, scale)}
    )
    event["source"].update(source or {})
    decimal = {
        "field": "amount",
        "optional": True,
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": str(scale), "connect.decimal.precision": str(6 + 2 * scale)},
    }
    return with_schema(event, [{"field": "id", "type": "int32"}, decimal])


def _snapshot_read(id_: int, window_closed: int, amount: str) -> dict[str, Any]:
    """An incremental-snapshot read: no LSN of its own, ordered where its window closed."""
    sequence = json.dumps([str(window_closed), str(window_closed)])
    source = {"snapshot": "incremental", "lsn": None, "sequence": sequence}
    return _amounts("r", id_, 0, amount, 4, source)


def _generation_sink(lake: Lake) -> Any:
    def sink(generation: int, catalog: bool) -> Sink:
        return open_sink(
            warehouse=str(lake.warehouse),
            table=lake.table,
            key=lake.key,
            fs=lake.fs,
            spark_factory=lambda: lake.spark,
            sync_catalog=catalog,
            generation=generation,
        )

    return sink


def _catalog_rows(lake: Lake) -> list[tuple[int, Decimal]]:
    rows = lake.spark.table(lake.table).select("id", "amount").collect()
    return sorted((r["id"], r["amount"]) for r in rows)


def _needing_rebuild(spark: Any, root: Path) -> Lake:
    """A live table of amounts 1.25 and 2.50 whose next change file is numeric(14,4), and the
    change files written once the rebuild has begun: snapshot reads, then an update of 1."""
    lake = Lake(spark, root)
    lake.write("a.json", [_amounts("c", 1, 10, "1.25", 2), _amounts("c", 2, 11, "2.50", 2)])
    lake.merge()
    lake.write("b.json", [_amounts("u", 2, 20, "2.7500", 4)])
    with pytest.raises(TableNeedsRebuild):
        lake.merge()
    begin_rebuild(lake.fs, lake.sink.sidecar, str(lake.changes))
    lake.write("c.json", [_snapshot_read(1, 30, "1.2500"), _snapshot_read(2, 30, "2.7500")])
    lake.write("d.json", [_amounts("u", 1, 40, "9.9900", 4)])
    return lake


def _rebuild(lake: Lake, generation_sink: Any = None) -> RunResult:
    _, result = run_rebuild(
        lambda: lake.spark, lake.fs, generation_sink or _generation_sink(lake), lake.options
    )
    return result


@dataclass
class Rebuilt:
    lake: Lake
    result: RunResult
    generation: Sink
    live_version: int  # the live table's, after the rebuild's run
    live_rows: list[tuple[int, Decimal]]  # through its catalog entry, before the swap
    location_before: str
    location_after: str
    rows_after: list[tuple[int, Decimal]]  # through the catalog entry, after the swap


@pytest.fixture(scope="module")
def rebuilt(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Rebuilt:
    lake = _needing_rebuild(spark, tmp_path_factory.mktemp("rebuilt"))
    result = _rebuild(lake)
    live_version, live_rows, before = (
        lake.sink.load().version,
        _catalog_rows(lake),
        catalog_location(lake),
    )
    swap(spark, _generation_sink(lake))
    generation = _generation_sink(lake)(2, False)
    return Rebuilt(
        lake,
        result,
        generation,
        live_version,
        live_rows,
        before,
        catalog_location(lake),
        _catalog_rows(lake),
    )


def _stored_rows(lake: Lake, sink: Sink) -> list[tuple[int, str]]:
    live = sink.read_live(lake.spark, sink.load())
    assert live is not None
    return sorted((r["id"], str(r["amount"])) for r in live.collect())


def test_run_rebuild_writes_generation_two_beside_the_live_table(rebuilt: Rebuilt) -> None:
    root = Path(rebuilt.generation.root)
    assert root.parent == Path(rebuilt.lake.sink.root).parent
    assert root.name == rebuilt.lake.table.split(".")[1] + "__g2"
    assert _stored_rows(rebuilt.lake, rebuilt.generation) == [(1, "9.9900"), (2, "2.7500")]


def test_run_rebuild_reads_only_files_written_after_it_began(rebuilt: Rebuilt) -> None:
    assert (rebuilt.result.files_applied, rebuilt.result.upserts) == (2, 2)


def test_run_rebuild_leaves_the_live_table_untouched_and_readable(rebuilt: Rebuilt) -> None:
    assert rebuilt.live_version == 1
    assert rebuilt.live_rows == [(1, Decimal("1.25")), (2, Decimal("2.50"))]
    assert rebuilt.location_before.rstrip("/").endswith(rebuilt.lake.table.split(".")[1])


def test_swap_moves_the_catalog_entry_to_the_generation(rebuilt: Rebuilt) -> None:
    assert rebuilt.location_after.rstrip("/").endswith(Path(rebuilt.generation.root).name)
    assert rebuilt.rows_after == [(1, Decimal("9.9900")), (2, Decimal("2.7500"))]
    state = read_generations(rebuilt.lake.fs, rebuilt.lake.sink.sidecar)
    assert (state.live, state.building, state.catalog_pending, state.retired) == (2, None, False, 1)


class _KilledAtCommit(Exception):
    pass


def test_run_rebuild_killed_before_its_commit_restarted_gives_the_same_rows(
    spark: Any, tmp_path: Path, rebuilt: Rebuilt
) -> None:
    lake = _needing_rebuild(spark, tmp_path)
    make = _generation_sink(lake)

    def killed_at_commit(generation: int, catalog: bool) -> Sink:
        sink = make(generation, catalog)

        def commit(*_: Any) -> Any:  # everything staged, the Hudi commit never made
            raise _KilledAtCommit

        sink.commit = commit  # type: ignore[method-assign]
        return sink

    with pytest.raises(_KilledAtCommit):
        _rebuild(lake, killed_at_commit)
    _rebuild(lake)
    assert _stored_rows(lake, make(2, False)) == _stored_rows(rebuilt.lake, rebuilt.generation)


# --- the runs wired: every run follows the state object ---------------------------------------


def _noted(op: str, id_: int, lsn: int, amount: str, note: str) -> dict[str, Any]:
    """A change of the live table's columns before the source dropped ``note``."""
    event = _amounts(op, id_, lsn, amount, 2)
    event["payload"]["after"]["note"] = note
    event["schema"]["fields"][1]["fields"].append({"field": "note", "type": "string"})
    return event


class _CatalogDown(Exception):
    pass


class _KilledDeleting(Exception):
    pass


class _DeleteCut:
    """The lake's filesystem, killed when it comes to delete a sidecar's checkpoints."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def delete(self, path: str) -> None:
        if path.endswith("/checkpoints"):
            raise _KilledDeleting
        self._fs.delete(path)


@dataclass
class Wired:
    """A table of (id, amount numeric(10,2), note) whose source dropped ``note`` and changed
    ``amount`` to numeric(14,4), rebuilt by merge runs: a run while building (snapshot not yet
    finished), a rebuild run finding Debezium's COMPLETED notification whose catalog update is
    cut short, a merge run after it killed while removing the old generation, a run with
    nothing new, and another."""

    lake: Lake
    building_run: Any  # the merge run while the rebuild was building
    live_version_while_building: int
    state_after_building_run: Any
    state_after_cut_swap: Any
    location_after_cut_swap: str
    sidecar_after_cut_removal: list[str]
    after_swap_run: Any  # the run with nothing new after the one killed removing
    location_after: str
    rows_after: list[tuple[int, Decimal]]
    state_after: Any
    idle_run: Any
    files_before_idle: list[str]
    files_after_idle: list[str]
    new_generation_rows: list[dict[str, Any]]


def _merge_table(lake: Lake, generation_sink: Any, notifications: Path) -> Any:
    from cdclake_merge.rebuild import merge_table

    return merge_table(
        lambda: lake.spark, lake.fs, generation_sink, lake.options, notifications=str(notifications)
    )


def _files(lake: Lake) -> list[str]:
    return sorted(str(p.relative_to(lake.warehouse)) for p in lake.warehouse.rglob("*"))


def _completed(notifications: Path, snapshot_id: str) -> None:
    folder = notifications / "partition=0"
    folder.mkdir(parents=True)
    value = {"id": snapshot_id, "aggregate_type": "Incremental Snapshot", "type": "COMPLETED"}
    (folder / "n+0+0000000000.json").write_text(json.dumps({"schema": {}, "payload": value}))


@pytest.fixture(scope="module")
def wired(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Wired:
    from cdclake_merge.erase_request import write_request
    from cdclake_merge.generations import record_signal
    from cdclake_merge.rebuild import rebuild_step

    root = tmp_path_factory.mktemp("wired")
    lake, notifications = Lake(spark, root), root / "notifications"
    make = _generation_sink(lake)
    lake.write("a.json", [_noted("c", 1, 10, "1.25", "x"), _noted("c", 2, 11, "2.50", "y")])
    lake.merge()
    begin_rebuild(lake.fs, lake.sink.sidecar, str(lake.changes))
    record_signal(lake.fs, lake.sink.sidecar, "snap-1")  # as `cdclake rebuild` does, then signals
    lake.write("c.json", [_snapshot_read(1, 30, "1.2500"), _snapshot_read(2, 30, "2.7500")])
    lake.write("d.json", [_amounts("u", 1, 40, "9.9900", 4)])
    building_run = _merge_table(lake, make, notifications)
    live_version = lake.sink.load().version
    state_building = read_generations(lake.fs, lake.sink.sidecar)

    def catalog_down(generation: int, catalog: bool) -> Sink:
        sink = make(generation, catalog)

        def take_over_catalog(*_: Any) -> None:
            raise _CatalogDown

        sink.take_over_catalog = take_over_catalog  # type: ignore[method-assign]
        return sink

    _completed(notifications, "snap-1")
    with pytest.raises(_CatalogDown):
        rebuild_step(
            lambda: spark, lake.fs, catalog_down, lake.options, notifications=str(notifications)
        )
    cut_state, cut_location = read_generations(lake.fs, lake.sink.sidecar), catalog_location(lake)
    lake.write("e.json", [_amounts("u", 2, 50, "3.0000", 4)])
    # A failed erase run's request: its rerun still needs it after the swap.
    write_request(lake.fs, str(lake.warehouse), lake.table, {"id": "9"})

    def delete_cut(generation: int, catalog: bool) -> Sink:
        sink = make(generation, catalog)
        sink.fs = _DeleteCut(sink.fs)
        return sink

    with pytest.raises(_KilledDeleting):
        _merge_table(lake, delete_cut, notifications)
    cut_removal = sorted(p.name for p in Path(lake.sink.sidecar).iterdir())
    after_swap = _merge_table(lake, make, notifications)
    spark.catalog.refreshTable(lake.table)
    location, rows = catalog_location(lake), _catalog_rows(lake)
    state_after = read_generations(lake.fs, lake.sink.sidecar)
    files_before = _files(lake)
    idle = _merge_table(lake, make, notifications)
    new = make(2, False)
    new_rows = sorted(
        (r.asDict() for r in new.read_live(spark, new.load()).collect()),  # type: ignore[union-attr]
        key=lambda r: r["id"],
    )
    return Wired(
        lake,
        building_run,
        live_version,
        state_building,
        cut_state,
        cut_location,
        cut_removal,
        after_swap,
        location,
        rows,
        state_after,
        idle,
        files_before,
        _files(lake),
        new_rows,
    )


def test_merge_table_while_building_commits_to_the_new_generation_only(wired: Wired) -> None:
    assert wired.building_run.rebuilding and wired.building_run.result.committed
    assert wired.live_version_while_building == 1


def test_merge_table_before_the_snapshots_completion_keeps_building(wired: Wired) -> None:
    state = wired.state_after_building_run
    assert (state.live, state.building, wired.building_run.swapped) == (1, 2, False)


def test_rebuild_step_completed_notification_names_the_generation_live(wired: Wired) -> None:
    state = wired.state_after_cut_swap
    assert (state.live, state.building, state.catalog_pending, state.retired) == (2, None, True, 1)
    assert wired.location_after_cut_swap.rstrip("/").endswith(wired.lake.table.split(".")[1])


def test_merge_table_after_a_cut_swap_moves_the_catalog_then_merges(wired: Wired) -> None:
    assert wired.location_after.rstrip("/").endswith("__g2")
    assert wired.rows_after == [(1, Decimal("9.9900")), (2, Decimal("3.0000"))]


def test_merge_table_after_the_swaps_first_commit_no_old_generation_remains(
    wired: Wired,
) -> None:
    lake = wired.lake
    assert wired.after_swap_run.removed == 1 and not Path(lake.sink.root).exists()
    kept = sorted(p.name for p in Path(lake.sink.sidecar).iterdir())
    assert kept == ["generations.json"]
    assert (wired.state_after.live, wired.state_after.retired) == (2, None)


def test_merge_table_after_the_swaps_first_commit_failed_erase_request_kept(wired: Wired) -> None:
    requests = Path(request_folder(str(wired.lake.warehouse), wired.lake.table))
    assert len(list(requests.glob("*.json"))) == 1


def test_merge_table_removal_killed_midway_finished_by_the_next_run(wired: Wired) -> None:
    assert "checkpoints" in wired.sidecar_after_cut_removal  # the kill left them
    assert not wired.after_swap_run.result.committed and wired.after_swap_run.removed == 1


def test_merge_table_after_the_removal_changes_nothing(wired: Wired) -> None:
    assert (wired.idle_run.result.committed, wired.idle_run.removed) == (False, None)
    assert wired.files_after_idle == wired.files_before_idle


def test_rebuild_keeping_dropped_columns_keeps_note_null(wired: Wired) -> None:
    assert [(r["id"], r["note"]) for r in wired.new_generation_rows] == [(1, None), (2, None)]
