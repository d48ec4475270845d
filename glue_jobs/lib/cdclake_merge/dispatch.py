"""Which lake tables' merge jobs start now: those *due* with no run in progress, within the
environment's budget of concurrent runs, oldest waiting changes first.

One decision serves the dispatcher Lambda (on a schedule, one per environment) and
``cdclake dispatch``. What waits is read as the merge reads it (:mod:`cdclake_merge.pending`);
runs in progress come from Glue (``GetJobRuns``). Runs in progress count against the budget
whether the dispatcher, an operator or a replay started them. Nothing here imports Spark.

A table is due (:func:`due_at`) when its oldest waiting change would miss the table's
freshness objective if the table waited one more turn and then ran an expected run (Glue's
start, then what waits at the measured incremental rate on the workers its sizing gives), or
when what waits reaches the run's byte cap. A table not due yet says when it will be
(``waiting: due at …``); a turn that starts nothing costs a Lambda call and the listings. The
objective, the start and the rate come from the job's default arguments
(``environment.lake.LakeConfig.dispatch_of``); a job without them (defined before objectives,
or the local stack's tables, whose turn is an operator's command) starts whenever work waits.
A failing table neither parked nor backing off starts as a retry without waiting to be due
(:mod:`cdclake_merge.failures`); a commit missing from the catalog starts at once (its run is
short).

Each decision also carries the table's watermark: every change file written before it is
applied. Nothing waits: the moment the table was listed, and its lag is 0 (caught up as of
this turn); files wait: when the oldest of them was written, and its lag is now minus that.
The dispatcher publishes that lag (:func:`cdclake_merge.metrics.publish_lags`), so a quiet
table reports 0 and a table whose files wait while its runs fail or never start reports a lag
that grows.

Each run started is sized to what waits (:class:`Sizing`): an executor per
``--dispatch_bytes_per_executor`` of pending bytes (what a worker applies at the measured
incremental rate within the table's freshness objective or half the timeout, the sooner) and,
on a MERGE_ON_READ run whose inline compaction is due, its share of the compaction's IO budget
(``--dispatch_compaction_bytes_per_executor``), plus the driver; within the table's
``--dispatch_min_workers`` and its job's ``NumberOfWorkers``. Glue auto scaling releases what a
run leaves idle. The bounds come from the job's default arguments: the Lambda has no config of
its own.

A table being rebuilt (its state object, :mod:`cdclake_merge.generations`, names a generation
``building``) starts a run of its job with ``--mode rebuild`` every turn it has none in
progress, whatever waits for the live generation: the rebuild reads from its own positions,
and its snapshot's end arrives as a notification, outside the table's change folder. A table
whose runs fail needing a rebuild (policy ``rebuild``) starts one too: that run begins the
rebuild and signals its snapshot through the bootstrap function (the job's
``--signal_function``; the dispatcher reaches no database); a job without one waits for
``cdclake rebuild``. A table that keeps its history is rebuilt as a copy, which signals
nothing: its run begins it for a change of its layout, and a type change parks it. What
waits, the watermark and a compaction's turn are the live generation's: after a swap, the
new one's.

A table whose runs fail is parked or backs off (:mod:`cdclake_merge.failures`), from the same
``GetJobRuns`` answer that finds the run in progress. Tables without failures start first;
retries take at most ``retry_share`` of the budget. Each failed run already pages once
(``stacks/components/merge_job_failures.py``); a parked table starts no run, so it pages no
more.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cdclake_merge.failures import (
    NEEDS_REBUILD,
    Failures,
    Run,
    epoch,
    failures_of,
    held,
    local_runs,
    rebuild_change,
    rebuilt_as_copy,
    recent_runs,
    resumed_at,
    when,
)
from cdclake_merge.generations import Generations, live_generation, rebuilding
from cdclake_merge.pending import Pending, TablePaths, table_pending
from cdclake_merge.storage import FileSystem

# Glue's run states that hold the job (and count against the account's concurrent runs).
IN_PROGRESS = frozenset({"STARTING", "RUNNING", "STOPPING", "WAITING"})
# The tag every merge job of an environment carries, valued with the environment's job name
# prefix: the dispatcher finds its jobs by it (any number of tables; a schedule's input could
# name only a few hundred).
MERGE_JOB_TAG = "cdclake:merge-jobs"
MAX_ERROR_CHARS = 300
DEFAULT_RETRY_SHARE = 0.5
# A turn's defaults where the caller does not say (the Lambda and the CLI take theirs from
# the config: environment.lake.DispatchConfig).
DEFAULT_TURN_SECONDS = 60.0
DEFAULT_BACKOFF_UNIT_SECONDS = 300.0
# A MERGE_ON_READ table compacts inline after this many delta commits
# (hoodie.compact.inline.max.delta.commits, cdclake_merge.hudi_options).
DELTA_COMMITS_PER_COMPACTION = 5


@dataclass(frozen=True)
class Sizing:
    """A table's bounds for a run's workers (its Glue job's; driver included)."""

    worker_type: str
    min_workers: int
    max_workers: int
    bytes_per_executor: int  # merged by an executor within the table's run objective
    max_bytes_per_run: int | None = None  # the run applies at most this much of what waits
    # MERGE_ON_READ: the compaction's IO budget (bytes read and written) and what an executor
    # compacts within the same objective; None: the job never compacts inline.
    compaction_bytes: int | None = None
    compaction_bytes_per_executor: int | None = None
    # The table's freshness objective, Glue's expected start and what an executor merges a
    # second (the measured incremental rate): when a run is due. None: start when work waits.
    freshness_seconds: int | None = None
    start_seconds: int | None = None
    executor_bytes_per_second: int | None = None

    def applied(self, pending_bytes: int) -> int:
        """What a run applies of ``pending_bytes``: all of it, or the byte cap."""
        applied = max(pending_bytes, 0)
        if self.max_bytes_per_run is not None:
            applied = min(applied, self.max_bytes_per_run)
        return applied

    def expected_run_seconds(self, pending_bytes: int) -> float | None:
        """How long a run of ``pending_bytes`` takes from its start request: Glue's start and
        what it applies at the rate on the executors it starts with (compaction aside: it is
        bounded by its own budget). None without an objective's figures."""
        if self.start_seconds is None or not self.executor_bytes_per_second:
            return None
        executors = self.workers_for(pending_bytes) - 1
        return self.start_seconds + self.applied(pending_bytes) / (
            executors * self.executor_bytes_per_second
        )

    def workers_for(self, pending_bytes: int, *, compaction_due: bool = False) -> int:
        """Workers a run of ``pending_bytes`` starts with: the driver and an executor per
        ``bytes_per_executor`` of what the run applies, and per
        ``compaction_bytes_per_executor`` of the compaction's budget when it is due, within
        the bounds."""
        shares = self.applied(pending_bytes) / self.bytes_per_executor
        if compaction_due and self.compaction_bytes and self.compaction_bytes_per_executor:
            shares += self.compaction_bytes / self.compaction_bytes_per_executor
        executors = math.ceil(shares)
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
    defined_at: float | None = None  # epoch seconds the job's definition last changed
    # A type change the table takes only when rebuilt: rebuild it, or stop (park it).
    schema_changes: str = "rebuild"
    # Its rebuild runs can signal the snapshot themselves (the job's --signal_function; the
    # local stack's database): the dispatcher begins a rebuild the table needs.
    signals: bool = False
    # It keeps its history (the job's --history 1): rebuilt as a copy for a layout change
    # only; a type change parks it instead of starting runs that would fail.
    history: bool = False


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
    mode: str = "merge"  # the run's --mode: rebuild while a rebuild is in progress
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
            "mode": self.mode,
            "workers": self.workers,
            "lag_seconds": round(lag, 1) if lag is not None else None,
        }


