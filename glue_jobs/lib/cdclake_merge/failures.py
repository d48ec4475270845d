"""A lake table's failed merge runs: which park it, which back off and for how long, and what
lets a parked table start again (:mod:`cdclake_merge.dispatch` decides with them).

A failure no retry can fix (the bad-fraction gate, a type change the table cannot take, an
argument the job refuses: :data:`DETERMINISTIC`) *parks* the table until a change file newer
than the failed run's start arrives, its job definition changes, or an operator resumes it
(``cdclake dispatch --resume``, which writes :data:`RESUMED` in the table's sidecar). A stored
column's type change the table takes only when rebuilt (:data:`NEEDS_REBUILD`) holds the table
whatever arrives after it, as its policy says: ``stop`` parks it, ``rebuild`` says it needs a
rebuild and which column changed from which type to which. Any other
failure (a timeout, throttling, lost executors) *backs off*: the n-th failure in a row waits
2**(n-1) backoff units from its end, at most :data:`BACKOFF_CAP_SECONDS`. The unit is
``environment.lake.DispatchConfig.backoff_unit_seconds``: the schedule's turn, but never less
than five minutes (its docstring says why). On the local stack, which has no Glue, a table's
recent runs are kept in its sidecar (:data:`LOCAL_RUNS`) as Glue keeps a job's.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cdclake_merge.layout import copy_takes
from cdclake_merge.pending import TablePaths
from cdclake_merge.positions import ChangeFile
from cdclake_merge.storage import FileSystem, join

RUNS_LOOKED_AT = 25  # the newest runs of a job; one in progress is among them
# Glue's run states of a run that failed (STOPPED is an operator's, not a failure).
FAILED = frozenset({"FAILED", "ERROR", "TIMEOUT"})
BACKOFF_CAP_SECONDS = 6 * 3600
# What a failed run's ErrorMessage says when a retry fails the same way: the merge entry's
# failure line (glue_jobs/merge_job.py's RunFailed, which Glue records as the run's
# ErrorMessage, "RunFailed: cdclake merge failed: …") carries the message of cdclake_merge.job's
# TooManyBadRecords and key check, cdclake_merge.schema's SchemaChangeError, and the entry's
# own refusal of an argument. Anything else (TIMEOUT, throttling, lost executors) is retried.
NEEDS_REBUILD = "NeedsRebuild"
# cdclake_merge.schema.NeedsRebuild's line: a stored column's type change the table takes only
# when rebuilt. Types are Spark's names, without spaces (decimal(14,4)).
_NEEDS_REBUILD = re.compile(
    r"column '(?P<column>[^']+)' changed type from (?P<old>\S+) to (?P<new>\S+), "
    r"which .* needs a rebuild"
)
# cdclake_merge.layout.LayoutNeedsRebuild's line: config asks for another type, key,
# partitioning or a larger record index than the table was created with.
_LAYOUT_NEEDS_REBUILD = re.compile(
    r"was created otherwise than its config says \((?P<change>[^)]+)\): needs a rebuild"
)
DETERMINISTIC = (
    (NEEDS_REBUILD, _NEEDS_REBUILD),
    (NEEDS_REBUILD, _LAYOUT_NEEDS_REBUILD),
    ("TooManyBadRecords", re.compile(r"lines of \S+ could not be applied .*> max_bad_fraction")),
    (
        "SchemaChangeRejected",
        re.compile(r"changed type from .+ to .+, which (cannot be widened|the Hudi table cannot)"),
    ),
    ("SchemaChangeRejected", re.compile(r"key column\(s\) .+ not in the data")),
    ("ConfigError", re.compile(r"--\w+ must be (a positive whole number|one of)")),
    ("ConfigError", re.compile(r"table.type must be COPY_ON_WRITE or MERGE_ON_READ")),
    # cdclake_merge.rebuild.HISTORY_REFUSED: a rebuild run of a table that keeps its history
    # for what a copy does not take; each retry would be refused too.
    ("HistoryRefused", re.compile(r"keeps its history \(history: true\): a rebuild would")),
    # cdclake_merge.rebuild.COPY_WITHOUT_HISTORY: a job that would continue a copy without it.
    ("HistoryRefused", re.compile(r"a rebuild by copy is in progress and keeps the table's")),
)
# What a table that keeps its history needs for a change a rebuild by copy does not take
# (cdclake_merge.rebuild.HISTORY_REFUSED), for the dispatcher's and ``status``'s lines.
HISTORY_NOT_REBUILT = (
    "the table keeps its history (history: true), which a rebuild carries only through a "
    "change of its table type, partitioning or record index size (issue #51): see "
    'docs/merge-job.md "Schema changes"'
)
# In the table's sidecar (the merge's state, which the dispatcher already reads): when an
# operator last resumed the table, and, on the local stack, its recent runs.
RESUMED = "dispatch-resumed.json"
LOCAL_RUNS = "dispatch-runs.json"


class Table(Protocol):
    """Where a table's sidecar is (:class:`cdclake_merge.dispatch.Target` is one)."""

    @property
    def warehouse(self) -> str: ...

    @property
    def lake_table(self) -> str: ...


