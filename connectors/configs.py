"""Connector configurations generated from the environment config.

Plain functions, no CDK: the capture and fan-out stacks call them with deploy-time values
(tokens), `python -m connectors.render` calls them with placeholders to write the JSON under
``connectors/generated/`` for humans, and the unit tests call them directly.

Passwords never appear here: the MSK Connect connectors read them through the Secrets Manager
config provider (``${secretsmanager:<secret name>:password}``), Debezium Server gets them
as an ECS secret environment variable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from environment.config import EnvironmentConfig
from environment.names import notifications_topic
from environment.retention import TOPIC_RETENTION_MS
from environment.tables import TableConfig

CONFIG_PROVIDER = "secretsmanager"
CONFIG_PROVIDER_CLASS = "com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
TOPICS_DIR = "topics"
# Where each capture finds the RDS CA bundle (`make rds-ca`) for ``sslmode=verify-full``
# unless the stack passes ``rds_ca`` (for MSK Connect: an ``s3_import_reference``).
MSK_CONNECT_RDS_CA = "/opt/kafka/rds-ca/global-bundle.pem"
DEBEZIUM_SERVER_RDS_CA = "/debezium/rds-ca/global-bundle.pem"
# msk-config-providers' file importer (same release as the Secrets Manager provider).
S3_IMPORT_PROVIDER = "s3import"
S3_IMPORT_PROVIDER_CLASS = "com.amazonaws.kafka.config.providers.S3ImportConfigProvider"


@dataclass(frozen=True)
class DatabaseEndpoint:
    """Where a capture connects, and which secret holds its username and password."""

    hostname: str
    port: int | str
    dbname: str
    secret_arn: str


# Kafka's ConfigTransformer reads ${provider:path:key} with lazy groups: the path ends at the
# first ':' after the provider, so an ARN (or any id with ':') cannot be a path.
CONFIG_REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


def provider_secret_id(secret_arn: str) -> str:
    """The id the pinned config provider passes to ``GetSecretValue``: the secret's name.

    msk-config-providers r0.1.0 (and every later release up to 0.3.0-SNAPSHOT) hands the path
    to ``GetSecretValue`` unchanged, with no URL decoding, so a URL-encoded ARN is looked up
    as a secret literally named ``arn%3Aaws%3A...`` and is never found. A secret name has no
    ':' and ``GetSecretValue`` accepts it; a Secrets Manager ARN ends in
    ``secret:<name>-<6 random characters>``. The stack passes CDK's ``secret_name``, which
    is the same name for deploy-time ARNs.
    """
    _, sep, resource = secret_arn.partition(":secret:")
    if not sep or not resource or ":" in resource:
        raise ValueError(f"not a Secrets Manager secret ARN: {secret_arn!r}")
    return re.sub(r"-[A-Za-z0-9]{6}$", "", resource)


def secret_reference(secret_id: str, key: str) -> str:
    """A Kafka Connect config-provider placeholder, resolved by the worker at runtime."""
    # A CDK token (``${Token[...]}``) stands for a name resolved at deploy time.
    if ":" in secret_id and not secret_id.startswith("${Token["):
        raise ValueError(f"secret id {secret_id!r} has a ':'; Kafka would split the reference")
    return "${" + f"{CONFIG_PROVIDER}:{secret_id}:{key}" + "}"


def s3_import_reference(region: str, bucket: str, key: str) -> str:
    """A file for an MSK Connect worker: the ``s3import`` provider copies ``s3://bucket/key``
    into the worker's temp folder and the reference resolves to that local path (MSK Connect
    has no other way to put a file, e.g. the RDS CA bundle, on its workers)."""
    return "${" + f"{S3_IMPORT_PROVIDER}:{region}:{bucket}/{key}" + "}"


def connector_name(config: EnvironmentConfig, role: str) -> str:
    """MSK Connect connector names; the S3 sink's consumer group follows its name."""
    return config.resource_name(role)


def topic_name(config: EnvironmentConfig, table: TableConfig) -> str:
    """``<prefix>.<schema>.<table>``: Debezium's topic, and the Kinesis stream name."""
    return f"{config.prefix}.{table.name}"


def heartbeat_topic(config: EnvironmentConfig) -> str:
    """Debezium's default heartbeat topic for ``topic.prefix``."""
    return f"__debezium-heartbeat.{config.prefix}"