@dataclass(frozen=True)
class Survey:
    """What the decision needs of one table: what waits, its run in progress (state), and its
    failures since its last successful run."""

    target: Target
    pending: Pending | None = None
    running: str | None = None  # the state of its run in progress
    error: str | None = None
    listed_at: float | None = None  # epoch seconds when its listing began
    failures: Failures | None = None
    resumed_at: float | None = None  # read only while the newest failure parks the table
    compaction_due: bool = False  # read only for a MERGE_ON_READ table that starts
    # The table's state object (none stored: generation 1 live, nothing being built).
    generations: Generations = field(default_factory=Generations)


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
        defined_at=epoch(definition.get("LastModifiedOn")),
        schema_changes=str(arguments.get(SCHEMA_CHANGES_ARGUMENT, "rebuild")),
        signals=bool(arguments.get("--signal_function")),
        history=arguments.get(HISTORY_ARGUMENT, "0") not in ("", "0"),
    )


# The table's schema_changes policy, set on its job only when it is not the default (rebuild).
SCHEMA_CHANGES_ARGUMENT = "--dispatch_schema_changes"
HISTORY_ARGUMENT = "--history"  # 1 where the table keeps its history (LakeConfig.services_of)
SIZING_ARGUMENTS = ("--dispatch_min_workers", "--dispatch_bytes_per_executor")
# The byte cap, on MERGE_ON_READ jobs the compaction's budget and rate, and the objective's
# figures (a job defined before objectives has none).
OPTIONAL_SIZING_ARGUMENTS = (
    "--max_bytes_per_run",
    "--compaction_io_mb",
    "--dispatch_compaction_bytes_per_executor",
    "--dispatch_freshness_seconds",
    "--dispatch_start_seconds",
    "--dispatch_executor_bytes_per_second",
)


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
    for name in (*SIZING_ARGUMENTS, *OPTIONAL_SIZING_ARGUMENTS):
        if name not in arguments:
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
        compaction_bytes=(
            values["--compaction_io_mb"] * 1024**2 if "--compaction_io_mb" in values else None
        ),
        compaction_bytes_per_executor=values.get("--dispatch_compaction_bytes_per_executor"),
        freshness_seconds=values.get("--dispatch_freshness_seconds"),
        start_seconds=values.get("--dispatch_start_seconds"),
        executor_bytes_per_second=values.get("--dispatch_executor_bytes_per_second"),
    )


