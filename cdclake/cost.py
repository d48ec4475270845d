"""What the merge runs cost a month: the dispatcher's design beside a bare schedule (issue 26),
each lake table's freshness objective, and the dispatcher's own turns (issue 47).

A Glue run is paid per DPU-second for at least a minute. The dispatcher starts a table's run
only in a cycle (a turn of ``lake.dispatch.schedule``) in which change files wait; a bare
schedule starts every table's run every cycle, whether anything changed or not. This module
turns an environment's config and a change profile into DPU-hours and USD a month for both,
from the constants below. Pure arithmetic on the config: no AWS, no Spark.

An objective's price (:func:`objective_month`): a table whose changes never stop is due about
once per objective less an expected run (the dispatcher starts it when its oldest change would
otherwise miss the objective), so a 5-minute table runs about twelve times as often as a
60-minute one, each run billed at least Glue's minute. A turn's own price (:func:`turns_month`):
a turn that starts nothing still costs its Lambda call and each table's S3 requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdclake_merge.dispatch import Sizing
from environment.capacity import GLUE_START_SECONDS, WORKER_VCPUS
from environment.config import EnvironmentConfig
from environment.lake import GlueJobConfig
from environment.tables import TableConfig

# --- Constants, each with its source (docs/cost.md#cost-model) -------------------------------

# Glue prices per DPU-hour (aws.amazon.com/glue/pricing, Spark jobs, us-east-1):
# standard 0.44 USD; Flex 0.29 USD ("up to 34 %" less) for runs that may start late.
USD_PER_DPU_HOUR = 0.44
USD_PER_DPU_HOUR_FLEX = 0.29
# Glue 2.0 and later bill per second with a one-minute minimum per run (the pricing page):
# a run that finds nothing pays the minimum.
MINIMUM_BILLED_SECONDS = 60.0
# DPUs of one worker (Glue's worker types): what a worker is billed as.
WORKER_DPUS = {"G.1X": 1, "G.2X": 2, "G.4X": 4, "G.8X": 8}
# Measured: the merge's own work when nothing is new, over 100,000 applied change files
# (docs/reliability.md, "History": 0.47 s).
NOOP_RUN_SECONDS = 0.47
# Measured: 10,000 changes merged into a 3,000,000-row MERGE_ON_READ table in 20.71 s on
# 2 vCPUs (bench/results/merge_incremental-20261123-235246.json), every stage of the run
# included, so a conservative rate for small batches; scaled by the run's executor vCPUs.
BENCH_EVENTS = 10_000
BENCH_SECONDS = 20.71
BENCH_VCPUS = 2
EVENTS_PER_VCPU_SECOND = BENCH_EVENTS / BENCH_SECONDS / BENCH_VCPUS
# Measured: bytes of change files an event takes, schema-included Debezium envelopes
# (bench/results/initial_load-20261124-093749.json: 3,607,260,979 bytes for 1,000,000 rows);
# the dispatcher sizes a run's workers by the bytes waiting.
BYTES_PER_EVENT = 3_607_260_979 / 1_000_000
# A month of cycles: 30 days.
MONTH_MINUTES = 30 * 24 * 60

# A table whose changes never stop, priced at its objective: the profile's busy table (10,000
# events a 15-minute cycle) all month.
CONTINUOUS_EVENTS_PER_HOUR = 40_000
# The objectives every lake table is also priced at, beside its own.
COMPARED_OBJECTIVES = (5, 60)

# A dispatcher turn (lambdas/dispatcher), priced at list prices, us-east-1:
# Lambda (aws.amazon.com/lambda/pricing, x86): 0.20 USD per million requests and
# 0.0000166667 USD per GB-second; the function has CDK's default 128 MB.
USD_PER_LAMBDA_REQUEST = 0.20 / 1_000_000
USD_PER_LAMBDA_GB_SECOND = 0.0000166667
DISPATCHER_MEMORY_GB = 128 / 1024
# Measured: a turn's seconds a table, 24.55 s for 500 tables against moto
# (bench/results/dispatch_turn-20261128-085651.json); AWS's own latency is not in it.
TURN_SECONDS_PER_TABLE = 0.0491  # 24.55 s / 500
# Measured in the same turn: a table's S3 requests, 4 listings and 3 reads (the newest commit,
# its checkpoint, the rebuild state object); its GetJob and GetJobRuns are Glue job API
# calls, which Glue does not bill.
# S3 Standard (aws.amazon.com/s3/pricing): 0.005 USD per 1,000 LIST and 0.0004 USD per 1,000
# GET requests.
S3_LISTS_PER_TABLE = 4  # 2,000 ListObjectsV2 / 500
S3_GETS_PER_TABLE = 3  # 1,500 GetObject / 500 (the third: the rebuild state object, issue #49)
USD_PER_S3_LIST = 0.005 / 1000
USD_PER_S3_GET = 0.0004 / 1000
# The environment's own each turn: the heartbeat folder's listing, and PutMetricData (one per
# 1,000 lag datapoints, one for the heartbeat age) at CloudWatch's 0.01 USD per 1,000
# requests (aws.amazon.com/cloudwatch/pricing).
S3_LISTS_PER_TURN = 1
USD_PER_PUT_METRIC_DATA = 0.01 / 1000
LAG_DATAPOINTS_PER_PUT = 1000

# Targets (issue 26): an idle table costs nothing; the profile at most this share of bare.
PROFILE_TABLES = 100
PROFILE_ACTIVE_SHARE = 0.1
PROFILE_EVENTS_PER_RUN = BENCH_EVENTS
TARGET_PROFILE_SHARE = 0.15


class CostError(ValueError):
    """A profile or config the model cannot price; the message names what and why."""


def glue_job_of(config: EnvironmentConfig, table: TableConfig) -> GlueJobConfig:
    """The Glue job settings of ``table``'s merge runs: its own over the lake's."""
    return config.lake.glue_job_of(table)


def dispatched_workers(job: GlueJobConfig, events: int) -> int:
    """Workers the dispatcher starts a run of ``events`` with: its own sizing, by bytes."""
    sizing = Sizing(
        worker_type=job.worker_type,
        min_workers=job.min_workers,
        max_workers=job.number_of_workers,
        bytes_per_executor=job.bytes_per_executor(),
        max_bytes_per_run=job.bytes_per_run(),
    )
    return sizing.workers_for(int(events * BYTES_PER_EVENT))


def run_seconds(job: GlueJobConfig, events: int, workers: int) -> float:
    """Seconds a run of ``workers`` applying ``events`` lasts: Glue's start, the no-op work,
    the events at the measured rate on its executors (the workers beside the driver)."""
    executor_vcpus = (workers - 1) * WORKER_VCPUS[job.worker_type]
    return (
        GLUE_START_SECONDS + NOOP_RUN_SECONDS + events / (EVENTS_PER_VCPU_SECOND * executor_vcpus)
    )


def run_dpu_hours(job: GlueJobConfig, events: int, workers: int) -> float:
    """DPU-hours one run is billed: its seconds, at least the minimum, times its DPUs."""
    billed = max(MINIMUM_BILLED_SECONDS, run_seconds(job, events, workers))
    return billed * workers * WORKER_DPUS[job.worker_type] / 3600


def usd_per_dpu_hour(job: GlueJobConfig) -> float:
    return USD_PER_DPU_HOUR_FLEX if job.flex else USD_PER_DPU_HOUR


@dataclass(frozen=True)
class Design:
    """One design's month: runs started, DPU-hours and USD billed."""

    runs: float
    dpu_hours: float
    usd: float

    def as_dict(self) -> dict[str, float]:
        return {
            "runs": round(self.runs, 1),
            "dpu_hours": round(self.dpu_hours, 3),
            "usd": round(self.usd, 2),
        }

    def __add__(self, other: Design) -> Design:
        return Design(
            self.runs + other.runs, self.dpu_hours + other.dpu_hours, self.usd + other.usd
        )


