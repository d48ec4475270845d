"""Erasing a key from the change files (issue #51 item 2, part c): every line holding it is
removed, and the merge's next listing does not take a rewritten file as new.

A change file named at or before its folder's ``after`` is applied whatever its content
(:meth:`~cdclake_merge.positions.FolderPosition.is_applied` compares names only there). A file
still among the folder's ``recent`` is compared by size and tag, and a rewrite changes both:
the newest checkpoint's entry for it is given the rewritten file's size and tag, so it stays
applied. That is safe because the lines removed belong to a key the table no longer holds and
every other line was applied unchanged; nothing the table holds depended on the removed lines
(a snapshot's end the table keeps in its checkpoint; a replay from scratch would miss it:
docs/reliability.md).
The erase must not run beside a merge run of the same table (the run's commit would name a
checkpoint written from the old tags).

The lake table (part a): a key is erased only once the table no longer holds it (deleted at the
source and the delete merged); older file versions may still hold it, so Hudi's own clean runs
keeping one version of each file group. That also ends time travel to older commits and the
restore points a clean would otherwise keep: acceptable for an erase, whose purpose is that no
older copy remains. The merge's savepoints (its recovery points) protect their commits' file
versions from any clean, so they are deleted first: a restore to before the erase is no longer
possible. Then Hudi's metadata table goes, whose record index names the key (:func:`_clean`).

The history table (part b) loses every version of the key, then is cleaned the same way; the
quarantine's rows of the key and the replays' copies go (:func:`erase_quarantine`).

Change files, quarantine and checkpoints are read and written through :class:`FileSystem`:
local folders, Hadoop's (Glue's S3) and boto3's S3 alike.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from cdclake_merge.generations import Generations
from cdclake_merge.history import HISTORY_SUFFIX, SOURCE_DATE
from cdclake_merge.hudi import HudiTable
from cdclake_merge.hudi_options import hudi_options
from cdclake_merge.pending import COMPLETED, LazyTimeline, TablePaths, newest_checkpoint_name
from cdclake_merge.positions import FolderPosition, scan
from cdclake_merge.recovery import HudiProcedures
from cdclake_merge.replay import LINES, REPLAYS
from cdclake_merge.sink import Sink
from cdclake_merge.storage import (
    FileSystem,
    S3FileSystem,
    is_s3,
    join,
    list_folder,
)
from cdclake_merge.transforms import ORDER


class KeyStillPresent(ValueError):
    """The lake table still holds the key: it was not deleted at the source, or not merged."""


def refuse_unreachable_generations(state: Generations, table: str) -> None:
    """ValueError where a generation beside the live one holds rows erase would not reach: a
    rebuild in progress (its generation is still being written), or the generation a swap
    replaced, kept until the live generation's next commit removes it."""
    if state.building is not None:
        raise ValueError(
            f"a rebuild of {table} (generation {state.building}) is in progress: erase once "
            "it is swapped in"
        )
    if state.retired is not None:
        raise ValueError(
            f"generation {state.retired} of {table}, which a rebuild's swap replaced, still "
            "holds its older rows: run a merge (its first commit removes it), then erase"
        )


def _holds(key: Mapping[str, str]) -> Column:
    condition = F.lit(True)
    for column, value in key.items():
        condition = condition & (F.col(column).cast("string") == F.lit(value))
    return condition


@dataclass(frozen=True)
class LakeErasure:
    """What an erase did to a table and its history: files the cleans deleted, history rows."""

    files_deleted: int
    history_rows: int
    history_files_deleted: int


def _clean(spark: SparkSession, fs: FileSystem, table: str, root: str) -> int:
    """Deletes every savepoint of the table at ``root``, then runs Hudi 0.15's run_clean on
    ``table`` (its catalog name: run_clean takes no path) keeping one version of each file
    group, then deletes the table's metadata table; returns how many files the clean deleted.

    The metadata table's record index names every key the table held, a deleted one in its
    log blocks until the metadata table compacts and cleans, whatever the erase's clean found
    to do. Deleted whole, it holds no copy; the table's next commit builds it again from the
    table's files (a listing, and a read of every key), the erased key not among them."""
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
    spark.sql(f"CALL delete_metadata_table(table => '{table}')").collect()
    return sum(int(r["total_files_deleted"] or 0) for r in rows)