def run_in_progress(runs: Sequence[Run]) -> str | None:
    """The state of the run in progress among ``runs`` (STARTING, RUNNING, STOPPING,
    WAITING), or None."""
    return next((r.state for r in runs if r.state in IN_PROGRESS), None)


def compaction_due(fs: FileSystem, target: Target, table: str | None = None) -> bool:
    """Whether this table's next commit compacts inline: the delta commits completed since its
    newest completed compaction, from the timeline's file names alone, reach
    :data:`DELTA_COMMITS_PER_COMPACTION` with it, or a compaction was planned and left.
    ``table``: the live generation's name (:func:`live_generation`), else the table's own."""
    names = fs.list_dir(TablePaths.of(target.warehouse, table or target.lake_table).timeline)
    if any(n.endswith(".compaction.requested") for n in names):
        completed = {n.split(".", 1)[0] for n in names if n.endswith(".commit")}
        planned = {n.split(".", 1)[0] for n in names if n.endswith(".compaction.requested")}
        if planned - completed:
            return True
    newest_compaction = max((n for n in names if n.endswith(".commit")), default="")
    deltas = sum(1 for n in names if n.endswith(".deltacommit") and n > newest_compaction)
    return deltas + 1 >= DELTA_COMMITS_PER_COMPACTION


def survey(
    targets: Iterable[Target],
    *,
    fs: FileSystem,
    glue: Any = None,
) -> list[Survey]:
    """Each table's pending files, run in progress and failures (Glue's runs, or on the
    local stack its run log); a table that cannot be read says why."""
    found: list[Survey] = []
    for target in targets:
        # Taken before the listing: a file written while it runs may be missed, never one
        # written before.
        listed_at = time.time()
        try:
            if target.job is None:
                runs = local_runs(fs, target)
            else:
                runs = recent_runs(glue, target.job) if glue is not None else []
            failures = failures_of(runs)
            generations, live = live_generation(fs, target.warehouse, target.lake_table)
            pending = table_pending(
                fs, warehouse=target.warehouse, table=live, changes=target.changes
            )
            resumed = resumed_at(fs, target) if failures and failures.kind else None
            running = run_in_progress(runs)
            sizing = target.sizing
            due = (
                sizing is not None
                and sizing.compaction_bytes is not None
                and running is None
                and _has_work(pending)
                and compaction_due(fs, target, live)
            )
        except Exception as exc:  # one table's fault (a listing, a checkpoint) stops no other
            found.append(Survey(target, error=one_line(exc)))
            continue
        found.append(
            Survey(
                target,
                pending=pending,
                running=running,
                listed_at=listed_at,
                failures=failures,
                resumed_at=resumed,
                compaction_due=due,
                generations=generations,
            )
        )
    return found


def _has_work(pending: Pending | None) -> bool:
    """Files wait, or the last commit's catalog registration (a run without files does it)."""
    return pending is not None and (bool(pending.files) or pending.catalog_unsynced)


def _sized(decision: Decision, survey: Survey) -> Decision:
    """The decision with its run's workers, from what waits, where the table has bounds."""
    sizing = survey.target.sizing
    if sizing is None:
        return decision
    workers = sizing.workers_for(_waiting_bytes(survey), compaction_due=survey.compaction_due)
    return replace(decision, workers=workers, worker_type=sizing.worker_type)


def _waiting_bytes(survey: Survey) -> int:
    return sum(f.size for f in survey.pending.files) if survey.pending else 0


