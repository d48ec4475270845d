"""Which change files are new: a position per change folder instead of every name ever applied.

The S3 sink writes one folder per Kafka partition (``<topic>/partition=<p>/``) and names each
file after its first record's offset, zero-padded (``<topic>+<p>+<offset:010d>.json``), so a
folder's names sort in the order they were written. A folder's position is the newest names
it has applied: everything up to ``after`` is applied, and the last :data:`RECENT_FILES`
applied files are remembered with their size and version tag (S3 ETag, or size and mtime on
disk). A run lists each folder only after ``after`` (S3 ``StartAfter``), so the cost of
finding new files grows with the new files, not with history, and the checkpoint grows with
the number of folders.

A sink task that restarts writes a file again under the same name, possibly with more or
other records; a remembered file whose tag changed is applied again. That is safe because
ordering is by LSN: what was applied before is stale and skipped.

Folders that hold subfolders (the changes root, a topic folder) are listed whole every run;
they hold folders, not history. A folder that holds only files is never searched for
subfolders again once it has a position.

Checkpoints written before positions existed hold ``applied_files`` (every name). Such a
table is listed whole once more and the old names subtracted; the commit of that run stores
positions (see :func:`advance`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdclake_merge.storage import FileEntry, FileSystem, is_input, join, list_folder

RECENT_FILES = 4  # per folder: files a restarted sink task may still write again


@dataclass(frozen=True)
class ChangeFile:
    """A change file found under the changes root: ``folder`` is relative to it ('' = root)."""

    path: str
    folder: str
    name: str
    size: int
    tag: str
    modified: float = field(default=0.0, compare=False)  # epoch seconds: how long it waits

    @property
    def relative(self) -> str:
        return f"{self.folder}/{self.name}" if self.folder else self.name


@dataclass(frozen=True)
class FolderPosition:
    """Everything named up to ``after`` is applied; ``recent``: name → (size, tag)."""

    after: str | None = None
    recent: tuple[tuple[str, int, str], ...] = ()
    parent: bool = False  # holds subfolders: listed whole every run

    def as_json(self) -> dict[str, Any]:
        return {
            "after": self.after,
            "recent": [list(r) for r in self.recent],
            "parent": self.parent,
        }

    @staticmethod
    def from_json(value: Mapping[str, Any]) -> FolderPosition:
        return FolderPosition(
            after=value.get("after"),
            recent=tuple((str(n), int(s), str(t)) for n, s, t in value.get("recent", ())),
            parent=bool(value.get("parent", False)),
        )

    def is_applied(self, entry: FileEntry) -> bool:
        if self.after is not None and entry.name <= self.after:
            return True
        return any(n == entry.name and (s, t) == (entry.size, entry.tag) for n, s, t in self.recent)


Positions = Mapping[str, FolderPosition]


def positions_from_json(value: Mapping[str, Any] | None) -> dict[str, FolderPosition]:
    return {folder: FolderPosition.from_json(p) for folder, p in (value or {}).items()}


def positions_as_json(positions: Positions) -> dict[str, Any]:
    return {folder: positions[folder].as_json() for folder in sorted(positions)}


@dataclass(frozen=True)
class Scan:
    """One listing of the changes root: the pending files and every folder's listing state."""

    pending: tuple[ChangeFile, ...]
    parents: frozenset[str]  # folders seen holding subfolders


