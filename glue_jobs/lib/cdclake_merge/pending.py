"""Which change files wait for a lake table, read without Spark: the last commit's checkpoint
and the merge's own listing from its positions.

The merge run, ``cdclake status``, ``cdclake dispatch`` and the dispatcher Lambda ask the same
question the same way: the newest completed commit in ``<table>/.hoodie/`` names the run's
checkpoint in its extra metadata (``_cdclake.checkpoint``, see :mod:`cdclake_merge.hudi`), the
checkpoint holds a position per change folder, and :func:`cdclake_merge.positions.scan` lists
each folder after it. Nothing here imports Spark or the CDK: a Lambda with boto3 runs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cdclake_merge.positions import ChangeFile, FolderPosition, positions_from_json, scan
from cdclake_merge.storage import FileSystem, join

COMMIT_METADATA_PREFIX = "_cdclake."
CHECKPOINT_KEY = COMMIT_METADATA_PREFIX + "checkpoint"
SIDECAR = "_cdclake"  # beside the tables of a database, never inside one
COMPLETED = (".commit", ".deltacommit")
# Compaction (MERGE_ON_READ) and clean instants carry no checkpoint: look this far back.
CHECKPOINT_SEARCH = 50
# In the sidecar, written before a commit that registers the table in the catalog and removed
# once it did: while it names a committed version, that version is not (fully) in the catalog.
CATALOG_UNSYNCED = "catalog-unsynced.json"


@dataclass(frozen=True)
class TablePaths:
    """Where ``DATABASE.TABLE`` lives under a warehouse (Hive layout)."""

    root: str  # the Hudi table
    timeline: str  # its .hoodie/
    sidecar: str  # the merge's checkpoints and tombstones

    @staticmethod
    def of(warehouse: str, table: str) -> TablePaths:
        database, _, name = table.partition(".")
        if not database or not name or "." in name:
            raise ValueError(f"table must be DATABASE.TABLE, got {table!r}")
        root = join(warehouse, f"{database}.db", name)
        sidecar = join(warehouse, f"{database}.db", SIDECAR, name)
        return TablePaths(root, join(root, ".hoodie"), sidecar)


class LazyTimeline(Mapping[str, str]):
    """``{instant file name: its JSON}`` of the named completed instants, each file read when
    first looked up: :func:`newest_checkpoint_name` walks newest first and stops at the first
    commit naming a checkpoint, so a dispatcher turn reads one commit file a table (two after
    a MERGE_ON_READ compaction), not every one it might have to look at."""

    def __init__(self, fs: FileSystem, timeline: str, names: list[str]) -> None:
        self._fs, self._timeline, self._names = fs, timeline, names
        self._read: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._read:
            self._read[name] = self._fs.read_text(join(self._timeline, name))
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def newest_checkpoint_name(timeline: Mapping[str, str]) -> str | None:
    """From ``{instant file name: its JSON}``, the checkpoint the newest commit names; only
    the commits newer than it are looked up."""
    for name in sorted(timeline, reverse=True):
        if not name.endswith(COMPLETED):
            continue
        extra = json.loads(timeline[name] or "{}").get("extraMetadata") or {}
        if CHECKPOINT_KEY in extra:
            return str(extra[CHECKPOINT_KEY])
    return None


def newest_checkpoint(fs: FileSystem, paths: TablePaths) -> dict[str, Any] | None:
    """The checkpoint the newest commit names, with ``exists`` (False: runs before the table's
    first row, which record applied input only); None where no run has committed.

    ValueError where the folder is a Hudi table the merge did not write.
    """
    names = [n for n in fs.list_dir(paths.timeline) if n.endswith(COMPLETED)]
    newest = sorted(names, reverse=True)[:CHECKPOINT_SEARCH]
    name = newest_checkpoint_name(LazyTimeline(fs, paths.timeline, newest))
    if name is not None:
        return {**json.loads(fs.read_text(join(paths.sidecar, name))), "exists": True}
    if names:
        raise ValueError(f"{paths.root} is a Hudi table the merge did not write (no checkpoint)")
    standalone = join(paths.sidecar, "checkpoints", "standalone.json")
    if fs.exists(standalone):
        return {**json.loads(fs.read_text(standalone)), "exists": False}
    return None


def unsynced_version(fs: FileSystem, sidecar: str) -> int | None:
    """The version whose catalog registration has not finished (None: all done).

    A marker of the version after the newest commit belongs to a run killed before its
    commit: that version does not exist, and the next run's commit writes it again.
    """
    marker = join(sidecar, CATALOG_UNSYNCED)
    if not fs.exists(marker):
        return None
    return int(json.loads(fs.read_text(marker))["version"])


@dataclass(frozen=True)
class Pending:
    """The change files no commit of a table has applied, oldest first in :attr:`oldest`."""

    files: tuple[ChangeFile, ...]
    catalog_unsynced: bool = False  # the last commit's catalog registration did not finish

    @property
    def oldest(self) -> float | None:
        """When the longest-waiting file was written (epoch seconds); None: nothing waits."""
        return min((f.modified for f in self.files), default=None)


def pending_files(
    fs: FileSystem,
    changes: str,
    positions: Mapping[str, FolderPosition],
    legacy_applied: frozenset[str] | None = None,
) -> tuple[ChangeFile, ...]:
    """The merge's own listing (:func:`~cdclake_merge.positions.scan`) from these positions."""
    return scan(fs, changes, positions, legacy_applied).pending


def table_pending(fs: FileSystem, *, warehouse: str, table: str, changes: str) -> Pending:
    """What waits for ``DATABASE.TABLE`` under ``warehouse``, from its last commit."""
    paths = TablePaths.of(warehouse, table)
    checkpoint = newest_checkpoint(fs, paths) or {}
    legacy = checkpoint.get("applied_files")
    files = pending_files(
        fs,
        changes,
        positions_from_json(checkpoint.get("positions")),
        frozenset(legacy) if legacy is not None else None,
    )
    version = int(checkpoint.get("version", 0))
    unsynced = bool(checkpoint.get("exists")) and unsynced_version(fs, paths.sidecar) not in (
        None,
        version + 1,
    )
    return Pending(files, unsynced)