def due_at(survey: Survey, turn_seconds: float) -> float | None:
    """When the table's waiting changes become due (epoch seconds): its objective after the
    oldest of them, less one turn and an expected run of what waits. None: due whenever work
    waits (no objective's figures, what waits reaches the byte cap, or no file waits: a
    catalog registration alone)."""
    sizing = survey.target.sizing
    oldest = survey.pending.oldest if survey.pending else None
    if sizing is None or sizing.freshness_seconds is None or oldest is None:
        return None
    if _at_cap(survey):
        return None
    run = sizing.expected_run_seconds(_waiting_bytes(survey))
    if run is None:
        return None
    return oldest + sizing.freshness_seconds - turn_seconds - run


def _at_cap(survey: Survey) -> bool:
    """What waits is a full run's worth (the job's byte cap)."""
    cap = survey.target.sizing.max_bytes_per_run if survey.target.sizing else None
    return cap is not None and _waiting_bytes(survey) >= cap


def _objective(survey: Survey) -> str:
    seconds = survey.target.sizing.freshness_seconds if survey.target.sizing else None
    return f"objective {(seconds or 0) / 60:g} min"


def _why_due(survey: Survey, turn_seconds: float) -> str:
    """Why a table with an objective starts now, for its reason ('' without one)."""
    sizing = survey.target.sizing
    if sizing is None or sizing.freshness_seconds is None or not survey.pending:
        return ""
    if _at_cap(survey):
        return f"; {_waiting_bytes(survey)} bytes reach the run's cap"
    at = due_at(survey, turn_seconds)
    if at is None:  # files wait, but the job has no expected run's figures
        return ""
    return f"; due since {when(at)} ({_objective(survey)})"


def decide(
    surveys: Sequence[Survey],
    budget: int,
    *,
    retry_share: float = DEFAULT_RETRY_SHARE,
    turn_seconds: float = DEFAULT_TURN_SECONDS,
    backoff_unit_seconds: float = DEFAULT_BACKOFF_UNIT_SECONDS,
    environment: str = "ENV",
    now: float | None = None,
) -> list[Decision]:
    """Start the tables whose work is due (:func:`due_at`) and that have no run in progress,
    while the runs in progress stay within ``budget``: first those whose last run succeeded,
    oldest waiting first, then the failing ones neither parked nor backing off, within
    ``retry_share`` of the budget (at least one run). In the order of ``surveys``.
    ``turn_seconds``: the schedule's, what waiting one more turn costs a table;
    ``backoff_unit_seconds``: a transient failure's first wait; ``environment``: named in a
    parked table's resume command."""
    if budget < 1:
        raise ValueError(f"the budget of concurrent runs must be at least 1, got {budget}")
    now = time.time() if now is None else now
    busy = sum(1 for s in surveys if s.running is not None)
    retrying = sum(1 for s in surveys if s.running is not None and s.failures is not None)
    kept: dict[str, str] = {}
    begun: dict[str, str] = {}  # tables needing a rebuild whose rebuild run begins it
    for s in surveys:
        if s.pending is None:
            continue
        reason = held(
            _holding(s, begun),
            files=s.pending.files,
            defined_at=s.target.defined_at,
            resumed=s.resumed_at,
            now=now,
            backoff_unit_seconds=backoff_unit_seconds,
            resume_command=f"cdclake dispatch --env {environment} --resume {s.target.table}",
            schema_changes=s.target.schema_changes,
            rebuild_command=f"cdclake rebuild --env {environment} --table {s.target.table}",
            keeps_history=s.target.history,
        )
        if reason is not None and (change := _rebuild_to_begin(s)) is not None:
            begun[s.target.table], reason = f"needs rebuild: {change}", None
        at = due_at(s, turn_seconds) if s.failures is None else None
        # A rebuild's runs are not the live table's: no objective spaces them.
        if reason is None and at is not None and now < at and s.generations.building is None:
            reason = f"waiting: due at {when(at)} ({_objective(s)})"
        if reason is not None:
            kept[s.target.table] = reason
    ready = [
        s
        for s in surveys
        if s.error is None
        and s.running is None
        and (_has_work(s.pending) or s.generations.building is not None or s.target.table in begun)
        and s.target.table not in kept
    ]

    def oldest_first(s: Survey) -> tuple[float, str]:
        # A commit missing from the catalog (no file waits) goes first: its run is short.
        return ((s.pending.oldest if s.pending else None) or 0.0, s.target.table)

    healthy = sorted((s for s in ready if _holding(s, begun) is None), key=oldest_first)
    retries = sorted((s for s in ready if _holding(s, begun) is not None), key=oldest_first)
    free = max(budget - busy, 0)
    chosen = {s.target.table for s in healthy[:free]}
    left = free - len(chosen)
    share = max(math.floor(budget * retry_share), 1)
    room = max(min(left, share - retrying), 0)
    chosen |= {s.target.table for s in retries[:room]}
    # A retry left out while runs were free was held by the share, not the budget.
    held_by_share = left > room
    decisions: list[Decision] = []
    for s in surveys:
        files = tuple(f.path for f in s.pending.files) if s.pending else ()
        oldest = s.pending.oldest if s.pending else None
        base = Decision(
            s.target.table, False, "", files, oldest, s.target.job, watermark=watermark(s)
        )
        progress = rebuilding(s.generations) or begun.get(s.target.table)
        if s.error is not None:
            decisions.append(replace(base, reason=f"not read: {s.error}", failed=True))
        elif s.running is not None:
            during = f"; {progress}" if progress else ""
            decisions.append(replace(base, reason=f"a run is in progress ({s.running}){during}"))
        elif progress is not None and s.target.table not in kept:
            if s.target.table in chosen:
                run = replace(base, start=True, reason=f"{progress}: a rebuild run", mode="rebuild")
                decisions.append(_sized(run, s))
            else:
                taken = f"the budget of {budget} concurrent runs is taken"
                decisions.append(replace(base, reason=f"{progress}; {taken}"))
        elif not _has_work(s.pending):
            decisions.append(replace(base, reason="no change files wait"))
        elif s.target.table in kept:
            decisions.append(replace(base, reason=kept[s.target.table]))
        else:
            work = (
                f"{len(files)} change files wait"
                if files
                else "the last commit is not registered in the catalog yet"
            )
            if s.failures is not None:
                work = f"retry after {s.failures.count} failures; {work}"
            else:
                work += _why_due(s, turn_seconds)
            if s.target.table in chosen:
                decisions.append(_sized(replace(base, start=True, reason=work), s))
            elif s.failures is not None and held_by_share:
                taken = f"retries take at most {share} of the {budget} concurrent runs"
                decisions.append(replace(base, reason=f"{work}; {taken}"))
            else:
                taken = f"the budget of {budget} concurrent runs is taken (older changes first)"
                decisions.append(replace(base, reason=f"{work}; {taken}"))
    return decisions


