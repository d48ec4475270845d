"""A lake table's recovery horizon: a Hudi savepoint a day, the newest ``keep_days`` kept, and
a restore to one of them.

Hudi's cleaner keeps every file a savepoint needs, so a savepoint reaches back past the
cleaner's retention (``lake.retain_hours``). A restore rolls the table back to a savepoint;
the newest commit left names the merge's checkpoint of that version, so the next merge run
applies again every change file after it (change files outlive the savepoints:
``lake.change_file_expiration_days`` is at least ``lake.savepoint_days``, config checks it).

Which savepoints exist is read from the timeline's file names (``<instant>.savepoint``),
without Spark; creating, deleting and restoring go through Hudi's own Spark SQL procedures.
Hudi writes instant times in the table's timeline time zone, which on Glue is UTC.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdclake_merge.pending import (
    CHECKPOINT_SEARCH,
    COMPLETED,
    LazyTimeline,
    TablePaths,
    newest_checkpoint_name,
)
from cdclake_merge.storage import FileSystem, join

# lake.retain_hours' and lake.savepoint_days' defaults, for runs by hand without them.
DEFAULT_RETAIN_HOURS = 24
DEFAULT_SAVEPOINT_DAYS = 7
SAVEPOINT_SUFFIX = ".savepoint"
SAVEPOINT_EVERY = dt.timedelta(days=1)
INSTANT_FORMAT = "%Y%m%d%H%M%S%f"  # Hudi's yyyyMMddHHmmssSSS, milliseconds padded here


class RestoreError(ValueError):
    """A restore that cannot be made; the message names the table and what there is."""


@dataclass
class RecoveryChange:
    """What one run did to the table's savepoints and the merge's own files beside it."""

    created: str | None = None
    deleted: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)  # sidecar paths no restore can need


def instant_time(instant: str) -> dt.datetime:
    """A Hudi instant (``20261128040935895``) as a UTC datetime."""
    digits = instant[:17]
    if len(digits) < 14 or not digits.isdigit():
        raise ValueError(f"not a Hudi instant time: {instant!r}")
    return dt.datetime.strptime(digits.ljust(20, "0"), INSTANT_FORMAT).replace(tzinfo=dt.UTC)


def savepoints_in(timeline_files: Iterable[str]) -> list[str]:
    """The completed savepoints among a timeline folder's file names, oldest first."""
    return sorted(
        name.removesuffix(SAVEPOINT_SUFFIX)
        for name in timeline_files
        if name.endswith(SAVEPOINT_SUFFIX) and name.removesuffix(SAVEPOINT_SUFFIX).isdigit()
    )


def savepoint_due(savepoints: Sequence[str], newest_commit: str, now: dt.datetime) -> bool:
    """Whether the newest commit should be savepointed: none yet, or the newest is a day old."""
    if not savepoints:
        return True
    newest = max(savepoints)
    return newest != newest_commit and now - instant_time(newest) >= SAVEPOINT_EVERY


def expired_savepoints(savepoints: Sequence[str], now: dt.datetime, keep_days: int) -> list[str]:
    """Savepoints older than ``keep_days``; the newest is never one of them (it is the
    horizon's last resort, however old)."""
    ordered = sorted(savepoints)
    horizon = now - dt.timedelta(days=keep_days)
    return [s for s in ordered[:-1] if instant_time(s) < horizon]


def version_of(name: str) -> int | None:
    """The version a sidecar entry was written at (``v00000007.json``, ``v00000007``)."""
    stem = name.removesuffix(".json")
    return int(stem[1:]) if stem[:1] == "v" and stem[1:].isdigit() else None


