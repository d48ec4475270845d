"""The lake section: how merge runs are sized and capped, how the dispatcher starts them, and
what a lake table keeps (versions, savepoints, tombstones), with what each table derives from
them."""

from __future__ import annotations

import re

from pydantic import ByteSize, Field, ValidationError, field_validator, model_validator

from environment.capacity import (
    COMPACTION_BYTES_PER_VCPU_SECOND,
    COMPACTION_TIMEOUT_SHARE,
    FLEX_WORKER_TYPES,
    GLUE_CONCURRENT_RUNS_QUOTA,
    GLUE_START_SECONDS,
    MERGE_BYTES_PER_VCPU_SECOND,
    MERGE_FILES_PER_VCPU_SECOND,
    RUN_TIMEOUT_SHARE,
    WORKER_VCPUS,
)
from environment.fields import (
    ConfigModel,
    FreshnessMinutes,
    Identifier,
    LogRetention,
    WorkerType,
)
from environment.tables import TableConfig


class GlueJobConfig(ConfigModel):
    worker_type: WorkerType = "G.1X"
    # With Glue auto scaling on, the job's NumberOfWorkers is what a run may scale up to; the
    # dispatcher starts each run with what its pending bytes need, within these bounds.
    number_of_workers: int = Field(
        default=2, ge=2, description="workers a run may scale up to (driver included)"
    )
    min_workers: int = Field(
        default=2, ge=2, description="workers a run starts with at least (driver included)"
    )
    flex: bool = False
    timeout_minutes: int = Field(default=60, ge=1)
    max_bad_fraction: float = Field(default=0.01, ge=0.0, le=1.0)
    max_files_per_run: int | None = Field(
        default=None,
        ge=1,
        description="change files one run applies at most (default: from workers and timeout)",
    )
    max_bytes_per_run: ByteSize | None = Field(
        default=None,
        ge=1,
        description="bytes of change files one run applies at most, e.g. 20GiB "
        "(default: from workers and timeout)",
    )

    @model_validator(mode="after")
    def _worker_bounds(self) -> GlueJobConfig:
        if self.min_workers > self.number_of_workers:
            raise ValueError(
                f"min_workers ({self.min_workers}) is more than number_of_workers "
                f"({self.number_of_workers}), the most a run scales up to"
            )
        if self.flex and self.worker_type not in FLEX_WORKER_TYPES:
            types = " or ".join(FLEX_WORKER_TYPES)
            raise ValueError(f"flex runs on {types} workers only, not {self.worker_type}")
        return self

    def _planned_vcpu_seconds_per_executor(self) -> float:
        return WORKER_VCPUS[self.worker_type] * self.timeout_minutes * 60 * RUN_TIMEOUT_SHARE

    def _planned_vcpu_seconds(self) -> float:
        # One worker is the driver; the others run the tasks.
        return (self.number_of_workers - 1) * self._planned_vcpu_seconds_per_executor()

    def bytes_per_executor(self) -> int:
        """Bytes one executor (a worker beside the driver) applies in half the timeout at the
        measured rate: the byte cap's unit (the dispatcher's is :meth:`LakeConfig.dispatch_of`,
        within the table's freshness objective when that is sooner)."""
        return int(self._planned_vcpu_seconds_per_executor() * MERGE_BYTES_PER_VCPU_SECOND)

    def files_per_run(self) -> int:
        """The per-run file cap: configured, or what half the timeout applies at the rate."""
        if self.max_files_per_run is not None:
            return self.max_files_per_run
        return max(int(self._planned_vcpu_seconds() * MERGE_FILES_PER_VCPU_SECOND), 1)

    def bytes_per_run(self) -> int:
        """The per-run byte cap: configured, or what half the timeout applies at the rate."""
        if self.max_bytes_per_run is not None:
            return int(self.max_bytes_per_run)
        return max((self.number_of_workers - 1) * self.bytes_per_executor(), 1)

    def compaction_io_mb(self) -> int:
        """A MERGE_ON_READ compaction's IO budget (MB read and written), what the executors
        rewrite in a quarter of the timeout: Hudi compacts the file groups with the most log
        data first up to it and leaves the rest to the next plan."""
        seconds = self.timeout_minutes * 60 * COMPACTION_TIMEOUT_SHARE
        vcpus = (self.number_of_workers - 1) * WORKER_VCPUS[self.worker_type]
        return max(int(vcpus * seconds * COMPACTION_BYTES_PER_VCPU_SECOND / 1024**2), 1)


