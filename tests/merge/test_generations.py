"""cdclake_merge.generations without Spark (issue #49): when a rebuild has caught up, how its
runs learn from Debezium's notifications that its incremental snapshot finished, where those
are, and the columns a rebuild keeping dropped columns starts from."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.generations import (
    Generations,
    begin_rebuild,
    begin_signalled,
    caught_up,
    kept_columns,
    notifications_beside,
    read_generations,
    record_signal,
    snapshot_finished,
)
from cdclake_merge.positions import FolderPosition
from cdclake_merge.storage import LocalFileSystem

BUILDING = Generations(building=2)
FOLDER = "partition=0"


def _at(name: str) -> dict[str, FolderPosition]:
    return {"": FolderPosition(parent=True), FOLDER: FolderPosition(recent=((name, 1, "t"),))}


def test_caught_up_snapshot_not_finished_false() -> None:
    assert not caught_up(BUILDING, _at("f+0000000009.json"), _at("f+0000000009.json"), False)


def test_caught_up_a_folder_behind_its_end_false() -> None:
    assert not caught_up(BUILDING, _at("f+0000000009.json"), _at("f+0000000005.json"), True)


def test_caught_up_every_folder_at_its_end_true() -> None:
    assert caught_up(BUILDING, _at("f+0000000009.json"), _at("f+0000000009.json"), True)


def test_caught_up_a_folder_the_generation_never_read_false() -> None:
    ends = {**_at("f+0000000009.json"), "partition=1": FolderPosition(after="g+01.json")}
    assert not caught_up(BUILDING, ends, _at("f+0000000009.json"), True)


def _notification(id_: str, type_: str, *, schema: bool = True) -> dict[str, Any]:
    value = {
        "id": id_,
        "aggregate_type": "Incremental Snapshot",
        "type": type_,
        "additional_data": {"connector_name": "cdclake-local", "data_collections": "public.t"},
        "timestamp": "1764350000000",
    }
    return {"schema": {"type": "struct", "fields": []}, "payload": value} if schema else value


def _notifications(root: Path, *values: dict[str, Any]) -> str:
    folder = root / "topics" / "cdclake-local.notifications" / "partition=0"
    folder.mkdir(parents=True)
    text = "".join(json.dumps(v) + "\n" for v in values)
    (folder / "cdclake-local.notifications+0+0000000000.json").write_text(text)
    return str(folder.parent)


def test_snapshot_finished_completed_notification_of_the_signal_true(tmp_path: Path) -> None:
    path = _notifications(
        tmp_path, _notification("snap-1", "STARTED"), _notification("snap-1", "COMPLETED")
    )
    assert snapshot_finished(LocalFileSystem(), path, "snap-1")


def test_snapshot_finished_without_schema_envelope_true(tmp_path: Path) -> None:
    path = _notifications(tmp_path, _notification("snap-1", "COMPLETED", schema=False))
    assert snapshot_finished(LocalFileSystem(), path, "snap-1")


def test_snapshot_finished_only_started_and_scanned_false(tmp_path: Path) -> None:
    path = _notifications(
        tmp_path,
        _notification("snap-1", "STARTED"),
        _notification("snap-1", "TABLE_SCAN_COMPLETED"),
    )
    assert not snapshot_finished(LocalFileSystem(), path, "snap-1")


def test_snapshot_finished_another_snapshots_completion_false(tmp_path: Path) -> None:
    path = _notifications(tmp_path, _notification("snap-0", "COMPLETED"))
    assert not snapshot_finished(LocalFileSystem(), path, "snap-1")


def test_snapshot_finished_no_notifications_yet_false(tmp_path: Path) -> None:
    assert not snapshot_finished(LocalFileSystem(), str(tmp_path / "none"), "snap-1")


def test_notifications_beside_the_tables_topic_folder() -> None:
    changes = "s3://changes/topics/cdclake-dev.public.orders/"
    assert notifications_beside(changes, "public.orders") == (
        "s3://changes/topics/cdclake-dev.notifications/"
    )


def test_notifications_beside_a_folder_not_the_tables_topic_refused() -> None:
    with pytest.raises(ValueError, match=r"is not the topic of public\.orders"):
        notifications_beside("/changes/elsewhere/", "public.orders")


def test_kept_columns_dropped_column_stays_changed_type_taken() -> None:
    live = [("id", "int"), ("amount", "decimal(10,2)"), ("note", "string")]
    new = [("id", "int"), ("amount", "decimal(14,4)"), ("region", "string")]
    assert kept_columns(live, new) == [
        ("id", "int"),
        ("amount", "decimal(14,4)"),
        ("note", "string"),
        ("region", "string"),
    ]


def test_rebuild_step_table_keeping_history_refused_nothing_begun(tmp_path: Path) -> None:
    from cdclake_merge.job import MergeOptions
    from cdclake_merge.rebuild import rebuild_step
    from cdclake_merge.sink import open_sink

    fs = LocalFileSystem()

    def generation_sink(generation: int, catalog: bool) -> Any:
        return open_sink(
            warehouse=str(tmp_path / "warehouse"),
            table="db.t",
            key=("id",),
            fs=fs,
            spark_factory=lambda: None,
            sync_catalog=catalog,
            generation=generation,
            history=1,
        )

    options = MergeOptions(table="db.t", key=("id",), changes=str(tmp_path / "changes"))
    with pytest.raises(ValueError, match=r"db\.t keeps its history .*nothing was begun"):
        rebuild_step(lambda: None, fs, generation_sink, options, snapshot_done=True)  # type: ignore[arg-type,return-value]
    assert not list(tmp_path.rglob("generations.json"))


@pytest.mark.parametrize(("sync_catalog", "history"), [(True, True), (False, False)])
def test_open_sink_generation_being_built_keeps_no_history(
    tmp_path: Path, sync_catalog: bool, history: bool
) -> None:
    # A rebuild opens the generation it builds without the catalog: its snapshot reads restate
    # rows, and as history rows they would open a second current version of every key.
    from cdclake_merge.sink import open_sink

    sink = open_sink(
        warehouse=str(tmp_path),
        table="db.t",
        key=("id",),
        fs=LocalFileSystem(),
        spark_factory=lambda: None,
        sync_catalog=sync_catalog,
        generation=2,
        history=1,
    )
    assert sink.history is history


def _signalled(tmp_path: Path, signal: Any) -> Generations:
    """A rebuild of a table whose change folder is empty, begun and signalled."""
    (tmp_path / "changes").mkdir(exist_ok=True)
    sidecar = str(tmp_path / "_cdclake" / "public_orders")
    return begin_signalled(LocalFileSystem(), sidecar, str(tmp_path / "changes"), signal)


def test_begin_signalled_records_the_id_before_sending_it(tmp_path: Path) -> None:
    sent: list[tuple[str, Generations]] = []
    sidecar = str(tmp_path / "_cdclake" / "public_orders")

    def signal(signal_id: str) -> None:  # what a reader of the state sees while it is sent
        sent.append((signal_id, read_generations(LocalFileSystem(), sidecar)))

    state = _signalled(tmp_path, signal)
    assert state.building == 2 and state.snapshot_id is not None
    assert sent == [(state.snapshot_id, replace(state, signal_sent=False))] and state.signal_sent


def test_begin_signalled_rebuild_already_signalled_sends_nothing(tmp_path: Path) -> None:
    sent: list[str] = []
    first = _signalled(tmp_path, sent.append)
    again = _signalled(tmp_path, sent.append)
    assert again == first and sent == [first.snapshot_id]


def test_begin_signalled_failed_signal_sends_the_same_id_next_time(tmp_path: Path) -> None:
    def refused(signal_id: str) -> None:  # it may have reached the table before failing
        raise ConnectionError("the database is unreachable")

    with pytest.raises(ConnectionError):
        _signalled(tmp_path, refused)
    sidecar = str(tmp_path / "_cdclake" / "public_orders")
    left = read_generations(LocalFileSystem(), sidecar)
    assert left.building == 2 and left.snapshot_id is not None and not left.signal_sent
    sent: list[str] = []
    retried = _signalled(tmp_path, sent.append)
    assert retried.signal_sent and sent == [left.snapshot_id] == [retried.snapshot_id]


def test_begin_signalled_killed_between_record_and_signal_sends_the_recorded_id(
    tmp_path: Path,
) -> None:
    (tmp_path / "changes").mkdir()
    sidecar = str(tmp_path / "_cdclake" / "public_orders")
    begin_rebuild(LocalFileSystem(), sidecar, str(tmp_path / "changes"))
    record_signal(LocalFileSystem(), sidecar, "snap-1")  # then the process was killed
    sent: list[str] = []
    state = _signalled(tmp_path, sent.append)
    assert sent == ["snap-1"] and state.snapshot_id == "snap-1" and state.signal_sent
    assert read_generations(LocalFileSystem(), sidecar) == state
