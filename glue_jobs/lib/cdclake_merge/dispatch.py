"""Which lake tables' merge jobs start now: only where change files wait and no run is in
progress, within the environment's budget of concurrent runs, oldest waiting changes first.

One decision serves the dispatcher Lambda (on a schedule, one per environment) and
``cdclake dispatch``. What waits is read as the merge reads it (:mod:`cdclake_merge.pending`);
runs in progress come from Glue (``GetJobRuns``). Runs in progress count against the budget
whether the dispatcher, an operator or a replay started them. Nothing here imports Spark.

Each decision also carries the table's watermark: every change file written before it is
applied. Nothing waits: the moment the table was listed, and its lag is 0 (caught up as of
this turn); files wait: when the oldest of them was written, and its lag is now minus that.
The dispatcher publishes that lag (:func:`cdclake_merge.metrics.publish_lags`), so a quiet
table reports 0 and a table whose files wait while its runs fail or never start reports a lag
that grows.

Each run started is sized to what waits (:class:`Sizing`): an executor per
``--dispatch_bytes_per_executor`` of pending bytes (what a worker applies in half the timeout
at the measured rate, ``environment.config.GlueJobConfig.bytes_per_executor``) and the driver,
within the table's ``--dispatch_min_workers`` and its job's ``NumberOfWorkers``; Glue auto
scaling releases what a run leaves idle. The bounds come from the job's default arguments:
the Lambda has no config of its own.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cdclake_merge.pending import Pending, table_pending
from cdclake_merge.storage import FileSystem

# Glue's run states that hold the job (and count against the account's concurrent runs).
IN_PROGRESS = frozenset({"STARTING", "RUNNING", "STOPPING", "WAITING"})
# The tag every merge job of an environment carries, valued with the environment's job name
# prefix: the dispatcher finds its jobs by it (any number of tables; a schedule's input could
# name only a few hundred).
MERGE_JOB_TAG = "cdclake:merge-jobs"
RUNS_LOOKED_AT = 25  # the newest runs of a job; one in progress is among them
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class Sizing:
    """A table's bounds for a run's workers (its Glue job's; driver included)."""

    worker_type: str
    min_workers: int
    max_workers: int
    bytes_per_executor: int
    max_bytes_per_run: int | None = None  # the run applies at most this much of what waits

    def workers_for(self, pending_bytes: int) -> int:
        """Workers a run of ``pending_bytes`` starts with: the driver and an executor per
        ``bytes_per_executor`` of what the run applies, within the bounds."""
        applied = max(pending_bytes, 0)
        if self.max_bytes_per_run is not None:
            applied = min(applied, self.max_bytes_per_run)
        executors = -(-applied // self.bytes_per_executor)
        return min(max(executors + 1, self.min_workers), self.max_workers)


@dataclass(frozen=True)
class Target:
    """One lake table: where its changes and its Hudi table are, and its Glue job."""

    table: str  # schema.table, as configured
    lake_table: str  # DATABASE.TABLE
    warehouse: str
    changes: str
    job: str | None = None  # None: the local stack, where the merge runs in process
    sizing: Sizing | None = None  # None: runs start with the job's own workers


@dataclass(frozen=True)
class Decision:
    table: str
    start: bool
    reason: str
    files_pending: tuple[str, ...] = ()
    oldest_pending: float | None = None  # epoch seconds of the longest-waiting file
    job: str | None = None
    run_id: str | None = None
    failed: bool = False  # the table could not be read, or Glue refused the start
    # Epoch seconds before which every change file is applied; None: not read.
    watermark: float | None = None
    workers: int | None = None  # the run's workers (its maximum); None: the job's own
    worker_type: str | None = None

    def lag_seconds(self, now: float) -> float | None:
        """``now`` (epoch seconds) minus the watermark, never negative; 0 where nothing waits
        (caught up as of this turn); None without a watermark."""
        if self.watermark is None:
            return None
        if not self.files_pending:
            return 0.0
        return max(now - self.watermark, 0.0)

    def as_json(self, now: float) -> dict[str, Any]:
        oldest = self.oldest_pending
        lag = self.lag_seconds(now)
        return {
            "table": self.table,
            "start": self.start,
            "reason": self.reason,
            "files_pending": list(self.files_pending),
            "oldest_pending": (
                dt.datetime.fromtimestamp(oldest, dt.UTC).isoformat(timespec="seconds")
                if oldest is not None
                else None
            ),
            "job": self.job,
            "run_id": self.run_id,
            "failed": self.failed,
            "workers": self.workers,
            "lag_seconds": round(lag, 1) if lag is not None else None,
        }


@dataclass(frozen=True)
class Survey:
    """What the decision needs of one table: what waits, and its run in progress (state)."""

    target: Target
    pending: Pending | None = None
    running: str | None = None  # the state of its run in progress
    error: str | None = None
    listed_at: float | None = None  # epoch seconds when its listing began


def watermark(survey: Survey) -> float | None:
    """Before when every change file of the table is applied (see the module's doc)."""
    pending = survey.pending
    if pending is None or survey.listed_at is None:
        return None
    if pending.files:
        return pending.oldest
    # Nothing waits: caught up as of the listing, a table that never received a change file
    # too (an empty table must not page). A capture that delivers nothing shows in the age of
    # its newest heartbeat instead (cdclake_merge.metrics), for all its tables at once.
    return survey.listed_at


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:MAX_ERROR_CHARS] or type(exc).__name__


def merge_jobs(glue: Any, tag_value: str) -> list[str]:
    """The names of the Glue jobs tagged ``MERGE_JOB_TAG`` = ``tag_value``, sorted."""
    names: list[str] = []
    request: dict[str, Any] = {"Tags": {MERGE_JOB_TAG: tag_value}}
    while True:  # botocore has no paginator for ListJobs
        page = glue.list_jobs(**request)
        names += page.get("JobNames", [])
        if not page.get("NextToken"):
            return sorted(names)
        request["NextToken"] = page["NextToken"]


def target_from_job(glue: Any, job: str) -> Target:
    """The table as its Glue job merges it: the job's default arguments, read as the job reads
    them (glue_jobs/merge_job.py). LookupError with a one-line reason otherwise."""
    try:
        definition = glue.get_job(JobName=job)["Job"]
    except glue.exceptions.EntityNotFoundException:
        raise LookupError(f"Glue job {job} not found") from None
    arguments = definition.get("DefaultArguments", {})
    needed = ("--table", "--changes_path", "--warehouse_path", "--database")
    missing = [a for a in needed if a not in arguments]
    if missing:
        raise LookupError(f"Glue job {job} has no {', '.join(missing)}: not a cdclake merge job")
    table = arguments["--table"]
    return Target(
        table=table,
        lake_table=f"{arguments['--database']}.{table.replace('.', '_')}",
        warehouse=arguments["--warehouse_path"],
        changes=arguments["--changes_path"],
        job=job,
        sizing=sizing_of(definition),
    )


SIZING_ARGUMENTS = ("--dispatch_min_workers", "--dispatch_bytes_per_executor")


def sizing_of(definition: dict[str, Any]) -> Sizing | None:
    """The job's bounds for a run's workers (``GetJob``'s Job); None for a job defined without
    them or without G.* workers (its runs start as defined: a run's own size needs both).
    LookupError naming the argument when one is not a positive whole number."""
    arguments = definition.get("DefaultArguments", {})
    worker_type = str(definition.get("WorkerType", ""))
    maximum = definition.get("NumberOfWorkers")
    if not all(a in arguments for a in SIZING_ARGUMENTS) or not worker_type.startswith("G."):
        return None
    if not isinstance(maximum, int):
        return None
    values: dict[str, int] = {}
    for name in (*SIZING_ARGUMENTS, "--max_bytes_per_run"):
        if name not in arguments:  # the byte cap is optional
            continue
        value = str(arguments[name])
        if not value.isdigit() or int(value) < 1:
            job = definition.get("Name")
            raise LookupError(f"Glue job {job}: {name} must be a positive whole number: {value!r}")
        values[name] = int(value)
    return Sizing(
        worker_type=worker_type,
        min_workers=values["--dispatch_min_workers"],
        max_workers=maximum,
        bytes_per_executor=values["--dispatch_bytes_per_executor"],
        max_bytes_per_run=values.get("--max_bytes_per_run"),
    )


def run_in_progress(glue: Any, job: str) -> str | None:
    """The state of the job's run in progress (STARTING, RUNNING, STOPPING, WAITING), or None."""
    runs = glue.get_job_runs(JobName=job, MaxResults=RUNS_LOOKED_AT).get("JobRuns", [])
    for run in runs:
        if run.get("JobRunState") in IN_PROGRESS:
            return str(run["JobRunState"])
    return None


def survey(
    targets: Iterable[Target],
    *,
    fs: FileSystem,
    glue: Any = None,
) -> list[Survey]:
    """Each table's pending files and run in progress; a table that cannot be read says why."""
    found: list[Survey] = []
    for target in targets:
        # Taken before the listing: a file written while it runs may be missed, never one
        # written before.
        listed_at = time.time()
        try:
            running = run_in_progress(glue, target.job) if glue is not None and target.job else None
            pending = table_pending(
                fs, warehouse=target.warehouse, table=target.lake_table, changes=target.changes
            )
        except Exception as exc:  # one table's fault (a listing, a checkpoint) stops no other
            found.append(Survey(target, error=one_line(exc)))
            continue
        found.append(Survey(target, pending=pending, running=running, listed_at=listed_at))
    return found


def _has_work(pending: Pending | None) -> bool:
    """Files wait, or the last commit's catalog registration (a run without files does it)."""
    return pending is not None and (bool(pending.files) or pending.catalog_unsynced)


def _sized(decision: Decision, survey: Survey) -> Decision:
    """The decision with its run's workers, from what waits, where the table has bounds."""
    sizing = survey.target.sizing
    if sizing is None:
        return decision
    pending = sum(f.size for f in survey.pending.files) if survey.pending else 0
    return replace(decision, workers=sizing.workers_for(pending), worker_type=sizing.worker_type)


def decide(surveys: Sequence[Survey], budget: int) -> list[Decision]:
    """Start the tables with files waiting and no run in progress, oldest waiting first, while
    the runs in progress stay within ``budget``. In the order of ``surveys``."""
    if budget < 1:
        raise ValueError(f"the budget of concurrent runs must be at least 1, got {budget}")
    busy = sum(1 for s in surveys if s.running is not None)
    candidates = sorted(
        (s for s in surveys if s.error is None and s.running is None and _has_work(s.pending)),
        # A commit missing from the catalog (no file waits) goes first: its run is short.
        key=lambda s: ((s.pending.oldest if s.pending else None) or 0.0, s.target.table),
    )
    chosen = {s.target.table for s in candidates[: max(budget - busy, 0)]}
    decisions: list[Decision] = []
    for s in surveys:
        files = tuple(f.path for f in s.pending.files) if s.pending else ()
        oldest = s.pending.oldest if s.pending else None
        base = Decision(
            s.target.table, False, "", files, oldest, s.target.job, watermark=watermark(s)
        )
        if s.error is not None:
            decisions.append(replace(base, reason=f"not read: {s.error}", failed=True))
        elif s.running is not None:
            decisions.append(replace(base, reason=f"a run is in progress ({s.running})"))
        elif not _has_work(s.pending):
            decisions.append(replace(base, reason="no change files wait"))
        else:
            work = (
                f"{len(files)} change files wait"
                if files
                else "the last commit is not registered in the catalog yet"
            )
            if s.target.table in chosen:
                decisions.append(_sized(replace(base, start=True, reason=work), s))
            else:
                taken = f"the budget of {budget} concurrent runs is taken (older changes first)"
                decisions.append(replace(base, reason=f"{work}; {taken}"))
    return decisions


def start_runs(glue: Any, decisions: Sequence[Decision]) -> list[Decision]:
    """``StartJobRun`` for each decision to start; a start Glue refuses says why."""
    started: list[Decision] = []
    for decision in decisions:
        if not decision.start or decision.job is None:
            started.append(decision)
            continue
        size = (
            {"NumberOfWorkers": decision.workers, "WorkerType": decision.worker_type}
            if decision.workers is not None and decision.worker_type is not None
            else {}
        )
        try:
            run_id = str(glue.start_job_run(JobName=decision.job, **size)["JobRunId"])
        except Exception as exc:  # another start won the race, a quota, throttling
            reason = f"not started: {one_line(exc)}"
            started.append(replace(decision, start=False, reason=reason, failed=True))
            continue
        started.append(replace(decision, run_id=run_id))
    return started


def dispatch(
    targets: Sequence[Target],
    *,
    fs: FileSystem,
    glue: Any,
    budget: int,
    dry_run: bool = False,
) -> list[Decision]:
    """Survey, decide and (unless ``dry_run``) start: the dispatcher's whole turn."""
    decisions = decide(survey(targets, fs=fs, glue=glue), budget)
    return decisions if dry_run else start_runs(glue, decisions)