def heartbeat_changes_topic(config: EnvironmentConfig) -> str:
    """The topic of the heartbeat table's changes, which the lake capture carries beside the
    lake tables: their change files are the capture's heartbeat (``cdclake_merge.heartbeat``).
    Not Debezium's heartbeat topic, whose records carry no time and which the sink skips."""
    return f"{config.prefix}.{config.database.replication.heartbeat_table}"


def offsets_topic(config: EnvironmentConfig) -> str:
    """Named, compacted offsets topic: a replaced connector resumes instead of re-snapshotting."""
    return f"{config.prefix}.connect-offsets"


def _regex(name: str) -> str:
    return re.escape(name)


def table_include_list(tables: Iterable[TableConfig]) -> str:
    """Debezium regexes are anchored on ``schema.table``; the dot is escaped to match exactly."""
    return ",".join(_regex(t.name) for t in tables)


def column_exclude_list(tables: Iterable[TableConfig]) -> str:
    return ",".join(_regex(f"{t.name}.{column}") for t in tables for column in t.exclude_columns)


def heartbeat_action_query(config: EnvironmentConfig, slot: str) -> str:
    """One row per slot in the heartbeat table: the write keeps an idle slot's LSN moving.

    The heartbeat table (created by the replication bootstrap) is ``(source text primary key,
    ts timestamptz)`` and is in the publication, so the write reaches every slot.
    """
    table = config.database.replication.heartbeat_table
    return (
        f"INSERT INTO {table} (source, ts) VALUES ('{slot}', now()) "
        "ON CONFLICT (source) DO UPDATE SET ts = EXCLUDED.ts"
    )


def database_tls(config: EnvironmentConfig, root_cert: str) -> dict[str, str]:
    """Verified TLS to Aurora: the RDS CA at ``root_cert`` and the host name checked
    (``verify-full``); ``database.tls_verify: false`` only encrypts (``require``)."""
    if not config.database.tls_verify:
        return {"database.sslmode": "require"}
    return {"database.sslmode": "verify-full", "database.sslrootcert": root_cert}


def _debezium_common(
    config: EnvironmentConfig,
    tables: list[TableConfig],
    *,
    slot: str,
    signal_table: str,
    root_cert: str,
) -> dict[str, str]:
    """Settings both captures share, so the lake and the bus see the same events.

    Each capture has its own signal table: a signal row is acted on by every capture whose
    ``signal.data.collection`` it is, and a lake snapshot must not replay into the bus.
    """
    replication = config.database.replication
    settings = {
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": replication.publication,
        "publication.autocreate.mode": "disabled",
        "topic.prefix": config.prefix,
        "table.include.list": table_include_list(tables),
        "heartbeat.interval.ms": str(config.connect.heartbeat_interval_ms),
        "heartbeat.action.query": heartbeat_action_query(config, slot),
        "signal.enabled.channels": "source",
        "signal.data.collection": signal_table,
        "snapshot.mode": config.connect.snapshot_mode,
        "time.precision.mode": "adaptive",
        # Truncates reach consumers (op "t"); deletes need no tombstone (topics are not compacted).
        "skipped.operations": "none",
        "tombstones.on.delete": "false",
        **database_tls(config, root_cert),
    }
    excluded = column_exclude_list(tables)
    if excluded:
        settings["column.exclude.list"] = excluded
    return settings