# The shortest first wait after a transient failure (DispatchConfig.backoff_unit_seconds).
BACKOFF_MIN_UNIT_SECONDS = 5 * 60
# Hudi cleans after every commit unless told otherwise, and each clean is an instant of its own
# on the timeline (three files, and a commit to the metadata table) that every later write
# lists until archival passes it. Cleaning about once an hour of a busy table's commits keeps
# the timeline ~20 % shorter and runs ~6 % faster at the retention window's steady state
# (docs/reliability.md), at the price of up to an hour of versions past ``retain_hours``.
CLEAN_INTERVAL_MINUTES = 60


class DispatchConfig(ConfigModel):
    """The environment's merge dispatcher: how often it looks, how many runs it allows."""

    schedule: str = Field(
        default="rate(1 minute)",
        description="EventBridge rate(...) or an every-N-minutes cron(...): how often the "
        "dispatcher looks for change files due; a turn that starts nothing costs one Lambda "
        "call and the tables' listings (cdclake cost prices them)",
    )
    max_concurrent_runs: int = Field(
        default=10,
        ge=1,
        lt=GLUE_CONCURRENT_RUNS_QUOTA,
        description="merge runs of this environment in progress at once, at most (below "
        "Glue's account quota of 50 concurrent runs)",
    )
    retry_share: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="the share of max_concurrent_runs that runs of failing tables may take "
        "(at least one run): tables whose last run succeeded start first",
    )

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        if not re.fullmatch(r"(cron|rate)\(.+\)", value):
            raise ValueError("must be cron(...) or rate(...)")
        if _interval_minutes(value) is None:
            # A table is due a turn before its objective would be missed: the dispatcher
            # must know how long a turn is.
            raise ValueError(
                "must turn at a fixed interval: rate(N minutes|hours) or cron(0/N * * * ? *)"
            )
        return value

    def interval_minutes(self) -> int:
        """Minutes between two turns."""
        minutes = _interval_minutes(self.schedule)
        assert minutes is not None  # the validator refuses a schedule without one
        return minutes

    def turn_seconds(self) -> int:
        """Seconds between two turns: what waiting one more turn costs a table's lag."""
        return self.interval_minutes() * 60

    def backoff_unit_seconds(self) -> int:
        """The first retry's wait after a transient failure (then 2, 4 … times it, at most 6
        hours): one turn, but at least :data:`BACKOFF_MIN_UNIT_SECONDS`. Not the turn alone:
        with one-minute turns a throttled or capacity-starved table would be retried every
        minute, each retry billed Glue's minimum, while what failed it clears on AWS's time,
        not the schedule's. Not the table's objective: a transient failure of a daily table
        would then wait six hours. Five minutes is the shortest objective there is, so a
        5-minute table's first retry still comes within one objective of its failure."""
        return max(self.turn_seconds(), BACKOFF_MIN_UNIT_SECONDS)


def _interval_minutes(schedule: str) -> int | None:
    """Minutes between two turns of ``rate(...)`` or an every-N-minutes cron; else None."""
    rate = re.fullmatch(r"rate\((\d+) (minute|hour|day)s?\)", schedule)
    if rate:
        return int(rate[1]) * {"minute": 1, "hour": 60, "day": 1440}[rate[2]]
    cron = re.fullmatch(r"cron\((?:0|\*)/(\d+) \* \* \* \? \*\)", schedule)
    return int(cron[1]) if cron else None