NOTHING = Design(0.0, 0.0, 0.0)


def table_month(
    job: GlueJobConfig, *, cycles: float, active_share: float, events_per_run: int
) -> tuple[Design, Design]:
    """(dispatcher, bare schedule) for one table with changes in ``active_share`` of cycles.

    The dispatcher starts a run only in a cycle whose change files wait, with the workers its
    sizing gives the bytes waiting; the bare schedule starts one every cycle with the job's
    configured workers (the design before issue 26)."""
    usd = usd_per_dpu_hour(job)
    active_cycles = cycles * active_share if events_per_run > 0 else 0.0
    sized = run_dpu_hours(job, events_per_run, dispatched_workers(job, events_per_run))
    dispatched = Design(active_cycles, active_cycles * sized, active_cycles * sized * usd)
    busy = run_dpu_hours(job, events_per_run, job.number_of_workers)
    idle = run_dpu_hours(job, 0, job.number_of_workers)
    bare_hours = active_cycles * busy + (cycles - active_cycles) * idle
    return dispatched, Design(cycles, bare_hours, bare_hours * usd)


@dataclass(frozen=True)
class Estimate:
    """The month of ``tables`` lake tables under a change profile, both designs."""

    scope: str  # "configured" (the environment's lake tables) or "profile"
    tables: int
    active_share: float
    events_per_run: int
    dispatcher: Design
    bare_schedule: Design

    @property
    def share_of_bare(self) -> float:
        """The dispatcher's DPU-hours as a share of the bare schedule's."""
        if self.bare_schedule.dpu_hours == 0:
            return 0.0
        return self.dispatcher.dpu_hours / self.bare_schedule.dpu_hours

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "tables": self.tables,
            "active_share": self.active_share,
            "events_per_run": self.events_per_run,
            "dispatcher": self.dispatcher.as_dict(),
            "bare_schedule": self.bare_schedule.as_dict(),
            "share_of_bare": round(self.share_of_bare, 4),
        }