def _holding(survey: Survey, begun: Mapping[str, str]) -> Failures | None:
    """The failures that hold the table: a rebuild in progress or begun this turn is what the
    failures that need one asked for, so they hold it no more (its own runs' failures do)."""
    failures = survey.failures
    rebuilt = survey.generations.building is not None or survey.target.table in begun
    if rebuilt and failures and failures.kind == NEEDS_REBUILD:
        # A copy keeps the live types: a type change its own runs meet holds it still.
        if survey.generations.copy and not rebuilt_as_copy(failures.newest.error):
            return failures
        return None
    return failures


def _rebuild_to_begin(survey: Survey) -> str | None:
    """What changed, when the table's runs fail needing a rebuild, its policy is to rebuild,
    none is in progress, and its rebuild run can signal the snapshot (its first step, a row in
    the database) or, for a table that keeps its history, needs none (a rebuild by copy, of a
    change of its layout): the dispatcher starts that run. None otherwise."""
    failures, target = survey.failures, survey.target
    if failures is None or failures.kind != NEEDS_REBUILD or survey.generations.building:
        return None
    if target.schema_changes != "rebuild":
        return None
    if not (rebuilt_as_copy(failures.newest.error) if target.history else target.signals):
        return None
    return rebuild_change(failures.newest.error) or failures.newest.error


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
        mode = {"Arguments": {"--mode": decision.mode}} if decision.mode != "merge" else {}
        try:
            run_id = str(glue.start_job_run(JobName=decision.job, **size, **mode)["JobRunId"])
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
    retry_share: float = DEFAULT_RETRY_SHARE,
    turn_seconds: float = DEFAULT_TURN_SECONDS,
    backoff_unit_seconds: float = DEFAULT_BACKOFF_UNIT_SECONDS,
    environment: str = "ENV",
    now: float | None = None,
) -> list[Decision]:
    """Survey, decide as of ``now`` (default: when the survey ends) and (unless
    ``dry_run``) start: the dispatcher's whole turn."""
    decisions = decide(
        survey(targets, fs=fs, glue=glue),
        budget,
        retry_share=retry_share,
        turn_seconds=turn_seconds,
        backoff_unit_seconds=backoff_unit_seconds,
        environment=environment,
        now=now,
    )
    return decisions if dry_run else start_runs(glue, decisions)