def _uri(path: str) -> str:
    return path if "://" in path else "file://" + path


def _erase_history(spark: SparkSession, sink: HudiTable, key: Mapping[str, str]) -> int:
    """Deletes every version of the key from ``<table>_history`` (Hudi deletes by the record
    keys a read filtered on the key columns finds); returns how many rows went."""
    history = spark.read.format("hudi").load(_uri(sink.history_root))
    # Hudi's own columns are the stored record's, not the writer's.
    own = [c for c in history.columns if not c.startswith("_hoodie_")]
    rows = history.filter(_holds(key)).select(*(f"`{c}`" for c in own)).cache()
    try:
        count = rows.count()
        if count:
            # The history's own keys and partitioning (HudiTable.write_history's).
            options = hudi_options(
                database=sink.database,
                table=f"{sink.name}{HISTORY_SUFFIX}",
                record_key=(*sink.key, ORDER),
                partition_fields=(SOURCE_DATE,),
                operation="delete",
                retain_hours=sink.retain_hours,
                clean_every_commits=sink.clean_every_commits,
                sync_catalog=sink.sync_catalog,
            )
            rows.write.format("hudi").options(**options).mode("append").save(
                _uri(sink.history_root)
            )
        return count
    finally:
        rows.unpersist()


def erase_lake(spark: SparkSession, sink: HudiTable, key: Mapping[str, str]) -> LakeErasure:
    """Removes the key from every file of ``sink``'s table (registered in the session's
    catalog) and of its history table, if it has one, once its current rows hold no row of
    the key. On MERGE_ON_READ a compaction first rewrites every file group with log files:
    a log file read together with its base file would otherwise keep the key's older images
    through the clean, which keeps a file group's latest slice whole."""
    current = spark.read.format("hudi").load(_uri(sink.root))
    if current.filter(_holds(key)).limit(1).count():
        raise KeyStillPresent(
            f"{sink.table} still holds the key: delete it at the source and merge before erasing"
        )
    if sink.table_type == "MERGE_ON_READ":
        # Scheduled now whatever the table's trigger (every few delta commits) says.
        spark.sql(
            f"CALL run_compaction(op => 'scheduleAndExecute', path => '{sink.root}',"
            " options => 'hoodie.compact.inline.max.delta.commits=1')"
        )
    deleted = _clean(spark, sink.fs, sink.table, sink.root)
    history_rows = history_deleted = 0
    if sink.fs.exists(join(sink.history_root, ".hoodie")):
        history_rows = _erase_history(spark, sink, key)
        history_deleted = _clean(spark, sink.fs, f"{sink.table}{HISTORY_SUFFIX}", sink.history_root)
    return LakeErasure(deleted, history_rows, history_deleted)


@dataclass(frozen=True)
class ErasedFiles:
    """The files rewritten without the key and how many lines each lost."""

    rewritten: tuple[tuple[str, int], ...]  # (path, lines removed)
    # Each rewritten change file as the merge's positions name it: (folder under the change
    # root, file name); keep_applied finds its checkpoint entry by these.
    relative: tuple[tuple[str, str], ...] = ()

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


def erase_change_files(fs: FileSystem, changes: str, key: Mapping[str, str]) -> ErasedFiles:
    """Rewrites every change file under ``changes`` without the key's lines (gzip kept gzip).

    S3 objects go through boto3 whatever ``fs`` is, as the merge lists them
    (:func:`~cdclake_merge.storage.list_folder`): Hadoop's S3A follows a write with a delete
    of every parent folder's marker object, which the merge job's role may not do on the
    change bucket (tests/iam)."""
    if is_s3(changes) and not isinstance(fs, S3FileSystem):
        fs = S3FileSystem()
    rewritten: list[tuple[str, int]] = []
    relative: list[tuple[str, str]] = []
    # No positions: the merge's own walk and listing of every change file, applied or not.
    for file in scan(fs, changes, {}).pending:
        data, removed = erase_lines(fs.read_bytes(file.path), file.name.endswith(".gz"), key)
        if removed:
            fs.write_bytes(file.path, data)
            rewritten.append((file.path, removed))
            relative.append((file.folder, file.name))
    return ErasedFiles(tuple(rewritten), tuple(relative))