def cycle_minutes(config: EnvironmentConfig) -> int:
    """Minutes between two dispatcher turns; a bare schedule is priced at the same cadence."""
    return config.lake.dispatch.interval_minutes()


@dataclass(frozen=True)
class ObjectivePrice:
    """A table changing all month, run at ``freshness_minutes``: its expected run, the minutes
    between two starts, and its month."""

    freshness_minutes: int
    run_seconds: float
    minutes_between_runs: float
    events_per_run: int
    workers: int
    month: Design

    def as_dict(self) -> dict[str, Any]:
        return {
            "freshness_minutes": self.freshness_minutes,
            "run_seconds": round(self.run_seconds, 1),
            "minutes_between_runs": round(self.minutes_between_runs, 2),
            "events_per_run": self.events_per_run,
            "workers": self.workers,
            **self.month.as_dict(),
        }


def objective_month(
    job: GlueJobConfig, *, freshness_minutes: int, events_per_hour: int
) -> ObjectivePrice:
    """One table whose ``events_per_hour`` never stop, due every ``freshness_minutes``.

    A run starts when the oldest change would otherwise miss the objective, so two starts are
    an objective less an expected run apart (``P = O - run``), and a run applies what came in
    since the last (``events = rate * P``). With the run's seconds ``a + k * events`` (Glue's
    start and the no-op work, then the events at the measured rate on the executors of the
    workers an objective's events are sized to), ``run = (a + k * rate * O) / (1 + k * rate)``.
    Each run is billed at least the minute."""
    if events_per_hour < 0:
        raise CostError(f"--events-per-hour {events_per_hour}: a count of events, 0 or more")
    objective = freshness_minutes * 60.0
    rate = events_per_hour / 3600
    workers = dispatched_workers(job, round(rate * objective))
    fixed = GLUE_START_SECONDS + NOOP_RUN_SECONDS
    per_event = 1 / (EVENTS_PER_VCPU_SECOND * (workers - 1) * WORKER_VCPUS[job.worker_type])
    run = (fixed + per_event * rate * objective) / (1 + per_event * rate)
    period = objective - run
    runs = MONTH_MINUTES * 60 / period
    hours = runs * max(MINIMUM_BILLED_SECONDS, run) * workers * WORKER_DPUS[job.worker_type] / 3600
    month = Design(runs, hours, hours * usd_per_dpu_hour(job))
    return ObjectivePrice(freshness_minutes, run, period / 60, round(rate * period), workers, month)