def debezium_source_config(
    config: EnvironmentConfig,
    *,
    database: DatabaseEndpoint,
    replication_factor: int,
    secret_id: str | None = None,
    rds_ca: str = MSK_CONNECT_RDS_CA,
) -> dict[str, str]:
    """Debezium PostgreSQL source on MSK Connect, capturing the lake tables into MSK.

    ``secret_id`` is the secret as the config provider reads it (its name); by default it is
    derived from ``database.secret_arn`` (the stack passes the secret's name for token ARNs).
    ``rds_ca`` is where the worker finds the RDS CA bundle (``database.sslrootcert``).
    """
    tables = config.lake_tables
    secret = secret_id if secret_id is not None else provider_secret_id(database.secret_arn)
    common = _debezium_common(
        config,
        tables,
        slot=config.database.replication.slot,
        signal_table=config.database.replication.signal_table,
        root_cert=rds_ca,
    )
    # The heartbeat rows (this capture's and the fan-out's, every heartbeat interval) reach
    # the change bucket as the tables' changes do: a stopped source or sink stops them too.
    heartbeat = _regex(config.database.replication.heartbeat_table)
    common["table.include.list"] = f"{common['table.include.list']},{heartbeat}"
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": database.hostname,
        "database.port": str(database.port),
        "database.dbname": database.dbname,
        "database.user": secret_reference(secret, "username"),
        "database.password": secret_reference(secret, "password"),
        **common,
        # The merge job decodes these logical types (Decimal bytes, Date/MicroTimestamp ints).
        "decimal.handling.mode": "precise",
        "key.converter": JSON_CONVERTER,
        "key.converter.schemas.enable": "true",
        "value.converter": JSON_CONVERTER,
        "value.converter.schemas.enable": "true",
        # Kafka Connect creates the table topics (KIP-158); brokers do not auto-create topics.
        "topic.creation.default.replication.factor": str(replication_factor),
        "topic.creation.default.partitions": "1",
        "topic.creation.default.cleanup.policy": "delete",
        "topic.creation.default.retention.ms": str(TOPIC_RETENTION_MS),
        "topic.creation.default.compression.type": "lz4",
        # Without this MSK Connect restarts a connector that uses a config provider regularly.
        "config.action.reload": "none",
        # An incremental snapshot's progress under its signal's id, written by the S3 sink as
        # change files: how a rebuild learns its snapshot finished (docs/merge-job.md).
        "notification.enabled.channels": "sink",
        "notification.sink.topic.name": notifications_topic(config.prefix),
    }


def s3_sink_config(
    config: EnvironmentConfig, *, bucket_name: str, kms_key_arn: str | None = None
) -> dict[str, str]:
    """Confluent S3 sink writing each lake topic, the heartbeat table's
    (:func:`heartbeat_changes_topic`) and the source's notifications
    (:func:`environment.names.notifications_topic`), as JSON lines into the change-file bucket.

    Layout: ``topics/<topic>/partition=<p>/<topic>+<p>+<startOffset>.json``. The values are the
    bytes Debezium wrote (JsonConverter, schemas enabled), one per line: ByteArrayFormat keeps
    the ``{"schema", "payload"}`` wrapper that the S3 JsonFormat would strip. Files rotate on
    ``flush.size`` records or, at the latest, ``connect.rotate_interval_ms`` of wall-clock time
    after a file's first record (``rotate.schedule.interval.ms``), so a table with one change an
    hour still lands within the interval. Wall-clock boundaries are not reproducible: a task
    that restarts may cut a file elsewhere and deliver records twice, which the merge job's
    per-key LSN ordering and duplicate handling absorb.
    """
    settings = {
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "tasks.max": str(max(1, len(config.lake_tables))),
        "topics": ",".join(
            [
                *(topic_name(config, t) for t in config.lake_tables),
                heartbeat_changes_topic(config),
                notifications_topic(config.prefix),
            ]
        ),
        "s3.bucket.name": bucket_name,
        "s3.region": config.region,
        "s3.sse.algorithm": "aws:kms",
        "topics.dir": TOPICS_DIR,
        "storage.class": "io.confluent.connect.s3.storage.S3Storage",
        "format.class": "io.confluent.connect.s3.format.bytearray.ByteArrayFormat",
        "format.bytearray.extension": ".json",
        # No format.bytearray.separator: the connector takes the value literally (a "\\n"
        # would be two characters), and its default is the newline the merge job splits on.
        "partitioner.class": "io.confluent.connect.storage.partitioner.DefaultPartitioner",
        "flush.size": str(config.connect.flush_size),
        # Wall-clock rotation: rotate.interval.ms needs a time-based partitioner's timestamp
        # extractor (ignored with DefaultPartitioner) and only fires when a later record
        # arrives, so a quiet table's changes would wait for the next write or flush.size.
        "rotate.schedule.interval.ms": str(config.connect.rotate_interval_ms),
        "timezone": "UTC",
        "behavior.on.null.values": "ignore",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": BYTE_ARRAY_CONVERTER,
        "errors.tolerance": "none",
    }
    if kms_key_arn:
        settings["s3.sse.kms.key.id"] = kms_key_arn
    return settings


