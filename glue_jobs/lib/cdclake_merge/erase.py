"""Erasing a key from the change files (issue #51 item 2, part c): every line holding it is
removed, and the merge's next listing does not take a rewritten file as new.

A change file named at or before its folder's ``after`` is applied whatever its content
(:meth:`~cdclake_merge.positions.FolderPosition.is_applied` compares names only there). A file
still among the folder's ``recent`` is compared by size and tag, and a rewrite changes both:
the newest checkpoint's entry for it is given the rewritten file's size and tag, so it stays
applied. That is safe because the lines removed belong to a key the table no longer holds and
every other line was applied unchanged; nothing the table holds depended on the removed lines.
The erase must not run beside a merge run of the same table (the run's commit would name a
checkpoint written from the old tags).

The lake table (part a): a key is erased only once the table no longer holds it (deleted at the
source and the delete merged); older file versions may still hold it, so Hudi's own clean runs
keeping one version of each file group. That also ends time travel to older commits and the
restore points a clean would otherwise keep: acceptable for an erase, whose purpose is that no
older copy remains. The merge's savepoints (its recovery points) protect their commits' file
versions from any clean, so they are deleted first: a restore to before the erase is no longer
possible.

Not here yet: MERGE_ON_READ (a compaction of the file groups before the clean), the history
table (part b), quarantine files and S3 (only local paths are rewritten).
"""

from __future__ import annotations

import gzip
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from cdclake_merge.pending import COMPLETED, LazyTimeline, TablePaths, newest_checkpoint_name
from cdclake_merge.positions import FolderPosition
from cdclake_merge.recovery import HudiProcedures
from cdclake_merge.storage import FileSystem, LocalFileSystem, is_input, join, local_path


class KeyStillPresent(ValueError):
    """The lake table still holds the key: it was not deleted at the source, or not merged."""


def _holds(key: Mapping[str, str]) -> Column:
    condition = F.lit(True)
    for column, value in key.items():
        condition = condition & (F.col(column).cast("string") == F.lit(value))
    return condition


def clean_table(
    spark: SparkSession, fs: FileSystem, table: str, root: str, key: Mapping[str, str]
) -> int:
    """Removes every file version but the latest of ``table`` (registered in the session's
    catalog: Hudi 0.15's run_clean takes a table name only, not a path) once its current rows
    hold no row of the key, after deleting every savepoint; returns how many files the clean
    deleted."""
    current = spark.read.format("hudi").load(root)
    if current.filter(_holds(key)).limit(1).count():
        raise KeyStillPresent(
            f"{table} still holds the key: delete it at the source and merge before erasing"
        )
    procedures = HudiProcedures(spark, root)
    # A savepoint keeps every file version of its commit from the clean: a restore point
    # before the erase would keep the key, so it goes (the table's next runs keep new ones).
    for name in fs.list_dir(join(root, ".hoodie")):
        if name.endswith(".savepoint"):
            procedures.delete_savepoint(name.removesuffix(".savepoint"))
    rows = spark.sql(
        f"CALL run_clean(table => '{table}', clean_policy => 'KEEP_LATEST_FILE_VERSIONS',"
        " file_versions_retained => 1)"
    ).collect()
    return sum(int(r["total_files_deleted"] or 0) for r in rows)


@dataclass(frozen=True)
class ErasedFiles:
    """The change files rewritten without the key and how many lines each lost."""

    rewritten: tuple[tuple[str, int], ...]  # (path, lines removed)

    @property
    def lines(self) -> int:
        return sum(n for _, n in self.rewritten)


def _images(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The row images a change line carries: an envelope's before/after or a flat row."""
    payload = event.get("payload", event)
    if not isinstance(payload, Mapping):
        return []
    images = [payload.get("before"), payload.get("after")]
    found = [i for i in images if isinstance(i, Mapping)]
    return found or [payload]


def holds_key(text: str, key: Mapping[str, str]) -> bool:
    """True where the line is a change of the key (its before or after image has every key
    column equal, compared as text: the operator typed the values)."""
    try:
        event = json.loads(text)
    except ValueError:
        return False
    if not isinstance(event, Mapping):
        return False
    return any(
        all(column in image and str(image[column]) == value for column, value in key.items())
        for image in _images(event)
    )


def erase_lines(data: bytes, compressed: bool, key: Mapping[str, str]) -> tuple[bytes, int]:
    """The file's bytes without the key's lines (compressed again where they were)."""
    text = (gzip.decompress(data) if compressed else data).decode()
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if not holds_key(line, key)]
    removed = len(lines) - len(kept)
    if not removed:
        return data, 0
    body = "".join(kept).encode()
    return (gzip.compress(body, mtime=0) if compressed else body), removed


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def erase_change_files(changes: str, key: Mapping[str, str]) -> ErasedFiles:
    """Rewrites every change file under ``changes`` (a local folder) without the key's lines."""
    rewritten: list[tuple[str, int]] = []
    for path in LocalFileSystem().list_files(local_path(changes)):
        if not is_input(path):
            continue
        file = Path(path)
        data, removed = erase_lines(file.read_bytes(), path.endswith(".gz"), key)
        if removed:
            _replace(file, data)
            rewritten.append((path, removed))
    return ErasedFiles(tuple(rewritten))


def keep_applied(warehouse: str, table: str, changes: str, erased: ErasedFiles) -> int:
    """Gives the newest checkpoint's recent entries of rewritten files their new size and tag
    (see the module's docstring); returns how many entries changed."""
    fs = LocalFileSystem()
    paths = TablePaths.of(warehouse, table)
    names = [n for n in fs.list_dir(paths.timeline) if n.endswith(COMPLETED)]
    named = newest_checkpoint_name(LazyTimeline(fs, paths.timeline, names))
    if named is None:
        return 0
    checkpoint_path = join(paths.sidecar, named)
    checkpoint = json.loads(fs.read_text(checkpoint_path))
    root = local_path(changes).rstrip("/")
    # Each rewritten file's size and tag as the merge's listing now gives them.
    rewritten = {os.path.relpath(path, root).rpartition("/")[::2] for path, _ in erased.rewritten}
    new_tags: dict[tuple[str, str], tuple[int, str]] = {}
    for folder in {folder for folder, _ in rewritten}:
        for entry in fs.list_folder(join(root, folder) if folder else root).files:
            if (folder, entry.name) in rewritten:
                new_tags[(folder, entry.name)] = (entry.size, entry.tag)
    changed = 0
    positions = checkpoint.get("positions") or {}
    for folder, value in positions.items():
        position = FolderPosition.from_json(value)
        recent = []
        for n, s, t in position.recent:
            if (folder, n) in new_tags:
                s, t = new_tags[(folder, n)]
                changed += 1
            recent.append((n, s, t))
        positions[folder] = FolderPosition(position.after, tuple(recent), position.parent).as_json()
    if changed:
        fs.write_text(checkpoint_path, json.dumps(checkpoint))
    return changed
