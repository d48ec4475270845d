"""Typed environment configuration: the one place that names the replicated tables.

Every stack, connector config, Glue job and Hudi table is derived from an
:class:`EnvironmentConfig` loaded from ``config/<env>.yaml``. Validation happens
at load time so a typo fails ``cdk synth`` with the file, the field and the
reason, instead of surfacing as a broken connector after deploy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from environment.capacity import (
    COMPACTION_BYTES_PER_VCPU_SECOND,
    COMPACTION_TIMEOUT_SHARE,
    DEFAULT_EXPECTED_ROWS,
    FLEX_WORKER_TYPES,
    GLUE_CONCURRENT_RUNS_QUOTA,
    MERGE_BYTES_PER_VCPU_SECOND,
    MERGE_FILES_PER_VCPU_SECOND,
    RUN_TIMEOUT_SHARE,
    WORKER_VCPUS,
    record_index_file_groups,
)
from environment.names import merge_job_prefix, resource_name
from environment.paths import CONFIG_DIR, PLUGIN_DIST_DIR

# PostgreSQL identifiers as Debezium include lists and publications accept them unquoted.
Identifier = Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]{0,62}$")]
Prefix = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{1,30}[a-z0-9]$")]
HudiTableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
ReplicaIdentity = Literal["DEFAULT", "FULL"]
Op = Literal["c", "u", "d", "r", "t"]
# The two Debezium captures: MSK Connect into the lake, Debezium Server into the fan-out.
Capture = Literal["lake", "fanout"]
# A lake table's lag objective is also its alarm's period: CloudWatch allows at most one day.
FreshnessMinutes = Annotated[int, Field(ge=5, le=1440)]
# Names of aws_logs.RetentionDays members.
LogRetention = Literal[
    "ONE_WEEK", "TWO_WEEKS", "ONE_MONTH", "THREE_MONTHS", "SIX_MONTHS", "ONE_YEAR", "TWO_YEARS"
]
# Glue's worker types the merge runs on (G.*: the ones auto scaling and a run's own size take).
WorkerType = Literal["G.1X", "G.2X", "G.4X", "G.8X"]
# Column types the merge job understands for shapes that carry no schema (Spark SQL DDL names).
ColumnType = Annotated[
    str,
    StringConstraints(
        pattern=r"^(string|boolean|smallint|int|bigint|float|double|date|timestamp|binary"
        r"|decimal\(\d{1,2},\s*\d{1,2}\))$"
    ),
]


class ConfigError(ValueError):
    """An environment file that cannot be used; the message names file, field and reason."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FanOutRouting(_Model):
    """How a table's changes look on the EventBridge bus."""

    source: str | None = Field(
        default=None, description="EventBridge Source; default cdc.<schema>.<table>"
    )
    detail_type: str | None = Field(
        default=None, description="EventBridge DetailType; default '<schema>.<table> changed'"
    )


class GlueJobSizing(_Model):
    """A lake table's own merge workers; what it leaves out comes from ``lake.glue_job``."""

    worker_type: WorkerType | None = None
    number_of_workers: int | None = Field(
        default=None, ge=2, description="workers a run may scale up to (driver included)"
    )
    min_workers: int | None = Field(
        default=None, ge=2, description="workers a run starts with at least (driver included)"
    )