def worker_properties(config: EnvironmentConfig, *, s3_import: bool = False) -> dict[str, str]:
    """MSK Connect worker configuration shared by both connectors.

    Only the offsets topic is named here (MSK Connect names the config and status topics per
    connector itself), so only its replication factor is set: Kafka's default of 3 cannot be
    created on a two-broker cluster. ``s3_import`` declares the ``s3import`` provider too, for
    a source whose ``database.sslrootcert`` is an ``s3_import_reference`` (a worker fails to
    start when a declared provider's class is not on its plugin path).
    """
    providers = {CONFIG_PROVIDER: CONFIG_PROVIDER_CLASS}
    if s3_import:
        providers[S3_IMPORT_PROVIDER] = S3_IMPORT_PROVIDER_CLASS
    properties = {
        "key.converter": JSON_CONVERTER,
        "value.converter": JSON_CONVERTER,
        "offset.storage.topic": offsets_topic(config),
        "offset.storage.partitions": "25",
        "offset.storage.replication.factor": str(replication_factor(config)),
        "offset.flush.interval.ms": "10000",
        "topic.creation.enable": "true",
        "config.providers": ",".join(providers),
    }
    for name, provider_class in providers.items():
        properties[f"config.providers.{name}.class"] = provider_class
        properties[f"config.providers.{name}.param.region"] = config.region
    return properties


def render_properties(properties: Mapping[str, str]) -> str:
    """Java properties text, sorted; backslashes escaped so regexes survive ``Properties.load``."""
    return "".join(
        f"{key}={value.replace(chr(92), chr(92) * 2)}\n"
        for key, value in sorted(properties.items())
    )


def debezium_server_properties(
    config: EnvironmentConfig,
    *,
    database: DatabaseEndpoint,
    offsets_file: str,
    rds_ca: str = DEBEZIUM_SERVER_RDS_CA,
) -> dict[str, str]:
    """Debezium Server (ECS) capturing the fan-out tables into one Kinesis stream per table.

    The password is not here: the task gets ``DEBEZIUM_SOURCE_DATABASE_PASSWORD`` (and the
    user) from Secrets Manager. Offsets live in a file on EFS so a replaced task resumes.
    ``rds_ca`` is where the task finds the RDS CA bundle (``database.sslrootcert``).
    """
    tables = config.fanout_tables
    source = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": database.hostname,
        "database.port": str(database.port),
        "database.dbname": database.dbname,
        **_debezium_common(
            config,
            tables,
            slot=config.database.replication.fanout_slot,
            signal_table=config.database.replication.fanout_signal_table,
            root_cert=rds_ca,
        ),
        # Consumers read JSON on the bus: decimals as strings keep their precision and are legible.
        "decimal.handling.mode": "string",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": offsets_file,
        "offset.flush.interval.ms": "5000",
    }
    properties = {f"debezium.source.{key}": value for key, value in source.items()}
    properties.update(
        {
            "debezium.sink.type": "kinesis",
            "debezium.sink.kinesis.region": config.region,
            "debezium.format.key": "json",
            "debezium.format.value": "json",
            "debezium.format.key.schemas.enable": "false",
            "debezium.format.value.schemas.enable": "false",
            # Heartbeats keep the slot moving but have no stream: drop them before the sink.
            "debezium.transforms": "dropheartbeat",
            "debezium.transforms.dropheartbeat.type": "org.apache.kafka.connect.transforms.Filter",
            "debezium.transforms.dropheartbeat.predicate": "isheartbeat",
            "debezium.predicates": "isheartbeat",
            "debezium.predicates.isheartbeat.type": (
                "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"
            ),
            "debezium.predicates.isheartbeat.pattern": re.escape(heartbeat_topic(config)),
            "quarkus.log.console.json": "true",
            "quarkus.http.port": "8080",
        }
    )
    return properties


def environment_variables(properties: Mapping[str, str]) -> dict[str, str]:
    """Debezium Server (Quarkus/MicroProfile) reads ``a.b-c`` from ``A_B_C``."""
    return {re.sub(r"[^A-Za-z0-9]", "_", key).upper(): value for key, value in properties.items()}


def broker_count(config: EnvironmentConfig) -> int:
    """MSK places ``brokers_per_az`` brokers in each of the VPC's AZs."""
    return config.network.az_count * config.msk.brokers_per_az


def replication_factor(config: EnvironmentConfig) -> int:
    """Three copies where there are three brokers, otherwise one per broker."""
    return min(3, broker_count(config))
