"""Erasing a key from the change files: its lines gone, gzip kept, the rewrite still applied."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from cdclake_merge.erase import erase_change_files, keep_applied
from cdclake_merge.pending import CHECKPOINT_KEY, TablePaths
from cdclake_merge.positions import FolderPosition, positions_as_json, scan
from cdclake_merge.storage import LocalFileSystem

from .support import envelope, line

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