@dataclass(frozen=True)
class TableObjectives:
    """A lake table at its own objective and at :data:`COMPARED_OBJECTIVES`."""

    table: str
    freshness_minutes: int
    prices: tuple[ObjectivePrice, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "freshness_minutes": self.freshness_minutes,
            "prices": [p.as_dict() for p in self.prices],
        }


def objectives(config: EnvironmentConfig, *, events_per_hour: int) -> list[TableObjectives]:
    """Each lake table changing ``events_per_hour`` all month, priced per objective."""
    priced = []
    for table in config.lake_tables:
        own = config.lake.freshness_of(table)
        job = glue_job_of(config, table)
        prices = tuple(
            objective_month(job, freshness_minutes=m, events_per_hour=events_per_hour)
            for m in sorted({own, *COMPARED_OBJECTIVES})
        )
        priced.append(TableObjectives(table.name, own, prices))
    return priced


@dataclass(frozen=True)
class Turns:
    """The dispatcher's turns of a month over ``tables`` tables, each of them starting
    nothing: its Lambda calls, its S3 requests and its metric puts."""

    turns: float
    tables: int
    lambda_usd: float
    s3_usd: float
    cloudwatch_usd: float

    @property
    def usd(self) -> float:
        return self.lambda_usd + self.s3_usd + self.cloudwatch_usd

    def as_dict(self) -> dict[str, float]:
        return {
            "turns": round(self.turns, 1),
            "tables": self.tables,
            "lambda_usd": round(self.lambda_usd, 4),
            "s3_usd": round(self.s3_usd, 4),
            "cloudwatch_usd": round(self.cloudwatch_usd, 4),
            "usd": round(self.usd, 4),
        }


def turns_month(config: EnvironmentConfig, tables: int | None = None) -> Turns:
    """A month of the environment's turns over its lake tables (or ``tables`` of them)."""
    count = len(config.lake_tables) if tables is None else tables
    turns = MONTH_MINUTES / cycle_minutes(config)
    seconds = TURN_SECONDS_PER_TABLE * count
    lambda_usd = turns * (
        USD_PER_LAMBDA_REQUEST + seconds * DISPATCHER_MEMORY_GB * USD_PER_LAMBDA_GB_SECOND
    )
    lists = S3_LISTS_PER_TURN + S3_LISTS_PER_TABLE * count
    s3_usd = turns * (lists * USD_PER_S3_LIST + S3_GETS_PER_TABLE * count * USD_PER_S3_GET)
    puts = -(-count // LAG_DATAPOINTS_PER_PUT) + 1
    return Turns(turns, count, lambda_usd, s3_usd, turns * puts * USD_PER_PUT_METRIC_DATA)


def _check_profile(active_share: float, events_per_run: int, tables: int | None) -> None:
    if not 0.0 <= active_share <= 1.0:
        raise CostError(f"--active-share {active_share}: a share of the tables, from 0 to 1")
    if events_per_run < 0:
        raise CostError(f"--events-per-run {events_per_run}: a count of events, 0 or more")
    if tables is not None and tables < 1:
        raise CostError(f"--tables {tables}: at least one table")


def estimate(
    config: EnvironmentConfig,
    *,
    active_share: float,
    events_per_run: int,
    tables: int | None = None,
) -> Estimate:
    """The month of ``config``'s lake tables, or of ``tables`` tables with the lake's job."""
    _check_profile(active_share, events_per_run, tables)
    cycles = MONTH_MINUTES / cycle_minutes(config)
    if tables is None:
        jobs = [glue_job_of(config, table) for table in config.lake_tables]
        scope = "configured"
    else:
        # Hypothetical tables take the lake section's job, the default of every table.
        jobs = [config.lake.glue_job] * tables
        scope = "profile"
    dispatcher, bare = NOTHING, NOTHING
    for job in jobs:
        dispatched, scheduled = table_month(
            job, cycles=cycles, active_share=active_share, events_per_run=events_per_run
        )
        dispatcher, bare = dispatcher + dispatched, bare + scheduled
    return Estimate(scope, len(jobs), active_share, events_per_run, dispatcher, bare)


@dataclass(frozen=True)
class Report:
    """What ``cdclake cost`` prints: both scopes, the constants, the targets."""

    env: str
    cycle_minutes: int
    configured: Estimate
    profile: Estimate
    idle_table_dpu_hours: float
    events_per_hour: int
    objectives: tuple[TableObjectives, ...]
    turns: Turns
    profile_turns: Turns

    @property
    def idle_target_met(self) -> bool:
        return self.idle_table_dpu_hours == 0.0

    @property
    def profile_target_met(self) -> bool:
        return self.profile.share_of_bare <= TARGET_PROFILE_SHARE

    def as_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "cycle_minutes": self.cycle_minutes,
            "estimates": [self.configured.as_dict(), self.profile.as_dict()],
            "targets": {
                "idle_table_dpu_hours": self.idle_table_dpu_hours,
                "idle_table_met": self.idle_target_met,
                "profile_share_of_bare": round(self.profile.share_of_bare, 4),
                "profile_share_at_most": TARGET_PROFILE_SHARE,
                "profile_met": self.profile_target_met,
            },
            "objectives": {
                "events_per_hour": self.events_per_hour,
                "tables": [t.as_dict() for t in self.objectives],
            },
            "turns": [self.turns.as_dict(), self.profile_turns.as_dict()],
            "constants": constants(),
        }