class TableConfig(_Model):
    """One replicated table."""

    name: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$")] = (
        Field(description="schema.table in PostgreSQL")
    )
    primary_key: list[Identifier] = Field(min_length=1)
    partition_by: list[Identifier] = Field(default_factory=list)
    hudi_table_type: HudiTableType = "COPY_ON_WRITE"
    replica_identity: ReplicaIdentity = "DEFAULT"
    exclude_columns: list[Identifier] = Field(default_factory=list)
    column_types: dict[Identifier, ColumnType] = Field(
        default_factory=dict,
        description="Types for change files without a schema (envelope/flattened shapes)",
    )
    lake: bool = True
    fanout: bool = False
    routing: FanOutRouting = Field(default_factory=FanOutRouting)
    freshness_minutes: FreshnessMinutes | None = Field(
        default=None, description="lake lag objective; default lake.freshness_minutes"
    )
    glue_job: GlueJobSizing = Field(
        default_factory=GlueJobSizing,
        description="the table's merge workers; default lake.glue_job's",
    )
    retain_hours: int | None = Field(
        default=None,
        ge=1,
        le=24 * 30,
        description=(
            "how far back this lake table's file versions are kept; default lake.retain_hours "
            "(a COPY_ON_WRITE table with random-key updates keeps a copy of itself per run in it)"
        ),
    )
    expected_rows: int = Field(
        default=DEFAULT_EXPECTED_ROWS,
        ge=1,
        description=(
            "rows the lake table is expected to reach in its life: sizes its record index "
            "when the table is first written (a later change needs a rebuild)"
        ),
    )

    @model_validator(mode="after")
    def _columns_consistent(self) -> TableConfig:
        excluded_keys = sorted(set(self.primary_key) & set(self.exclude_columns))
        if excluded_keys:
            raise ValueError(f"primary key column(s) {excluded_keys} cannot be excluded")
        excluded_parts = sorted(set(self.partition_by) & set(self.exclude_columns))
        if excluded_parts:
            raise ValueError(f"partition column(s) {excluded_parts} cannot be excluded")
        if len(set(self.primary_key)) != len(self.primary_key):
            raise ValueError("primary_key lists a column twice")
        if not (self.lake or self.fanout):
            raise ValueError("table goes nowhere: set lake and/or fanout to true")
        if self.freshness_minutes is not None and not self.lake:
            raise ValueError("freshness_minutes is the lake's objective: the table has lake: false")
        if self.retain_hours is not None and not self.lake:
            raise ValueError("retain_hours keeps lake file versions: the table has lake: false")
        if "expected_rows" in self.model_fields_set and not self.lake:
            raise ValueError("expected_rows sizes the lake table: the table has lake: false")
        if self.glue_job.model_fields_set and not self.lake:
            raise ValueError("glue_job sizes the lake's merge: the table has lake: false")
        return self

    @property
    def schema_name(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def table_name(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def lake_table_name(self) -> str:
        """Name of the Hudi/Glue table: schema and table joined, unique per database."""
        return f"{self.schema_name}_{self.table_name}"

    def merge_job_name(self, prefix: str) -> str:
        """The table's Glue merge job, ``<prefix>-merge-<schema>-<table>`` (hyphens only)."""
        return merge_job_prefix(prefix) + self.lake_table_name.replace("_", "-")

    @property
    def record_index_file_groups(self) -> int:
        """The record index's file groups, from :attr:`expected_rows`."""
        return record_index_file_groups(self.expected_rows)

    @property
    def event_source(self) -> str:
        return self.routing.source or f"cdc.{self.name}"

    @property
    def event_detail_type(self) -> str:
        return self.routing.detail_type or f"{self.name} changed"


class NetworkConfig(_Model):
    cidr: str = "10.20.0.0/16"
    max_azs: int = Field(default=2, ge=2, le=3)
    nat_gateways: int = Field(default=1, ge=1, le=3)
    flow_log_retention: LogRetention = "ONE_MONTH"

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        if not re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}/(1[6-9]|2[0-4])", value):
            raise ValueError("must be an IPv4 CIDR between /16 and /24, e.g. 10.20.0.0/16")
        return value


class ReplicationConfig(_Model):
    """Logical replication objects the bootstrap creates and the connectors use."""

    publication: Identifier = "cdclake_publication"
    slot: Identifier = Field(default="cdclake_msk", description="slot of the MSK Connect source")
    fanout_slot: Identifier = Field(default="cdclake_fanout", description="Debezium Server slot")
    user: Identifier = "cdclake_replicator"
    heartbeat_table: Annotated[str, StringConstraints(pattern=r"^[a-z_]+\.[a-z_]+$")] = (
        "cdclake.heartbeat"
    )
    signal_table: Annotated[str, StringConstraints(pattern=r"^[a-z_]+\.[a-z_]+$")] = Field(
        default="cdclake.debezium_signal",
        description="signal table of the MSK Connect source (lake tables)",
    )
    fanout_signal_table: Annotated[str, StringConstraints(pattern=r"^[a-z_]+\.[a-z_]+$")] = Field(
        default="cdclake.debezium_signal_fanout",
        description="signal table of Debezium Server (fanout tables)",
    )
    max_replication_slots: int = Field(default=10, ge=2)
    max_wal_senders: int = Field(default=10, ge=2)
    max_slot_wal_keep_size_mb: int = Field(default=20480, ge=1024)
    drop_objects_on_delete: bool = False
    reconcile_every_minutes: int = Field(
        default=60,
        ge=5,
        description="how often the bootstrap re-runs, joining tables created since",
    )

    @model_validator(mode="after")
    def _signal_tables_differ(self) -> ReplicationConfig:
        if self.signal_table == self.fanout_signal_table:
            raise ValueError(
                "signal_table and fanout_signal_table must differ: a shared signal table "
                "replays a lake snapshot into the fan-out"
            )
        return self

    def signal_tables_of(self, table: TableConfig) -> dict[Capture, str]:
        """``{capture: signal table}`` of the captures that carry ``table``."""
        tables: dict[Capture, str] = {}
        if table.lake:
            tables["lake"] = self.signal_table
        if table.fanout:
            tables["fanout"] = self.fanout_signal_table
        return tables


class DatabaseAlarms(_Model):
    notify_email: str | None = Field(
        default=None, description="subscribed to the alarm topic; None leaves it to you"
    )
    replication_slot_lag_bytes: int = Field(default=5 * 1024**3, ge=1)
    transaction_logs_disk_usage_bytes: int = Field(default=10 * 1024**3, ge=1)


class DatabaseConfig(_Model):
    name: Identifier = "app"
    engine_version: Annotated[str, StringConstraints(pattern=r"^16\.\d+$")] = "16.13"
    instance_class: str = "r6g.large"
    instances: int = Field(default=1, ge=1, le=15)
    backup_retention_days: int = Field(default=7, ge=1, le=35)
    deletion_protection: bool = False
    tls_verify: bool = Field(
        default=True,
        description=(
            "verify Aurora's certificate against the RDS CA bundle (`make rds-ca`); false "
            "encrypts without verifying the server and is only for a database without TLS"
        ),
    )
    replication: ReplicationConfig = Field(default_factory=ReplicationConfig)
    alarms: DatabaseAlarms = Field(default_factory=DatabaseAlarms)

    @property
    def parameter_group_family(self) -> str:
        return f"aurora-postgresql{self.engine_version.split('.', 1)[0]}"

    @property
    def cluster_parameters(self) -> dict[str, str]:
        """The cluster parameter group's settings (the stack sets them, `cdclake doctor` checks
        the engine accepts them): logical decoding for Debezium, TLS only."""
        replication = self.replication
        return {
            "rds.logical_replication": "1",
            "max_replication_slots": str(replication.max_replication_slots),
            "max_wal_senders": str(replication.max_wal_senders),
            "max_slot_wal_keep_size": str(replication.max_slot_wal_keep_size_mb),
            "rds.force_ssl": "1",
        }


class GlueJobConfig(_Model):
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


class DispatchConfig(_Model):
    """The environment's merge dispatcher: how often it looks, how many runs it allows."""

    schedule: str = Field(
        default="rate(15 minutes)",
        description="EventBridge cron(...) or rate(...): how often the dispatcher looks for "
        "change files waiting",
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
        return value

    def interval_minutes(self) -> int | None:
        """Minutes between two turns, for ``rate(...)`` and every-N-minutes crons; else None."""
        rate = re.fullmatch(r"rate\((\d+) (minute|hour|day)s?\)", self.schedule)
        if rate:
            return int(rate[1]) * {"minute": 1, "hour": 60, "day": 1440}[rate[2]]
        cron = re.fullmatch(r"cron\((?:0|\*)/(\d+) \* \* \* \? \*\)", self.schedule)
        return int(cron[1]) if cron else None

    def backoff_unit_seconds(self) -> int:
        """The first retry's wait after a transient failure (then 2, 4 … times it): one turn,
        or an hour where the schedule is a cron with no fixed interval."""
        return (self.interval_minutes() or 60) * 60


class LakeConfig(_Model):
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
        reach, the record index sized for life, and on MERGE_ON_READ a compaction's IO budget
        (with the merge's half of the timeout, a capped run that compacts ends inside it)."""
        services = {
            "retain_hours": table.retain_hours or self.retain_hours,
            "savepoint_days": self.savepoint_days,
            "record_index_file_groups": table.record_index_file_groups,
        }
        if table.hudi_table_type == "MERGE_ON_READ":
            services["compaction_io_mb"] = self.glue_job_of(table).compaction_io_mb()
        return services

    def dispatch_of(self, table: TableConfig) -> dict[str, int]:
        """The dispatcher's bounds of a run of the table (the Glue job's arguments of these
        names, which the script ignores): at least min_workers, and an executor per what one
        merges at the measured incremental rate within the table's freshness objective or half
        the timeout, the sooner, so a backlog that min_workers cannot apply in that time gets
        more; on MERGE_ON_READ also per what one compacts in that time of the compaction's
        budget, on the runs whose inline compaction is due."""
        job = self.glue_job_of(table)
        seconds = min(self.freshness_of(table) * 60, job.timeout_minutes * 60 * RUN_TIMEOUT_SHARE)
        vcpus = WORKER_VCPUS[job.worker_type]
        sizing = {
            "dispatch_min_workers": job.min_workers,
            "dispatch_bytes_per_executor": int(vcpus * seconds * MERGE_BYTES_PER_VCPU_SECOND),
        }
        if table.hudi_table_type == "MERGE_ON_READ":
            compacted = int(vcpus * seconds * COMPACTION_BYTES_PER_VCPU_SECOND)
            sizing["dispatch_compaction_bytes_per_executor"] = compacted
        return sizing

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


class MskConfig(_Model):
    kafka_version: str = "3.6.0"
    broker_instance_type: str = "kafka.m7g.large"
    brokers_per_az: int = Field(default=1, ge=1)
    broker_volume_gib: int = Field(default=100, ge=1)


# A bucket name that marks a plugin location as not yet filled in; synth refuses it.
class ConnectConfig(_Model):
    """MSK Connect: plugins, capacity, snapshot and S3 sink rotation."""

    debezium_plugin: str = Field(
        default=f"{PLUGIN_DIST_DIR}/debezium-connector-postgres-2.7.4.Final.zip",
        description=(
            "s3://bucket/key of the Debezium plugin zip, or a local zip uploaded as an asset "
            "(default: what `make plugins` builds)"
        ),
    )
    s3_sink_plugin: str = Field(
        default=f"{PLUGIN_DIST_DIR}/confluentinc-kafka-connect-s3-10.5.17.zip",
        description=(
            "s3://bucket/key of the S3 sink plugin zip, or a local zip uploaded as an asset "
            "(default: what `make plugins` builds)"
        ),
    )
    snapshot_mode: Literal["initial", "no_data", "never", "when_needed", "initial_only"] = "initial"
    mcu_count: Literal[1, 2, 4, 8] = 1
    workers: int = Field(default=1, ge=1)
    flush_size: int = Field(default=10000, ge=1)
    rotate_interval_ms: int = Field(default=60000, ge=1000)
    heartbeat_interval_ms: int = Field(default=60000, ge=1000)
    connectors_deployed: bool = Field(
        default=True,
        description=(
            "false removes both connectors and keeps their offsets: the first of the two "
            "deploys of a plugin or worker upgrade (docs/connectors.md)"
        ),
    )


class KinesisConfig(_Model):
    mode: Literal["ON_DEMAND", "PROVISIONED"] = "ON_DEMAND"
    shards: int = Field(default=1, ge=1)
    retention_hours: int = Field(default=24, ge=24, le=8760)


class DebeziumServerConfig(_Model):
    image: str = "quay.io/debezium/server:2.7.3.Final"
    cpu: int = 512
    memory_mib: int = 1024


class HttpTarget(_Model):
    endpoint: Annotated[str, StringConstraints(pattern=r"^https://\S+$")]
    method: Literal["POST", "PUT"] = "POST"
    auth: Literal["api_key", "oauth_client_credentials"] = "api_key"
    secret_arn: Annotated[str, StringConstraints(pattern=r"^arn:aws[a-z-]*:secretsmanager:")]
    oauth_token_url: str | None = None
    rate_per_second: int = Field(default=10, ge=1)

    @model_validator(mode="after")
    def _oauth(self) -> HttpTarget:
        if self.auth == "oauth_client_credentials" and not self.oauth_token_url:
            raise ValueError("oauth_token_url is required for oauth_client_credentials")
        return self


class ConsumerConfig(_Model):
    """A service that reacts to changes: an SQS queue, optionally also an HTTP endpoint."""

    name: Identifier
    tables: list[str] = Field(min_length=1)
    ops: list[Op] = Field(default_factory=lambda: list[Op](["c", "u", "d"]))
    consumer_timeout_seconds: int = Field(default=30, ge=1, le=900)
    http: HttpTarget | None = None


class FanOutConfig(_Model):
    consumers: list[ConsumerConfig] = Field(default_factory=list)
    archive_retention_days: int = Field(default=7, ge=1)
    iterator_age_alarm_ms: int = Field(default=60000, ge=1)
    claim_check_threshold_bytes: int = Field(default=200_000, ge=1024, le=256_000)


class EnvironmentConfig(_Model):
    """Everything that differs between environments."""

    env: Identifier
    account: Annotated[str, StringConstraints(pattern=r"^\d{12}$")]
    region: Annotated[str, StringConstraints(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")]
    prefix: Prefix
    tags: dict[str, str] = Field(default_factory=dict)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    lake: LakeConfig = Field(default_factory=LakeConfig)
    msk: MskConfig = Field(default_factory=MskConfig)
    connect: ConnectConfig = Field(default_factory=ConnectConfig)
    kinesis: KinesisConfig = Field(default_factory=KinesisConfig)
    debezium_server: DebeziumServerConfig = Field(default_factory=DebeziumServerConfig)
    fanout: FanOutConfig = Field(default_factory=FanOutConfig)
    tables: list[TableConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _tables_consistent(self) -> EnvironmentConfig:
        names = [t.name for t in self.tables]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tables listed twice: {duplicates}")
        lake_names = [t.lake_table_name for t in self.tables]
        clashes = sorted({n for n in lake_names if lake_names.count(n) > 1})
        if clashes:
            raise ValueError(f"tables map to the same lake table name: {clashes}")
        fanout_tables = {t.name for t in self.tables if t.fanout}
        for i, consumer in enumerate(self.fanout.consumers):
            unknown = sorted(set(consumer.tables) - fanout_tables)
            if unknown:
                raise ValueError(
                    f"fanout.consumers[{i}] ({consumer.name}) names tables {unknown} that are not "
                    f"configured with fanout: true"
                )
        consumer_names = [c.name for c in self.fanout.consumers]
        if len(set(consumer_names)) != len(consumer_names):
            raise ValueError("fanout.consumers: names must be unique")
        for table in self.lake_tables:
            self.lake.glue_job_of(table)  # a table's workers within its bounds
        # The dispatcher's lag datapoint is what keeps a quiet table's alarm quiet: every
        # alarm period must see a turn, or a caught-up table pages.
        interval = self.lake.dispatch.interval_minutes()
        for table in self.lake_tables:
            if interval is not None and interval >= self.lake.freshness_of(table):
                raise ValueError(
                    f"lake.dispatch.schedule {self.lake.dispatch.schedule} turns every "
                    f"{interval} min, not more often than {table.name}'s freshness objective "
                    f"({self.lake.freshness_of(table)} min): its lag alarm would fire between "
                    f"turns"
                )
        return self

    @property
    def lake_tables(self) -> list[TableConfig]:
        return [t for t in self.tables if t.lake]

    @property
    def fanout_tables(self) -> list[TableConfig]:
        return [t for t in self.tables if t.fanout]

    def table(self, name: str) -> TableConfig:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"table {name!r} is not configured for environment {self.env!r}")

    def lake_table(self, name: str) -> TableConfig:
        """The lake table ``name``; ValueError naming the configured ones otherwise."""
        for t in self.lake_tables:
            if t.name == name:
                return t
        names = ", ".join(t.name for t in self.lake_tables)
        raise ValueError(f"--table {name}: not a lake table of {self.env} (configured: {names})")

    def resource_name(self, *parts: str) -> str:
        """Physical-name helper: ``<prefix>-<part>-...``, for resources that need a name."""
        return resource_name(self.prefix, *parts)


def _format_error(path: Path, error: ValidationError) -> str:
    lines = [f"invalid environment config {path}:"]
    for item in error.errors():
        location = ".".join(str(p) for p in item["loc"]) or "(top level)"
        value = item.get("input")
        shown = "" if isinstance(value, dict | list) else f" (got {value!r})"
        lines.append(f"  {location}: {item['msg']}{shown}")
    return "\n".join(lines)


def load_config(
    env: str | None = None, *, path: Path | str | None = None, config_dir: Path | None = None
) -> EnvironmentConfig:
    """Load and validate ``config/<env>.yaml`` (or an explicit ``path``)."""
    if path is None:
        if env is None:
            raise ConfigError("load_config needs an environment name or a path")
        path = (config_dir or CONFIG_DIR) / f"{env}.yaml"
    path = Path(path)
    if not path.is_file():
        available = sorted(p.stem for p in (config_dir or CONFIG_DIR).glob("*.yaml"))
        raise ConfigError(f"no environment config at {path}; available environments: {available}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid environment config {path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid environment config {path}: expected a mapping at top level")
    try:
        return EnvironmentConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_format_error(path, exc)) from None


#: Where `make rds-ca` puts the RDS global CA bundle (git-ignored); CDCLAKE_RDS_CA_BUNDLE
