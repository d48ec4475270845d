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
from pydantic import Field, StringConstraints, ValidationError, field_validator, model_validator

from environment.fields import Capture, ConfigModel, Identifier, LogRetention, Op, Prefix
from environment.lake import LakeConfig
from environment.names import resource_name
from environment.paths import CONFIG_DIR, PLUGIN_DIST_DIR
from environment.tables import TableConfig


class ConfigError(ValueError):
    """An environment file that cannot be used; the message names file, field and reason."""


def _aws_id(value: str, prefix: str, what: str) -> str:
    """``value`` if it is an EC2 id of the form ``<prefix>-`` and 8 or 17 hex digits."""
    if not re.fullmatch(rf"{prefix}-([0-9a-f]{{8}}|[0-9a-f]{{17}})", value):
        raise ValueError(f"must be {what} id, {prefix}- and 8 or 17 hex digits")
    return value


class ExistingNetwork(ConfigModel):
    """A VPC the environment is placed in instead of creating its own (nothing of it is
    changed: no subnets, routes, NAT, gateways, endpoints or flow logs are added)."""

    vpc_id: str
    availability_zones: list[str] = Field(min_length=2, max_length=3)
    private_subnet_ids: list[str] = Field(
        min_length=2,
        max_length=3,
        description="one private subnet with a route out (NAT) per zone, in the zones' order",
    )

    @field_validator("vpc_id")
    @classmethod
    def _vpc_id(cls, value: str) -> str:
        return _aws_id(value, "vpc", "a VPC")

    @field_validator("private_subnet_ids")
    @classmethod
    def _subnet_ids(cls, value: list[str]) -> list[str]:
        for subnet in value:
            try:
                _aws_id(subnet, "subnet", "a subnet")
            except ValueError as exc:
                raise ValueError(f"{subnet!r} {exc}") from None
        if len(set(value)) != len(value):
            raise ValueError("a subnet is listed twice")
        return value

    @field_validator("availability_zones")
    @classmethod
    def _zones(cls, value: list[str]) -> list[str]:
        for zone in value:
            if not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d[a-z]", zone):
                raise ValueError(f"{zone!r} is not an availability zone name, e.g. eu-west-1a")
        if len(set(value)) != len(value):
            raise ValueError("a zone is listed twice")
        return value

    @model_validator(mode="after")
    def _subnet_per_zone(self) -> ExistingNetwork:
        # The brokers take one client subnet per zone, and MSK wants as many brokers per zone.
        if len(self.private_subnet_ids) != len(self.availability_zones):
            raise ValueError(
                f"private_subnet_ids: {len(self.private_subnet_ids)} subnets for "
                f"{len(self.availability_zones)} availability_zones: give one per zone, in the "
                f"zones' order"
            )
        return self


# Settings of a VPC the stack creates: with network.existing they would silently do nothing.
CREATED_NETWORK_FIELDS = ("cidr", "max_azs", "nat_gateways", "flow_log_retention")


class NetworkConfig(ConfigModel):
    cidr: str = "10.20.0.0/16"
    max_azs: int = Field(default=2, ge=2, le=3)
    nat_gateways: int = Field(default=1, ge=1, le=3)
    flow_log_retention: LogRetention = "ONE_MONTH"
    existing: ExistingNetwork | None = Field(
        default=None, description="place the environment in this VPC instead of creating one"
    )

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        if not re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}/(1[6-9]|2[0-4])", value):
            raise ValueError("must be an IPv4 CIDR between /16 and /24, e.g. 10.20.0.0/16")
        return value

    @model_validator(mode="after")
    def _nothing_of_a_created_vpc(self) -> NetworkConfig:
        given = [f for f in CREATED_NETWORK_FIELDS if f in self.model_fields_set]
        if self.existing is not None and given:
            raise ValueError(
                f"{', '.join(given)}: only for a VPC the stack creates, and network.existing "
                f"is set: remove them"
            )
        return self

    @property
    def az_count(self) -> int:
        """Availability zones the environment spans (the brokers take one subnet in each)."""
        return len(self.existing.availability_zones) if self.existing else self.max_azs


class ReplicationConfig(ConfigModel):
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


class DatabaseAlarms(ConfigModel):
    notify_email: str | None = Field(
        default=None, description="subscribed to the alarm topic; None leaves it to you"
    )
    replication_slot_lag_bytes: int = Field(default=5 * 1024**3, ge=1)
    transaction_logs_disk_usage_bytes: int = Field(default=10 * 1024**3, ge=1)


SECRET_ARN = re.compile(
    r"arn:aws[a-z-]*:secretsmanager:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):secret:"
    r"[A-Za-z0-9/_+=.@!-]+-[A-Za-z0-9]{6}"
)


