"""Connector configurations generated from the environment config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from connectors import versions
from connectors.configs import (
    CONFIG_REFERENCE,
    DEBEZIUM_SERVER_RDS_CA,
    MSK_CONNECT_RDS_CA,
    DatabaseEndpoint,
    debezium_server_properties,
    debezium_source_config,
    environment_variables,
    offsets_topic,
    provider_secret_id,
    render_properties,
    replication_factor,
    s3_import_reference,
    s3_sink_config,
    secret_reference,
    topic_name,
    worker_properties,
)
from connectors.render import GENERATED_DIR, render
from environment.config import EnvironmentConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:111111111111:secret:cdclake/replication"
DATABASE = DatabaseEndpoint(hostname="db.example", port=5432, dbname="app", secret_arn=SECRET_ARN)


@pytest.fixture(scope="module")
def dev() -> EnvironmentConfig:
    return load_config("dev")


@pytest.fixture(scope="module")
def prod() -> EnvironmentConfig:
    return load_config("prod")


@pytest.fixture(scope="module")
def source(dev: EnvironmentConfig) -> dict[str, str]:
    return debezium_source_config(dev, database=DATABASE, replication_factor=2)


@pytest.fixture(scope="module")
def sink(dev: EnvironmentConfig) -> dict[str, str]:
    return s3_sink_config(dev, bucket_name="change-bucket", kms_key_arn="arn:aws:kms:key")


@pytest.fixture(scope="module")
def server(dev: EnvironmentConfig) -> dict[str, str]:
    return debezium_server_properties(dev, database=DATABASE, offsets_file="/data/offsets.dat")


def test_topic_name_prefix_schema_table_matches_contract(dev: EnvironmentConfig) -> None:
    assert topic_name(dev, dev.table("public.orders")) == "cdclake-dev.public.orders"


def test_debezium_source_replication_objects_come_from_config(
    source: dict[str, str], dev: EnvironmentConfig
) -> None:
    replication = dev.database.replication
    assert source["plugin.name"] == "pgoutput"
    assert source["slot.name"] == replication.slot
    assert source["publication.name"] == replication.publication
    assert source["publication.autocreate.mode"] == "disabled"
    assert source["topic.prefix"] == dev.prefix


def test_debezium_source_include_list_names_lake_tables_and_heartbeat_exactly(
    source: dict[str, str],
) -> None:
    patterns = source["table.include.list"].split(",")
    assert patterns == [
        r"public\.customers",
        r"public\.orders",
        r"public\.order_lines",
        r"cdclake\.heartbeat",  # the capture's heartbeat reaches the change bucket
    ]
    assert not any(re.fullmatch(p, "publicXorders") for p in patterns)


def test_debezium_source_fanout_only_table_is_not_captured(prod: EnvironmentConfig) -> None:
    data = prod.model_dump()
    data["tables"].append(
        {"name": "public.events", "primary_key": ["id"], "lake": False, "fanout": True}
    )
    config = EnvironmentConfig.model_validate(data)
    include = debezium_source_config(config, database=DATABASE, replication_factor=3)
    assert "events" not in include["table.include.list"]


def test_debezium_source_excluded_columns_are_listed(source: dict[str, str]) -> None:
    assert source["column.exclude.list"] == r"public\.customers\.password_hash"


def test_debezium_source_password_is_a_config_provider_reference(source: dict[str, str]) -> None:
    assert source["database.password"] == "${secretsmanager:cdclake/replication:password}"
    assert source["database.user"] == "${secretsmanager:cdclake/replication:username}"


def test_debezium_source_secret_reference_parses_to_secret_name_and_key(
    source: dict[str, str],
) -> None:
    # What Kafka's ConfigTransformer hands the provider: path (the GetSecretValue id) and key.
    # The pinned msk-config-providers release passes the path on without URL decoding, so it
    # must be the secret's name as Secrets Manager knows it, not an (encoded) ARN.
    match = CONFIG_REFERENCE.fullmatch(source["database.password"])
    assert match is not None
    assert (match.group(1), match.group(3), match.group(4)) == (
        "secretsmanager",
        "cdclake/replication",
        "password",
    )
    assert "%" not in match.group(3)


def test_secret_reference_arn_rejected_because_kafka_splits_it() -> None:
    match = CONFIG_REFERENCE.fullmatch("${secretsmanager:" + SECRET_ARN + ":password}")
    assert match is not None and match.group(3) == "arn"  # what Kafka would look up
    with pytest.raises(ValueError, match="has a ':'"):
        secret_reference(SECRET_ARN, "password")


def test_debezium_source_no_value_holds_a_literal_secret(dev: EnvironmentConfig) -> None:
    everything = {
        **debezium_source_config(dev, database=DATABASE, replication_factor=2),
        **s3_sink_config(dev, bucket_name="b"),
        **worker_properties(dev),
        **debezium_server_properties(dev, database=DATABASE, offsets_file="/x"),
    }
    assert not [k for k in everything if "password" in k and "${" not in everything[k]]


def test_provider_secret_id_arn_gives_name_without_suffix() -> None:
    assert provider_secret_id(SECRET_ARN) == "cdclake/replication"


def test_provider_secret_id_not_a_secret_arn_rejected() -> None:
    with pytest.raises(ValueError, match="not a Secrets Manager secret ARN"):
        provider_secret_id("arn:aws:ssm:eu-west-1:111111111111:parameter/x")


def test_debezium_source_heartbeat_writes_heartbeat_table(source: dict[str, str]) -> None:
    assert source["heartbeat.interval.ms"] == "60000"
    assert source["heartbeat.action.query"].startswith("INSERT INTO cdclake.heartbeat ")
    assert "'cdclake_msk'" in source["heartbeat.action.query"]


def test_debezium_source_signal_table_and_snapshot_mode_from_config(
    source: dict[str, str],
) -> None:
    assert source["signal.data.collection"] == "cdclake.debezium_signal"
    assert "source" in source["signal.enabled.channels"].split(",")
    assert source["snapshot.mode"] == "initial"


def test_debezium_source_snapshot_mode_follows_config(dev: EnvironmentConfig) -> None:
    config = dev.model_copy(
        update={"connect": dev.connect.model_copy(update={"snapshot_mode": "no_data"})}
    )
    assert (
        debezium_source_config(config, database=DATABASE, replication_factor=2)["snapshot.mode"]
        == "no_data"
    )


def test_debezium_source_types_match_merge_job(source: dict[str, str]) -> None:
    assert source["decimal.handling.mode"] == "precise"
    assert source["time.precision.mode"] == "adaptive"
    assert source["skipped.operations"] == "none"  # truncates reach the lake


def test_debezium_source_json_with_schemas(source: dict[str, str]) -> None:
    assert source["value.converter"] == "org.apache.kafka.connect.json.JsonConverter"
    assert source["value.converter.schemas.enable"] == "true"


def test_debezium_source_topics_created_with_replication_factor(source: dict[str, str]) -> None:
    assert source["topic.creation.default.replication.factor"] == "2"
    assert source["topic.creation.default.partitions"] == "1"


def test_replication_factor_capped_by_broker_count(
    dev: EnvironmentConfig, prod: EnvironmentConfig
) -> None:
    assert (replication_factor(dev), replication_factor(prod)) == (2, 3)


def test_s3_sink_reads_every_lake_topic_heartbeat_and_notifications(sink: dict[str, str]) -> None:
    assert sink["topics"].split(",") == [
        "cdclake-dev.public.customers",
        "cdclake-dev.public.orders",
        "cdclake-dev.public.order_lines",
        "cdclake-dev.cdclake.heartbeat",
        "cdclake-dev.notifications",
    ]


def test_debezium_source_notifications_sink_channel_to_the_topic_the_sink_reads(
    source: dict[str, str], sink: dict[str, str]
) -> None:
    assert source["notification.enabled.channels"] == "sink"
    assert source["notification.sink.topic.name"] == "cdclake-dev.notifications"
    assert source["notification.sink.topic.name"] in sink["topics"].split(",")


def test_debezium_server_sends_no_notifications(server: dict[str, str]) -> None:
    # Its sink is Kinesis, where no notifications stream exists; only the lake reads them.
    assert not [k for k in server if "notification" in k]


def test_s3_sink_layout_is_what_the_merge_job_reads(sink: dict[str, str]) -> None:
    assert sink["topics.dir"] == "topics"
    assert sink["partitioner.class"].endswith(".DefaultPartitioner")
    assert sink["format.bytearray.extension"] == ".json"
    assert sink["s3.bucket.name"] == "change-bucket"


def test_s3_sink_writes_debezium_json_bytes_verbatim(sink: dict[str, str]) -> None:
    assert sink["format.class"].endswith("ByteArrayFormat")
    assert sink["value.converter"].endswith("ByteArrayConverter")
    assert sink["behavior.on.null.values"] == "ignore"


def test_s3_sink_rotation_by_wall_clock_lands_quiet_tables(
    sink: dict[str, str], dev: EnvironmentConfig
) -> None:
    # rotate.interval.ms needs a time-based partitioner (ignored with DefaultPartitioner) and
    # fires only on a later record; the scheduled rotation closes files on the clock.
    assert sink["flush.size"] == str(dev.connect.flush_size)
    assert sink["rotate.schedule.interval.ms"] == str(dev.connect.rotate_interval_ms)
    assert sink["timezone"] == "UTC"
    assert "rotate.interval.ms" not in sink
    assert "timestamp.extractor" not in sink


def test_s3_sink_record_separator_left_to_default_newline(sink: dict[str, str]) -> None:
    # The connector uses the value literally: "\\n" would join records with backslash-n.
    assert sink.get("format.bytearray.separator", "\n") == "\n"


def test_s3_sink_encrypts_with_lake_key(sink: dict[str, str]) -> None:
    assert (sink["s3.sse.algorithm"], sink["s3.sse.kms.key.id"]) == ("aws:kms", "arn:aws:kms:key")


def test_worker_offsets_in_named_topic(dev: EnvironmentConfig) -> None:
    worker = worker_properties(dev)
    assert worker["offset.storage.topic"] == offsets_topic(dev) == "cdclake-dev.connect-offsets"


@pytest.mark.parametrize(("env", "replicas"), [("dev", "2"), ("prod", "3")])
def test_worker_offsets_topic_replication_fits_the_brokers(env: str, replicas: str) -> None:
    # Kafka's default of 3 cannot be created on dev's two brokers.
    worker = worker_properties(load_config(env))
    assert worker["offset.storage.replication.factor"] == replicas


def test_worker_declares_secrets_manager_provider(dev: EnvironmentConfig) -> None:
    worker = worker_properties(dev)
    assert worker["config.providers"] == "secretsmanager"
    assert worker["config.providers.secretsmanager.class"] == (
        "com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider"
    )


def test_worker_s3_import_declares_file_provider_beside_secrets_manager(
    dev: EnvironmentConfig,
) -> None:
    worker = worker_properties(dev, s3_import=True)
    assert worker["config.providers"] == "secretsmanager,s3import"
    assert worker["config.providers.s3import.class"] == (
        "com.amazonaws.kafka.config.providers.S3ImportConfigProvider"
    )
    assert worker["config.providers.s3import.param.region"] == "eu-west-1"


def test_render_properties_escapes_backslashes() -> None:
    assert render_properties({"b": r"a\.b", "a": "1"}) == "a=1\nb=a\\\\.b\n"


def test_debezium_server_uses_fanout_slot_and_tables(
    server: dict[str, str], dev: EnvironmentConfig
) -> None:
    assert server["debezium.source.slot.name"] == dev.database.replication.fanout_slot
    assert server["debezium.source.table.include.list"] == r"public\.orders"
    assert server["debezium.sink.type"] == "kinesis"


def test_debezium_server_offsets_in_file(server: dict[str, str]) -> None:
    assert server["debezium.source.offset.storage"].endswith("FileOffsetBackingStore")
    assert server["debezium.source.offset.storage.file.filename"] == "/data/offsets.dat"


def test_debezium_server_has_no_password_property(server: dict[str, str]) -> None:
    assert not [k for k in server if "password" in k or k.endswith(".user")]


def test_environment_variables_round_trip_to_property_names(server: dict[str, str]) -> None:
    env = environment_variables(server)
    assert env["DEBEZIUM_SOURCE_SLOT_NAME"] == "cdclake_fanout"
    # Quarkus maps A_B_C back to a.b.c: only lower-case, digits and dots keep that reversible.
    assert all(re.fullmatch(r"[a-z0-9.]+", key) for key in server)
    assert len(env) == len(server)


def test_connect_config_default_plugins_are_what_make_plugins_builds() -> None:
    # A deploy after `make plugins` needs no config edit: the defaults are its output zips.
    from environment.config import ConnectConfig
    from environment.paths import PLUGIN_DIST_DIR

    defaults = ConnectConfig()
    assert defaults.debezium_plugin == f"{PLUGIN_DIST_DIR}/{versions.DEBEZIUM_PLUGIN_ZIP}"
    assert defaults.s3_sink_plugin == f"{PLUGIN_DIST_DIR}/{versions.S3_SINK_PLUGIN_ZIP}"
    makefile = (ROOT / "Makefile").read_text()
    assert f"connectors/package_plugins.sh --out {PLUGIN_DIST_DIR}\n" in makefile


def test_package_script_pins_the_documented_versions() -> None:
    script = (ROOT / "connectors" / "package_plugins.sh").read_text()
    assert f'DEBEZIUM_VERSION="${{DEBEZIUM_VERSION:-{versions.DEBEZIUM_VERSION}}}"' in script
    assert f'S3_SINK_VERSION="${{S3_SINK_VERSION:-{versions.CONFLUENT_S3_SINK_VERSION}}}"' in script
    assert (
        f'CONFIG_PROVIDERS_VERSION="${{CONFIG_PROVIDERS_VERSION:-'
        f'{versions.MSK_CONFIG_PROVIDERS_VERSION}}}"' in script
    )


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_generated_files_equal_rendered_configs(env: str) -> None:
    expected = render(load_config(env))
    on_disk = {p.name: p.read_text() for p in (GENERATED_DIR / env).iterdir()}
    assert on_disk == expected, "run `python -m connectors.render` and commit the result"


def test_debezium_captures_each_read_their_own_signal_table(
    source: dict[str, str], server: dict[str, str]
) -> None:
    # A lake snapshot must not replay into the bus (and the other way round).
    assert source["signal.data.collection"] == "cdclake.debezium_signal"
    assert server["debezium.source.signal.data.collection"] == "cdclake.debezium_signal_fanout"


def test_replication_shared_signal_table_refused(dev: EnvironmentConfig) -> None:
    raw = dev.model_dump()
    raw["database"]["replication"]["fanout_signal_table"] = "cdclake.debezium_signal"

    with pytest.raises(ValueError, match="signal_table and fanout_signal_table must differ"):
        EnvironmentConfig.model_validate(raw)


def test_debezium_captures_verify_aurora_certificate_and_host(
    source: dict[str, str], server: dict[str, str]
) -> None:
    assert source["database.sslmode"] == "verify-full"
    assert source["database.sslrootcert"] == MSK_CONNECT_RDS_CA
    assert server["debezium.source.database.sslmode"] == "verify-full"
    assert server["debezium.source.database.sslrootcert"] == DEBEZIUM_SERVER_RDS_CA


def test_debezium_captures_tls_opt_out_encrypts_without_root_cert(dev: EnvironmentConfig) -> None:
    config = dev.model_copy(
        update={"database": dev.database.model_copy(update={"tls_verify": False})}
    )

    source = debezium_source_config(config, database=DATABASE, replication_factor=2)
    server = debezium_server_properties(config, database=DATABASE, offsets_file="/o.dat")

    assert source["database.sslmode"] == "require" and "database.sslrootcert" not in source
    assert server["debezium.source.database.sslmode"] == "require"
    assert "debezium.source.database.sslrootcert" not in server


def test_debezium_source_rds_ca_from_s3_import_reference(dev: EnvironmentConfig) -> None:
    # MSK Connect workers get files only through a config provider: s3import copies the
    # bundle to the worker and the reference resolves to its local path.
    reference = s3_import_reference("eu-west-1", "assets-bucket", "rds-ca/global-bundle.pem")

    source = debezium_source_config(dev, database=DATABASE, replication_factor=2, rds_ca=reference)

    assert source["database.sslrootcert"] == (
        "${s3import:eu-west-1:assets-bucket/rds-ca/global-bundle.pem}"
    )
    match = CONFIG_REFERENCE.fullmatch(source["database.sslrootcert"])
    assert match is not None
    assert (match.group(1), match.group(3), match.group(4)) == (
        "s3import",
        "eu-west-1",
        "assets-bucket/rds-ca/global-bundle.pem",
    )