def scan(
    fs: FileSystem,
    changes: str,
    positions: Positions,
    legacy_applied: frozenset[str] | None = None,
) -> Scan:
    """The files under ``changes`` that no commit has applied (none is opened).

    With ``legacy_applied`` (an old checkpoint's names) every folder is listed whole and
    those names are subtracted, once.
    """
    pending: list[ChangeFile] = []
    parents: set[str] = set()
    stack = [""]
    while stack:
        folder = stack.pop()
        position = positions.get(folder)
        whole = legacy_applied is not None or position is None or position.parent
        after = None if whole or position is None else position.after
        listing = list_folder(fs, join(changes, folder) if folder else changes, after)
        if listing.folders and whole:
            parents.add(folder)
            stack.extend(
                f"{folder}/{name}" if folder else name
                for name in sorted(listing.folders, reverse=True)
                if not name.startswith((".", "_"))
            )
        for entry in listing.files:
            if not is_input(entry.name):
                continue
            found = ChangeFile(
                entry.path, folder, entry.name, entry.size, entry.tag, entry.modified
            )
            if legacy_applied is not None:
                if found.relative in legacy_applied:
                    continue
            elif position is not None and position.is_applied(entry):
                continue
            pending.append(found)
    pending.sort(key=lambda f: (f.folder, f.name))
    return Scan(tuple(pending), frozenset(parents))


@dataclass(frozen=True)
class Cut:
    """A run's share of the pending files: ``applied`` now, ``left`` for the next run."""

    applied: tuple[ChangeFile, ...]
    left: tuple[ChangeFile, ...]


def cut(
    pending: Sequence[ChangeFile], max_files: int | None = None, max_bytes: int | None = None
) -> Cut:
    """A prefix of each folder's pending files, within ``max_files`` and ``max_bytes``.

    One Kafka partition's records are in one folder, in offset order, and every record of a
    key is in its key's partition; so a prefix of each folder keeps every key's changes in
    order, and the next run (starting from the advanced positions) applies the rest. The
    folders are taken from in turn, one file at a time, so that no partition starves. The
    first file is taken whatever its size: every run makes progress.
    """
    if max_files is None and max_bytes is None:
        return Cut(tuple(pending), ())
    queues: dict[str, list[ChangeFile]] = {}
    for f in sorted(pending, key=lambda f: (f.folder, f.name)):
        queues.setdefault(f.folder, []).append(f)
    taken: list[ChangeFile] = []
    size = 0
    full = False
    while not full and any(queues.values()):
        for queue in queues.values():
            if not queue:
                continue
            candidate = queue[0]
            over_files = max_files is not None and len(taken) >= max_files
            over_bytes = max_bytes is not None and size + candidate.size > max_bytes
            if taken and (over_files or over_bytes):
                full = True
                break
            taken.append(queue.pop(0))
            size += candidate.size
    chosen = set(taken)
    ordered = tuple(f for f in pending if f in chosen)
    return Cut(ordered, tuple(f for f in pending if f not in chosen))


def advance(
    positions: Positions,
    applied: Sequence[ChangeFile],
    parents: Iterable[str],
    legacy_applied: frozenset[str] | None = None,
) -> dict[str, FolderPosition]:
    """The positions after a run that applied ``applied`` (a prefix of each folder's pending
    files, see :func:`cut`).

    A run converting an old checkpoint applied every file its whole listing did not find
    in ``legacy_applied``; the old names of a folder move its ``after`` to the newest of
    them that is not also remembered as recent.
    """
    parent_set = set(parents)
    by_folder: dict[str, list[ChangeFile]] = {}
    for f in applied:
        by_folder.setdefault(f.folder, []).append(f)
    result = dict(positions)
    if legacy_applied is not None:
        result = {}
        for name in legacy_applied:
            folder, _, base = name.rpartition("/")
            old = result.get(folder, FolderPosition())
            result[folder] = FolderPosition(after=max(filter(None, (old.after, base))))
    for folder in set(result) | set(by_folder) | parent_set:
        old = result.get(folder, FolderPosition())
        recent = {n: (s, t) for n, s, t in old.recent}
        for f in by_folder.get(folder, ()):
            recent[f.name] = (f.size, f.tag)
        names = sorted(recent)
        kept, dropped = names[-RECENT_FILES:], names[:-RECENT_FILES]
        after = max(filter(None, (old.after, *dropped)), default=None)
        result[folder] = FolderPosition(
            after=after,
            recent=tuple((n, *recent[n]) for n in kept if after is None or n > after),
            parent=old.parent or folder in parent_set,
        )
    return result