def report(
    config: EnvironmentConfig,
    *,
    tables: int = PROFILE_TABLES,
    active_share: float = PROFILE_ACTIVE_SHARE,
    events_per_run: int = PROFILE_EVENTS_PER_RUN,
    events_per_hour: int = CONTINUOUS_EVENTS_PER_HOUR,
) -> Report:
    """The configured tables and a ``tables``-table profile under the same change profile;
    each lake table's objective for a table changing ``events_per_hour`` all month; the turns
    over the configured tables and over the profile's."""
    configured = estimate(config, active_share=active_share, events_per_run=events_per_run)
    profile = estimate(
        config, active_share=active_share, events_per_run=events_per_run, tables=tables
    )
    # A table that never has changes: the dispatcher starts nothing for it.
    idle = estimate(config, active_share=0.0, events_per_run=events_per_run, tables=1)
    return Report(
        config.env,
        cycle_minutes(config),
        configured,
        profile,
        idle.dispatcher.dpu_hours,
        events_per_hour,
        tuple(objectives(config, events_per_hour=events_per_hour)),
        turns_month(config),
        turns_month(config, tables),
    )


def constants() -> dict[str, float]:
    return {
        "usd_per_dpu_hour": USD_PER_DPU_HOUR,
        "usd_per_dpu_hour_flex": USD_PER_DPU_HOUR_FLEX,
        "minimum_billed_seconds": MINIMUM_BILLED_SECONDS,
        "glue_start_seconds": GLUE_START_SECONDS,
        "noop_run_seconds": NOOP_RUN_SECONDS,
        "bytes_per_event": round(BYTES_PER_EVENT),
        "events_per_vcpu_second": round(EVENTS_PER_VCPU_SECOND, 1),
        "month_minutes": MONTH_MINUTES,
        "usd_per_lambda_request": USD_PER_LAMBDA_REQUEST,
        "usd_per_lambda_gb_second": USD_PER_LAMBDA_GB_SECOND,
        "dispatcher_memory_gb": DISPATCHER_MEMORY_GB,
        "turn_seconds_per_table": TURN_SECONDS_PER_TABLE,
        "s3_lists_per_table": S3_LISTS_PER_TABLE,
        "s3_gets_per_table": S3_GETS_PER_TABLE,
        "usd_per_s3_list": USD_PER_S3_LIST,
        "usd_per_s3_get": USD_PER_S3_GET,
        "usd_per_put_metric_data": USD_PER_PUT_METRIC_DATA,
    }
