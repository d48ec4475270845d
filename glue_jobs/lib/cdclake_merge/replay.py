"""Quarantined lines: listing them, and applying them again after a fix (a *replay*).

Shared by ``cdclake quarantine`` (local stack; listing anywhere) and the Glue merge job run
with ``--mode replay`` (AWS), over any :class:`~cdclake_merge.storage.FileSystem`: local
folders, or ``s3://`` through Hadoop on Glue.

How the merge keeps them (:meth:`cdclake_merge.hudi.HudiTable.stage`): the commit of version
N writes the run's bad lines to ``<quarantine root>/v<N, 8 digits>/`` as JSON lines
``{source_file, line, reason, raw}``. A run that stopped above ``max_bad_fraction`` wrote
``failed-v<N>/`` and committed nothing: those lines are still in pending change files, and
the next run reads them again, so they are not listed here.

A replay, after a fix (config or code) that makes some of them readable:

1. every listed line not replayed yet is parsed again with the merge's own parser
   (:func:`cdclake_merge.debezium.parse_line`) and the table's current spec;
2. the lines that now parse are written, in their original order, to
   ``<quarantine root>/replays/r<N>/lines.json`` and applied by ``run_merge`` through the
   table's sink, as one commit. The merge's ordering rules apply: a replayed change older
   than what the table holds for its key is skipped as stale, never applied over it; a
   change of the first transaction after a snapshot, which names no commit, is written
   naming the snapshot it followed in its change folder (:func:`snapshot_before`);
3. ``replays/r<N>/_ledger.json`` records which lines that commit applied (and, on Glue, the
   job run that did it). Listing leaves them out, so a second replay finds nothing and
   commits nothing.

Lines that still fail are not merged and stay where they are; the ledger keeps their
current reason. The replay commit does not move the table's change-file positions.
A replay that died after its commit and before its ledger is safe to run again: each
replayed change is then not newer than the stored row and is skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from cdclake_merge.storage import folder_of, join

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdclake_merge.debezium import TableSpec
    from cdclake_merge.job import MergeOptions
    from cdclake_merge.sink import Sink
    from cdclake_merge.storage import FileSystem

VERSION_FOLDER = re.compile(r"^v(\d{8})$")
REPLAYS = "replays"
LEDGER = "_ledger.json"
LINES = "lines.json"
# TableState / Changes fields that say which change files are applied: a replay reads its
# own folder from nothing and leaves the table's positions as they were.
INPUT_FIELDS = ("positions", "legacy_applied", "applied_files")


@dataclass(frozen=True)
class QuarantinedLine:
    folder: str  # v<N>: the commit that quarantined it
    source_file: str
    line: int
    reason: str
    raw: str

    @property
    def id(self) -> str:
        return f"{self.folder}:{self.source_file}:{self.line}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "quarantined_by": self.folder,
            "source_file": self.source_file,
            "line": self.line,
            "reason": self.reason,
        }


@dataclass
class ReplayResult:
    replay: str | None = None
    version: int | None = None  # the commit that applied the lines
    applied: list[str] = field(default_factory=list)
    still_failing: dict[str, str] = field(default_factory=dict)  # id -> current reason
    merge: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "replay": self.replay,
            "version": self.version,
            "applied": len(self.applied),
            "still_failing": len(self.still_failing),
            "still_failing_lines": [
                {"id": k, "reason": v} for k, v in sorted(self.still_failing.items())
            ],
            "merge": self.merge,
        }

    @staticmethod
    def from_ledger(entry: Mapping[str, Any]) -> ReplayResult:
        """What a replay did, as its ``_ledger.json`` records it."""
        return ReplayResult(
            replay=str(entry["replay"]),
            version=entry.get("version"),
            applied=list(entry.get("applied", ())),
            still_failing=dict(entry.get("still_failing", {})),
            merge=dict(entry.get("merge", {})),
        )


def _part_files(fs: FileSystem, folder: str) -> list[str]:
    return [
        join(folder, name)
        for name in fs.list_dir(folder)
        if name.endswith(".json") and not name.startswith((".", "_"))
    ]


def quarantined(
    fs: FileSystem, root: str, upto_version: int | None = None
) -> list[QuarantinedLine]:
    """Every line the table's commits quarantined, oldest commit first (replayed ones too).

    Folders of versions above ``upto_version`` were staged by runs that never committed.
    """
    lines: list[QuarantinedLine] = []
    for name in fs.list_dir(root):
        match = VERSION_FOLDER.match(name)
        if match is None or (upto_version is not None and int(match.group(1)) > upto_version):
            continue
        for part in _part_files(fs, join(root, name)):
            # JSON lines end at "\n" only: a raw line may hold U+0085 or U+2028 unescaped,
            # where str.splitlines() would cut it.
            for text in fs.read_text(part).split("\n"):
                if not text.strip():
                    continue
                row = json.loads(text)
                lines.append(
                    QuarantinedLine(
                        folder=name,
                        source_file=str(row.get("source_file", "")),
                        line=int(row.get("line") or 0),
                        reason=str(row.get("reason", "")),
                        raw=str(row.get("raw", "")),
                    )
                )
    return sorted(lines, key=lambda q: (q.folder, q.source_file, q.line))


def ledgers(fs: FileSystem, root: str) -> list[dict[str, Any]]:
    """Every replay's ledger under ``root``, oldest replay first."""
    folder = join(root, REPLAYS)
    found = []
    for name in fs.list_dir(folder):
        path = join(folder, name, LEDGER)
        if fs.exists(path):
            found.append(json.loads(fs.read_text(path)))
    return sorted(found, key=lambda entry: str(entry["replay"]))