@dataclass(frozen=True)
class Run:
    """One run of a table's merge, as Glue's ``GetJobRuns`` (or the local run log) has it."""

    state: str
    started: float  # epoch seconds
    ended: float | None = None
    error: str = ""

    @staticmethod
    def of(run: dict[str, Any]) -> Run:
        started = epoch(run.get("StartedOn")) or 0.0
        return Run(
            state=str(run.get("JobRunState", "")),
            started=started,
            ended=epoch(run.get("CompletedOn")),
            error=" ".join(str(run.get("ErrorMessage") or "").split()),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "JobRunState": self.state,
            "StartedOn": self.started,
            "CompletedOn": self.ended,
            "ErrorMessage": self.error,
        }


def epoch(value: Any) -> float | None:
    """A time as GetJobRuns gives it (datetime) or the local run log (epoch seconds)."""
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return None


def deterministic_kind(error: str) -> str | None:
    """The name of the failure a retry repeats (:data:`DETERMINISTIC`), or None."""
    for kind, pattern in DETERMINISTIC:
        if pattern.search(error):
            return kind
    return None


def rebuild_change(error: str) -> str | None:
    """What a failure line that needs a rebuild says changed (``amount decimal(10,2) ->
    decimal(14,4)``, ``table type COPY_ON_WRITE -> MERGE_ON_READ``), or None for any other
    line."""
    found = _NEEDS_REBUILD.search(error)
    if found is not None:
        return f"{found['column']} {found['old']} -> {found['new']}"
    layout = _LAYOUT_NEEDS_REBUILD.search(error)
    return layout["change"] if layout is not None else None


def rebuilt_as_copy(error: str) -> bool:
    """Whether a failure line needing a rebuild names only changes of the table's layout that a
    rebuild by copy takes (:data:`cdclake_merge.layout.COPIED`): how a table that keeps its
    history is rebuilt."""
    layout = _LAYOUT_NEEDS_REBUILD.search(error)
    return layout is not None and copy_takes(layout["change"].split("; "))


@dataclass(frozen=True)
class Failures:
    """A table's failed runs since its last success: how many, and the newest of them."""

    count: int
    newest: Run
    kind: str | None  # a deterministic failure's name; None: transient

    @property
    def at(self) -> float:
        return self.newest.ended or self.newest.started


def failures_of(runs: Sequence[Run]) -> Failures | None:
    """The failed runs in a row among ``runs`` (newest first) up to a success; None when the
    newest finished run succeeded or none finished. Runs in progress and runs stopped by hand
    are passed over."""
    failed: list[Run] = []
    for run in runs:
        if run.state in FAILED:
            failed.append(run)
        elif run.state == "SUCCEEDED":
            break
    if not failed:
        return None
    newest = failed[0]
    kind = deterministic_kind(newest.error) if newest.state != "TIMEOUT" else None
    return Failures(len(failed), newest, kind)


def backoff_seconds(failures: int, unit_seconds: float) -> float:
    """How long after the n-th failure in a row the next try waits: 1, 2, 4 … units."""
    return float(min(unit_seconds * 2 ** min(failures - 1, 32), BACKOFF_CAP_SECONDS))


def recent_runs(glue: Any, job: str) -> list[Run]:
    """The job's newest runs, newest first (one ``GetJobRuns`` call)."""
    runs = glue.get_job_runs(JobName=job, MaxResults=RUNS_LOOKED_AT).get("JobRuns", [])
    return sorted((Run.of(r) for r in runs), key=lambda r: r.started, reverse=True)