class ExistingDatabase(ConfigModel):
    """An Aurora PostgreSQL (or RDS Multi-AZ PostgreSQL) cluster the environment captures
    instead of creating one. The stacks never modify, snapshot or delete it: they open its
    port to their own security groups and connect as its master user to prepare replication."""

    cluster_identifier: Annotated[
        str, StringConstraints(pattern=r"^[a-zA-Z][a-zA-Z0-9]*(-[a-zA-Z0-9]+)*$", max_length=63)
    ]
    endpoint: Annotated[
        str,
        StringConstraints(
            pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$"
        ),
    ] = Field(description="the cluster (writer) endpoint: logical replication needs the writer")
    port: int = Field(ge=1150, le=65535)
    security_group_id: str
    master_secret_arn: str = Field(
        description="complete ARN (with its 6-character suffix) of a secret holding the master "
        "user's username and password; read only"
    )

    @field_validator("security_group_id")
    @classmethod
    def _security_group_id(cls, value: str) -> str:
        return _aws_id(value, "sg", "a security group")

    @field_validator("master_secret_arn")
    @classmethod
    def _secret_arn(cls, value: str) -> str:
        if not SECRET_ARN.fullmatch(value):
            raise ValueError(
                "must be a Secrets Manager secret's complete ARN, "
                "arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>"
            )
        return value


# Settings of a cluster the stack creates: with database.existing the cluster's own
# configuration decides them (and `cdclake doctor` checks what replication needs).
CREATED_CLUSTER_FIELDS = ("engine_version", "instance_class", "instances", "backup_retention_days")
CREATED_CLUSTER_PARAMETERS = (
    "max_replication_slots",
    "max_wal_senders",
    "max_slot_wal_keep_size_mb",
)


class DatabaseConfig(ConfigModel):
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
    existing: ExistingDatabase | None = Field(
        default=None, description="capture this cluster instead of creating one"
    )

    @model_validator(mode="after")
    def _nothing_of_a_created_cluster(self) -> DatabaseConfig:
        if self.existing is None:
            return self
        given = [f for f in CREATED_CLUSTER_FIELDS if f in self.model_fields_set] + [
            f"replication.{f}"
            for f in CREATED_CLUSTER_PARAMETERS
            if f in self.replication.model_fields_set
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)}: only for a cluster the stack creates, and "
                f"database.existing is set: remove them (`cdclake doctor` checks the cluster's "
                f"own settings)"
            )
        return self

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


class MskConfig(ConfigModel):
    kafka_version: str = "3.6.0"
    broker_instance_type: str = "kafka.m7g.large"
    brokers_per_az: int = Field(default=1, ge=1)
    broker_volume_gib: int = Field(default=100, ge=1)


class ConnectConfig(ConfigModel):
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


class KinesisConfig(ConfigModel):
    mode: Literal["ON_DEMAND", "PROVISIONED"] = "ON_DEMAND"
    shards: int = Field(default=1, ge=1)
    retention_hours: int = Field(default=24, ge=24, le=8760)


class DebeziumServerConfig(ConfigModel):
    image: str = "quay.io/debezium/server:2.7.3.Final"
    cpu: int = 512
    memory_mib: int = 1024


class HttpTarget(ConfigModel):
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


class ConsumerConfig(ConfigModel):
    """A service that reacts to changes: an SQS queue, optionally also an HTTP endpoint."""

    name: Identifier
    tables: list[str] = Field(min_length=1)
    ops: list[Op] = Field(default_factory=lambda: list[Op](["c", "u", "d"]))
    consumer_timeout_seconds: int = Field(default=30, ge=1, le=900)
    http: HttpTarget | None = None


class FanOutConfig(ConfigModel):
    consumers: list[ConsumerConfig] = Field(default_factory=list)
    archive_retention_days: int = Field(default=7, ge=1)
    iterator_age_alarm_ms: int = Field(default=60000, ge=1)
    claim_check_threshold_bytes: int = Field(default=200_000, ge=1024, le=256_000)


class EnvironmentConfig(ConfigModel):
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
            if interval >= self.lake.freshness_of(table):
                raise ValueError(
                    f"lake.dispatch.schedule {self.lake.dispatch.schedule} turns every "
                    f"{interval} min, not more often than {table.name}'s freshness objective "
                    f"({self.lake.freshness_of(table)} min): its lag alarm would fire between "
                    f"turns"
                )
        return self

    @model_validator(mode="after")
    def _existing_consistent(self) -> EnvironmentConfig:
        network, database = self.network.existing, self.database.existing
        if database is not None and network is None:
            raise ValueError(
                "database.existing needs network.existing: the stacks reach the cluster from "
                "its own VPC, so give that VPC's id, zones and private subnets"
            )
        if network is not None:
            foreign = [z for z in network.availability_zones if z[:-1] != self.region]
            if foreign:
                raise ValueError(
                    f"network.existing.availability_zones: {foreign} not in the environment's "
                    f"region {self.region}"
                )
        if database is not None:
            arn = SECRET_ARN.fullmatch(database.master_secret_arn)
            assert arn is not None  # the field's own validator matched it
            for part, own in (("region", self.region), ("account", self.account)):
                if arn[part] != own:
                    raise ValueError(
                        f"database.existing.master_secret_arn: {part} {arn[part]} is not the "
                        f"environment's {part} {own}"
                    )
        return self

    @property
    def cluster_identifier(self) -> str:
        """The database cluster the environment captures: the existing one, or the one the
        database stack creates."""
        existing = self.database.existing
        return existing.cluster_identifier if existing else self.resource_name("aurora")

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
