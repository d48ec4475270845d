"""Erasing a key from the change files: its lines gone, gzip kept, the rewrite still applied."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cdclake_merge.erase import KeyStillPresent, clean_table, erase_change_files, keep_applied
from cdclake_merge.pending import CHECKPOINT_KEY, TablePaths
from cdclake_merge.positions import FolderPosition, positions_as_json, scan
from cdclake_merge.storage import LocalFileSystem

from .support import Lake, envelope, line

TOPIC = "app.public.orders"
FOLDER = f"{TOPIC}/partition=0"
KEY = {"id": "2"}


def _lines(*ids: int) -> str:
    return "".join(
        line(envelope("c", lsn=10 + i, after={"id": i, "v": f"secret-{i}"})) + "\n" for i in ids
    )


def _world(tmp_path: Path) -> tuple[str, str]:
    """Two applied files (one gzip, one plain and still recent) and the checkpoint naming them."""
    changes = tmp_path / "changes"
    folder = changes / FOLDER
    folder.mkdir(parents=True)
    old = folder / f"{TOPIC}+0+0000000000.json.gz"
    old.write_bytes(gzip.compress(_lines(1, 2).encode()))
    new = folder / f"{TOPIC}+0+0000000002.json"
    new.write_text(_lines(2, 3))
    listed = {e.name: e for e in LocalFileSystem().list_folder(str(folder)).files}
    position = FolderPosition(
        after=old.name, recent=((new.name, listed[new.name].size, listed[new.name].tag),)
    )
    paths = TablePaths.of(str(tmp_path / "wh"), "db.orders")
    Path(paths.timeline).mkdir(parents=True)
    Path(paths.timeline, "20260101000000000.commit").write_text(
        json.dumps({"extraMetadata": {CHECKPOINT_KEY: "checkpoints/v00000001.json"}})
    )
    Path(paths.sidecar, "checkpoints").mkdir(parents=True)
    Path(paths.sidecar, "checkpoints", "v00000001.json").write_text(
        json.dumps(
            {
                "positions": positions_as_json(
                    {
                        "": FolderPosition(parent=True),
                        TOPIC: FolderPosition(parent=True),
                        FOLDER: position,
                    }
                )
            }
        )
    )
    return str(changes), str(tmp_path / "wh")


def test_erase_change_files_key_lines_removed_others_kept(tmp_path: Path) -> None:
    changes, _ = _world(tmp_path)
    erased = erase_change_files(changes, KEY)
    data = b"".join(
        gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        for p in sorted(Path(changes).rglob("*.json*"))
    )
    assert (b"secret-2" not in data, data.count(b"secret-"), erased.lines) == (True, 2, 2)


def test_erase_change_files_rewritten_not_pending(tmp_path: Path) -> None:
    changes, warehouse = _world(tmp_path)
    erased = erase_change_files(changes, KEY)
    keep_applied(warehouse, "db.orders", changes, erased)
    paths = TablePaths.of(warehouse, "db.orders")
    checkpoint = json.loads(Path(paths.sidecar, "checkpoints", "v00000001.json").read_text())
    positions = {f: FolderPosition.from_json(p) for f, p in checkpoint["positions"].items()}
    assert scan(LocalFileSystem(), changes, positions).pending == ()


@dataclass(frozen=True)
class ErasedLake:
    """A lake whose key 2 was inserted, updated twice and deleted, then erased."""

    lake: Lake
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    deleted: int
    refused: str
    version_before_rerun: int
    version_after_rerun: int


def _values_in_table_files(root: Path) -> str:
    """Every value of every data file of the table (parquet pages are compressed: read them),
    the metadata table's files left out."""
    texts = [
        str(pq.read_table(p).to_pylist())
        for p in root.rglob("*.parquet")
        if "metadata" not in p.relative_to(root).parts
    ]
    return "\n".join(texts)


@pytest.fixture(scope="module")
def erased_lake(spark, tmp_path_factory: pytest.TempPathFactory) -> ErasedLake:  # type: ignore[no-untyped-def]
    lake = Lake(spark, tmp_path_factory.mktemp("erase"))
    lake.write("a.json", [_change("c", 1, 10), _change("c", 2, 11)])
    lake.merge()
    lake.write("b.json", [_change("u", 2, 20), _change("u", 2, 21)])
    lake.merge()
    lake.write("c.json", [envelope("d", lsn=30, before={"id": 2})])
    lake.merge()
    before = lake.visible()
    try:
        clean_table(spark, lake.fs, lake.table, _root(lake), {"id": "1"})
        refused = ""
    except KeyStillPresent as exc:
        refused = str(exc)
    deleted = clean_table(spark, lake.fs, lake.table, _root(lake), KEY)
    version = lake.sink.load().version
    lake.merge()
    return ErasedLake(
        lake, before, lake.visible(), deleted, refused, version, lake.sink.load().version
    )


def _change(op: str, id_: int, lsn: int) -> dict[str, Any]:
    return envelope(op, lsn=lsn, after={"id": id_, "v": f"secret-{id_}-{lsn}"})


def _root(lake: Lake) -> str:
    return TablePaths.of(str(lake.warehouse), lake.table).root


@pytest.mark.spark
@pytest.mark.hudi
def test_clean_table_erased_key_in_no_data_file(erased_lake: ErasedLake) -> None:
    assert "secret-2" not in _values_in_table_files(Path(_root(erased_lake.lake)))


@pytest.mark.spark
@pytest.mark.hudi
def test_clean_table_other_keys_unchanged(erased_lake: ErasedLake) -> None:
    assert (erased_lake.after, erased_lake.deleted > 0) == (erased_lake.before, True)


@pytest.mark.spark
@pytest.mark.hudi
def test_clean_table_key_in_table_refused(erased_lake: ErasedLake) -> None:
    assert "still holds the key" in erased_lake.refused


@pytest.mark.spark
@pytest.mark.hudi
def test_clean_table_next_merge_commits_nothing(erased_lake: ErasedLake) -> None:
    assert erased_lake.version_after_rerun == erased_lake.version_before_rerun