def _sidecar(table: Table) -> str:
    return TablePaths.of(table.warehouse, table.lake_table).sidecar


def local_runs(fs: FileSystem, table: Table) -> list[Run]:
    """The table's recent runs on the local stack, newest first (:func:`record_local_run`)."""
    path = join(_sidecar(table), LOCAL_RUNS)
    if not fs.exists(path):
        return []
    return [Run.of(r) for r in json.loads(fs.read_text(path))]


def record_local_run(fs: FileSystem, table: Table, run: Run) -> None:
    """Keep a local run where the next ``cdclake dispatch --env local`` reads it, as Glue
    keeps a job's runs: the newest :data:`RUNS_LOOKED_AT`."""
    kept = [run, *local_runs(fs, table)][:RUNS_LOOKED_AT]
    fs.write_text(join(_sidecar(table), LOCAL_RUNS), json.dumps([r.as_json() for r in kept]))


def resumed_at(fs: FileSystem, table: Table) -> float | None:
    """When an operator last resumed the table (:func:`resume`); None: never."""
    path = join(_sidecar(table), RESUMED)
    if not fs.exists(path):
        return None
    return float(json.loads(fs.read_text(path))["at"])


def resume(fs: FileSystem, table: Table, now: float) -> None:
    """Let a parked table start again: its next turn tries it once more, and a run that fails
    the same way parks it again."""
    at = dt.datetime.fromtimestamp(now, dt.UTC).isoformat(timespec="seconds")
    fs.write_text(join(_sidecar(table), RESUMED), json.dumps({"at": now, "when": at}))


def when(at: float) -> str:
    """``at`` (epoch seconds) as an ISO time to the second, UTC."""
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="seconds")


def held(
    failures: Failures | None,
    *,
    files: Sequence[ChangeFile],
    defined_at: float | None,
    resumed: float | None,
    now: float,
    backoff_unit_seconds: float,
    resume_command: str,
    schema_changes: str = "rebuild",
    rebuild_command: str = "cdclake rebuild",
    keeps_history: bool = False,
) -> str | None:
    """Why a failing table does not start this turn (parked, backing off, needing a rebuild),
    or None: it may. ``files``: what waits; ``defined_at``: when its job definition last
    changed; ``resumed``: when an operator last resumed it; ``resume_command``: named when
    parked; ``schema_changes``: the table's policy (``rebuild`` or ``stop``) for a type change
    it needs a rebuild to take, and ``rebuild_command`` the command that rebuilds it;
    ``keeps_history``: the table keeps its history, which a rebuild refuses but for a change of
    its layout a copy takes (otherwise parked whatever the policy: a rebuild run started for
    it would fail the same way, and each is billed)."""
    if failures is None:
        return None
    if failures.kind is not None:
        change = rebuild_change(failures.newest.error) if failures.kind == NEEDS_REBUILD else None
        # A newer change file cannot make the stored column take the change: the next run
        # reads the same waiting files first and fails the same way.
        newer_input = change is None and any(f.modified > failures.newest.started for f in files)
        redefined = (defined_at or 0.0) > failures.at
        if newer_input or redefined or (resumed or 0.0) > failures.at:
            return None
        at = when(failures.at)
        if change is None:
            return f"parked: {failures.kind} at {at}; resume with {resume_command}"
        if keeps_history and not rebuilt_as_copy(failures.newest.error):
            return (
                f"parked: needs rebuild: {change} at {at}; {HISTORY_NOT_REBUILT}; "
                f"resume with {resume_command}"
            )
        if schema_changes == "stop":
            return (
                f"parked: needs rebuild: {change} at {at} (schema_changes: stop); rebuild with "
                f"{rebuild_command}, or resume with {resume_command}"
            )
        # Its first step is the snapshot's signal, in the database, which the dispatcher
        # cannot reach; it starts the rebuild's runs once the command has begun it.
        return (
            f"needs rebuild: {change} (since {at}; the live table keeps serving its last "
            f"commit): run {rebuild_command}, which signals the snapshot; the dispatcher "
            "runs the rebuild after it"
        )
    next_try = failures.at + backoff_seconds(failures.count, backoff_unit_seconds)
    if now >= next_try:
        return None
    return f"backoff: {failures.count} failures, next try after {when(next_try)}"