@dataclass(frozen=True)
class Listing:
    pending: list[QuarantinedLine]  # not applied by any replay
    replayed: dict[str, str]  # id -> the replay that applied it
    reasons: dict[str, str]  # id -> the newest reason (a replay re-parses)


def listing(fs: FileSystem, root: str, upto_version: int | None = None) -> Listing:
    replayed: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for entry in ledgers(fs, root):
        for line_id in entry.get("applied", ()):
            replayed[line_id] = str(entry["replay"])
        reasons.update(entry.get("still_failing", {}))
    lines = quarantined(fs, root, upto_version)
    pending = [q for q in lines if q.id not in replayed]
    return Listing(pending, replayed, {q.id: reasons.get(q.id, q.reason) for q in lines})


# --- replay ---------------------------------------------------------------------------------


def _input_defaults(state: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in fields(state):
        if f.name in INPUT_FIELDS:
            values[f.name] = f.default_factory() if callable(f.default_factory) else f.default
    return values


def snapshot_before(source_file: str, lsn: int, snapshots: Sequence[tuple[int, str]]) -> int | None:
    """The position of the snapshot a replayed change of unknown commit (the first
    transaction streamed after a snapshot, :func:`cdclake_merge.transforms.place_after_snapshots`)
    follows, when its change precedes that position: the newest of the table's recorded
    ``snapshots`` (position, file of its first read) whose first read is in the line's own
    change folder, in its file or an earlier one. The replay's own folder has no stream to
    place it by; where it was first read does. None: its own LSN places it."""
    folder = folder_of(source_file)
    before = sorted(
        (position, first)
        for position, first in snapshots
        if folder_of(first) == folder and first <= source_file
    )
    if not before:
        return None
    newest, first = before[-1]
    if first == source_file and len(before) > 1:
        # Its file also holds that snapshot's first read, and the checkpoint keeps no line of
        # it: the line may precede it (and follow an earlier snapshot). Named after it, it
        # would overwrite that snapshot's reads; left at its own LSN, the worst is that it
        # goes with the rows the snapshot's end removes.
        return None
    return newest if newest > lsn else None


def named_commit(raw: str, position: int, spec: TableSpec) -> str:
    """``raw`` with ``source.sequence[0]`` (null: no commit named) set to ``position``, as
    the merge would place the line read in its stream; the quarantine keeps the line as read.
    ``raw`` itself when the line, so changed, would not parse as a change at ``position``."""
    from cdclake_merge.debezium import parse_line

    named = _UNNAMED_COMMIT.sub(lambda m: f'{m.group(1)}\\"{position}\\"', raw, count=1)
    change = parse_line(named, spec).change
    return named if change is not None and change.commit_lsn == position else raw


# source.sequence as the JSON converter writes it, a string holding a JSON array, in the
# source block (one flat object: a row's column of that name is in before or after).
_UNNAMED_COMMIT = re.compile(r'("source"\s*:\s*\{[^{}]*"sequence"\s*:\s*"\[\s*)null')


class ReplaySink:
    """The table's sink, seen by ``run_merge`` as if no change file had ever been applied.

    So the replay folder's file is pending; what gets committed keeps the table's own
    change-file positions and names the replay in the commit's run record.
    """

    def __init__(self, sink: Any, replay: str) -> None:
        self._sink = sink
        self._replay = replay
        self._real: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)

    def load(self, *, as_stored: bool = False) -> Any:
        self._real = self._sink.load(as_stored=as_stored)
        if getattr(self._real, "legacy_applied", None) is not None:
            raise ValueError(
                f"table {self._sink.table}: its last commit predates change-file positions; "
                "run its merge once, then replay"
            )
        return replace(self._real, **_input_defaults(self._real))

    def read_live(self, spark: Any, state: Any) -> Any:
        return self._sink.read_live(spark, state)

    def read_state(self, spark: Any, state: Any) -> Any:
        return self._sink.read_state(spark, state)

    def stage(self, spark: Any, previous: Any, changes: Any) -> Any:
        kept = {
            f.name: getattr(self._real, f.name)
            for f in fields(changes)
            if f.name in INPUT_FIELDS and hasattr(self._real, f.name)
        }
        run = {**changes.run, "replay": self._replay}
        return self._sink.stage(spark, self._real, replace(changes, run=run, **kept))

    def commit(self, spark: Any, staged: Any) -> Any:
        return self._sink.commit(spark, staged)