def sidecar_garbage(
    checkpoints: Iterable[str],
    tombstone_sets: Iterable[str],
    oldest_kept: int,
    oldest_sets: Iterable[str],
) -> list[str]:
    """The merge's sidecar entries no restore can need, as paths under the sidecar.

    ``oldest_kept`` is the version of the checkpoint the oldest savepoint's commit names:
    every checkpoint before it goes. A tombstone set is named after the version that wrote
    it and later checkpoints list only sets they carry over or write, so a set older than
    ``oldest_kept`` is needed only if that checkpoint (``oldest_sets``) still lists it.
    """
    keep_sets = set(oldest_sets)
    garbage = [
        f"checkpoints/{name}"
        for name in sorted(checkpoints)
        if (version := version_of(name)) is not None and version < oldest_kept
    ]
    garbage += [
        f"tombstones/{name}"
        for name in sorted(tombstone_sets)
        if (version := version_of(name)) is not None
        and version < oldest_kept
        and f"tombstones/{name}" not in keep_sets
    ]
    return garbage


def restore_point(table: str, savepoints: Sequence[str], to: dt.datetime | None) -> str:
    """The savepoint a restore ``to`` a time goes back to: the newest at or before it (the
    newest of all for None). RestoreError naming what there is otherwise."""
    eligible = [s for s in sorted(savepoints) if to is None or instant_time(s) <= to]
    if eligible:
        return eligible[-1]
    if not savepoints:
        raise RestoreError(f"table {table} has no savepoint to restore to")
    oldest = instant_time(min(savepoints)).isoformat(timespec="seconds")
    raise RestoreError(
        f"table {table} has no savepoint at or before {to.isoformat() if to else 'now'}: "
        f"the oldest is {oldest} ({len(savepoints)} kept)"
    )


def parse_restore_target(value: str) -> dt.datetime | None:
    """``latest`` (None: the newest savepoint), an ISO date (its end, UTC) or an ISO time."""
    if value == "latest":
        return None
    try:
        if len(value) == 10:  # a date: everything saved that day counts
            day = dt.date.fromisoformat(value)
            return dt.datetime.combine(day, dt.time.max, tzinfo=dt.UTC)
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"--to {value!r}: expected latest, a date (2026-11-27) or a time (2026-11-27T18:00:00Z)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def prune_sidecar(
    fs: FileSystem, paths: TablePaths, timeline_names: Sequence[str], oldest_savepoint: str
) -> list[str]:
    """Delete the merge's checkpoints and tombstone sets older than those of the oldest
    savepoint's commit (:func:`sidecar_garbage`); what was deleted, under the sidecar.

    The commit is the newest at or before the savepoint that names a checkpoint (a
    compaction's commit names none); without one nothing is deleted.
    """
    at_or_before = sorted(
        (n for n in timeline_names if n.endswith(COMPLETED) and n <= oldest_savepoint + "~"),
        reverse=True,
    )[:CHECKPOINT_SEARCH]
    named = newest_checkpoint_name(LazyTimeline(fs, paths.timeline, at_or_before))
    if named is None:
        return []
    oldest = json.loads(fs.read_text(join(paths.sidecar, named)))
    garbage = sidecar_garbage(
        fs.list_dir(join(paths.sidecar, "checkpoints")),
        fs.list_dir(join(paths.sidecar, "tombstones")),
        int(oldest["version"]),
        oldest["tombstones"],
    )
    for path in garbage:
        fs.delete(join(paths.sidecar, path))
    return garbage


class HudiProcedures:
    """Hudi's savepoint procedures on one table, by its path (Spark SQL ``CALL``)."""

    def __init__(self, spark: Any, root: str) -> None:
        self.spark, self.root = spark, root

    def _call(self, procedure: str, **arguments: str) -> list[Any]:
        named = ", ".join(f"{name} => '{value}'" for name, value in arguments.items())
        rows: list[Any] = self.spark.sql(f"CALL {procedure}({named})").collect()
        return rows

    def _succeeded(self, procedure: str, **arguments: str) -> None:
        rows = self._call(procedure, **arguments)
        if not rows or rows[0][0] is not True:
            raise RuntimeError(f"{procedure} on {self.root} returned {rows!r}")

    def create_savepoint(self, instant: str) -> None:
        self._succeeded("create_savepoint", path=self.root, commit_time=instant)

    def delete_savepoint(self, instant: str) -> None:
        self._succeeded("delete_savepoint", path=self.root, instant_time=instant)

    def rollback_to_savepoint(self, instant: str) -> None:
        self._succeeded("rollback_to_savepoint", path=self.root, instant_time=instant)