class LakeConfig(ConfigModel):
    glue_database: Identifier = "cdclake"
    change_file_expiration_days: int = Field(default=30, ge=1)
    quarantine_expiration_days: int = Field(default=90, ge=1)
    tombstone_retention_days: int = Field(
        default=14,
        ge=1,
        description=(
            "how long the merge remembers a deleted key, so that a redelivered older change "
            "cannot bring its row back: at least the topics' retention plus a segment's age"
        ),
    )
    retain_hours: int = Field(
        default=24,
        ge=1,
        le=24 * 30,
        description=(
            "how far back a lake table's file versions are kept (Hudi's cleaner, by hours) and "
            "the bucket's noncurrent object versions with them: a restore or time-travel read "
            "reaches this far, savepoints further"
        ),
    )
    savepoint_days: int = Field(
        default=7,
        ge=1,
        le=90,
        description="a savepoint per lake table each day, the newest this many kept",
    )
    job_log_retention: LogRetention = Field(
        default="ONE_MONTH",
        description="how long the merge jobs' logs (driver and executors) are kept",
    )
    glue_job: GlueJobConfig = Field(default_factory=GlueJobConfig)
    dispatch: DispatchConfig = Field(default_factory=DispatchConfig)
    freshness_minutes: FreshnessMinutes = Field(
        default=60,
        description="lag objective of every lake table (its alarm), unless the table sets one",
    )

    @model_validator(mode="after")
    def _change_files_outlive_savepoints(self) -> LakeConfig:
        # A restore goes back to a savepoint up to savepoint_days + 1 days old, and the next
        # run applies again every change file since: they must still be there.
        if self.change_file_expiration_days <= self.savepoint_days + 1:
            raise ValueError(
                f"change_file_expiration_days ({self.change_file_expiration_days}) must be more "
                f"than savepoint_days + 1 ({self.savepoint_days + 1}): a restore to the oldest "
                "savepoint applies again every change file written since"
            )
        return self

    def services_of(self, table: TableConfig) -> dict[str, int]:
        """The table's services as the merge's sink takes them (``open_sink``'s keywords, the
        Glue job's arguments of the same names): how far back file versions and savepoints
        reach, how many commits between cleans (about an hour's at the table's freshness
        objective, which a busy table commits at), the record index sized for life, and on
        MERGE_ON_READ a compaction's IO budget (with the merge's half of the timeout, a capped
        run that compacts ends inside it), and a table that keeps its history says so (1; left
        out otherwise, so jobs defined before history read as they did)."""
        services = {
            "retain_hours": table.retain_hours or self.retain_hours,
            "savepoint_days": self.savepoint_days,
            "clean_every_commits": max(1, CLEAN_INTERVAL_MINUTES // self.freshness_of(table)),
            "record_index_file_groups": table.record_index_file_groups,
        }
        if table.hudi_table_type == "MERGE_ON_READ":
            services["compaction_io_mb"] = self.glue_job_of(table).compaction_io_mb()
        if table.history:
            services["history"] = 1
        return services

    def dispatch_of(self, table: TableConfig) -> dict[str, int | str]:
        """The dispatcher's bounds of a run of the table (the Glue job's arguments of these
        names, which the script ignores): at least min_workers, and an executor per what one
        merges at the measured incremental rate within the table's freshness objective or half
        the timeout, the sooner, so a backlog that min_workers cannot apply in that time gets
        more; on MERGE_ON_READ also per what one compacts in that time of the compaction's
        budget, on the runs whose inline compaction is due. With them, what decides when a run
        is due: the table's objective, Glue's expected start and what an executor merges a
        second (``cdclake_merge.dispatch.due_at``). A table whose ``schema_changes`` is
        ``stop`` says so (the dispatcher parks it on a type change that needs a rebuild); the
        default, ``rebuild``, is left out, so jobs defined before the policy read as it."""
        job = self.glue_job_of(table)
        seconds = min(self.freshness_of(table) * 60, job.timeout_minutes * 60 * RUN_TIMEOUT_SHARE)
        vcpus = WORKER_VCPUS[job.worker_type]
        sizing: dict[str, int | str] = {
            "dispatch_min_workers": job.min_workers,
            "dispatch_bytes_per_executor": int(vcpus * seconds * MERGE_BYTES_PER_VCPU_SECOND),
            # When a run is due: the objective, Glue's start and an executor's rate.
            "dispatch_freshness_seconds": self.freshness_of(table) * 60,
            "dispatch_start_seconds": GLUE_START_SECONDS,
            "dispatch_executor_bytes_per_second": vcpus * MERGE_BYTES_PER_VCPU_SECOND,
        }
        if table.hudi_table_type == "MERGE_ON_READ":
            compacted = int(vcpus * seconds * COMPACTION_BYTES_PER_VCPU_SECOND)
            sizing["dispatch_compaction_bytes_per_executor"] = compacted
        if table.schema_changes != "rebuild":
            sizing["dispatch_schema_changes"] = table.schema_changes
        return sizing

    def rebuild_of(self, table: TableConfig) -> dict[str, str]:
        """What the table's rebuild runs take from config (the Glue job's arguments of these
        names): ``drop_columns`` where it is ``drop``; the default, ``keep``, is left out, so
        jobs defined before the policy read as it."""
        return {} if table.drop_columns == "keep" else {"drop_columns": table.drop_columns}

    def freshness_of(self, table: TableConfig) -> int:
        """Minutes the table may lag its source before its alarm fires."""
        return table.freshness_minutes or self.freshness_minutes

    def glue_job_of(self, table: TableConfig) -> GlueJobConfig:
        """The table's effective merge job settings: its own ``glue_job`` over ``lake.glue_job``
        (the job's template, its per-run caps and the dispatcher's bounds all read this).
        ValueError naming the table when the two together do not hold."""
        own = table.glue_job.model_dump(exclude_none=True)
        if not own:
            return self.glue_job
        try:
            return GlueJobConfig.model_validate({**self.glue_job.model_dump(), **own})
        except ValidationError as exc:
            reasons = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise ValueError(f"tables[{table.name}].glue_job: {reasons}") from None