def replay(
    spark_factory: Callable[[], SparkSession],
    fs: FileSystem,
    sink: Sink,
    options: MergeOptions,
    *,
    job_run: str | None = None,
) -> ReplayResult:
    """Apply the quarantined lines of ``sink`` that ``options.spec`` reads now (module doc).

    ``fs`` serves the sink's quarantine root; ``options.changes`` is not read (the replay's
    input is its own folder there). ``job_run`` (the Glue run id) goes into the ledger.
    """
    from cdclake_merge.debezium import UNKNOWN_COMMIT, parse_line
    from cdclake_merge.job import run_merge

    root = sink.quarantine_root
    state = sink.load()
    pending = listing(fs, root, state.version).pending
    result = ReplayResult()
    lines: list[str] = []
    readable: list[str] = []
    for item in pending:
        outcome = parse_line(item.raw, options.spec)
        if outcome.kind == "bad":
            result.still_failing[item.id] = str(outcome.reason)
        else:
            readable.append(item.id)
            change = outcome.change
            if change is not None and change.order[0] == UNKNOWN_COMMIT:
                after = snapshot_before(item.source_file, change.lsn, state.snapshots)
                lines.append(named_commit(item.raw, after, options.spec) if after else item.raw)
            else:
                lines.append(item.raw)
    if not readable:
        return result
    result.replay = f"r{state.version + 1:08d}"
    folder = join(root, REPLAYS, result.replay)
    fs.delete(folder)  # a replay that died before its commit left this behind
    fs.write_text(join(folder, LINES), "".join(text + "\n" for text in lines))
    merged = run_merge(
        spark_factory, fs, ReplaySink(sink, result.replay), replace(options, changes=folder)
    )
    result.version, result.merge = merged.version, merged.as_dict()
    result.applied = readable
    ledger = {
        "replay": result.replay,
        "version": merged.version,
        "at": dt.datetime.now(dt.UTC).isoformat(),
        **({"job_run": job_run} if job_run else {}),
        "applied": result.applied,
        "still_failing": result.still_failing,
        "merge": result.merge,
    }
    fs.write_text(join(folder, LEDGER), json.dumps(ledger, indent=2))
    return result