def _quarantined_holds_key(text: str, key: Mapping[str, str]) -> bool:
    """True where a quarantine row (``{source_file, line, reason, raw}``) quarantined a line
    of the key."""
    try:
        row = json.loads(text)
    except ValueError:
        return False
    return isinstance(row, Mapping) and holds_key(str(row.get("raw", "")), key)


def erase_quarantine(fs: FileSystem, root: str, key: Mapping[str, str]) -> ErasedFiles:
    """Rewrites the table's quarantine under ``root`` without the key's lines: the rows of
    every commit's (or failed run's) folder whose raw line holds it, and the replays' copies
    of the lines they applied (:mod:`cdclake_merge.replay`'s layout).

    A replay cannot apply a rewritten file's other lines twice: a quarantined line's id is its
    folder, source file and line number, which the row carries itself, so the ledgers'
    applied ids still name the same lines; and the removed rows are the erased key's, which
    no replay may bring back."""
    rewritten: list[tuple[str, int]] = []
    for path in fs.list_files(root):
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".json") or name.startswith((".", "_")):
            continue
        replayed = path.rsplit("/", 3)[-3] == REPLAYS and name == LINES
        # Rows end at "\n" only: a raw line may hold U+2028 unescaped.
        lines = fs.read_text(path).split("\n")
        if replayed:
            kept = [text for text in lines if not holds_key(text, key)]
        else:
            kept = [text for text in lines if not _quarantined_holds_key(text, key)]
        if len(kept) < len(lines):
            fs.write_text(path, "\n".join(kept))
            rewritten.append((path, len(lines) - len(kept)))
    return ErasedFiles(tuple(rewritten))


def keep_applied(fs: FileSystem, paths: TablePaths, changes: str, erased: ErasedFiles) -> int:
    """Gives the newest checkpoint's recent entries of rewritten files their new size and tag
    (see the module's docstring); returns how many entries changed."""
    names = [n for n in fs.list_dir(paths.timeline) if n.endswith(COMPLETED)]
    named = newest_checkpoint_name(LazyTimeline(fs, paths.timeline, names))
    if named is None:
        return 0
    checkpoint_path = join(paths.sidecar, named)
    checkpoint = json.loads(fs.read_text(checkpoint_path))
    rewritten = set(erased.relative)
    # Each rewritten file's size and tag as the merge's next listing gives them.
    new_tags: dict[tuple[str, str], tuple[int, str]] = {}
    for folder in {folder for folder, _ in rewritten}:
        for entry in list_folder(fs, join(changes, folder) if folder else changes).files:
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


@dataclass(frozen=True)
class Erasure:
    """What :func:`erase_key` did, everywhere it reaches; counts only, never the key's values
    (a Glue run prints it to its log)."""

    lake: LakeErasure
    change_files: ErasedFiles
    quarantine: ErasedFiles
    checkpoint_entries: int

    def as_dict(self) -> dict[str, int]:
        return {
            "table_files_deleted": self.lake.files_deleted,
            "history_rows": self.lake.history_rows,
            "history_files_deleted": self.lake.history_files_deleted,
            "change_files": len(self.change_files.rewritten),
            "change_lines": self.change_files.lines,
            "quarantine_files": len(self.quarantine.rewritten),
            "quarantine_lines": self.quarantine.lines,
            "checkpoint_entries": self.checkpoint_entries,
        }


def erase_key(
    spark: SparkSession,
    sink: Sink,
    fs: FileSystem,
    *,
    changes: str,
    quarantine_root: str,
    key: Mapping[str, str],
) -> Erasure:
    """Erases the key from ``sink``'s table (its live generation) and history, the change
    files under ``changes`` and every generation's quarantine under ``quarantine_root``;
    ``fs`` reaches all of them and the sink's sidecar (the Glue job's Hadoop file system, or
    the operator's disk and S3). :class:`KeyStillPresent` before anything is changed when the
    table still holds the key. Run as the table's job, one run at a time, or locally with no
    merge running: a merge beside it would commit a checkpoint of the files' old tags."""
    if not isinstance(sink, HudiTable):
        raise ValueError(f"{sink.table}: erase needs a Hudi table sink")
    lake = erase_lake(spark, sink, key)
    files = erase_change_files(fs, changes, key)
    paths = TablePaths(sink.root, sink.timeline, sink.sidecar)
    kept = keep_applied(fs, paths, changes, files)
    return Erasure(lake, files, erase_quarantine(fs, quarantine_root, key), kept)
