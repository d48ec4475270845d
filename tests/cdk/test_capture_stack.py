"""The capture stack: MSK, MSK Connect plugins, worker configuration and both connectors."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from connectors.configs import render_properties, worker_properties
from environment.artifacts import PluginNotFound
from environment.config import ConfigError, load_config
from stacks.components.kafka_connectors import digest, plugin_location
from tests.cdk.stack_helpers import (
    PLUGIN_CONTEXT,
    assert_reads_exactly,
    cdk_context,
    flat,
    masked,
    only,
    rds_ca_object,
    resources,
    strings,
    synth_config_variant,
    synth_variant,
)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def dev(synth) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return synth("dev").template("capture")


@pytest.fixture(scope="module")
def upgrade_step(synth) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """dev during the first deploy of a plugin upgrade: connectors removed, new Debezium zip."""
    return synth_variant(
        "dev",
        "capture",
        connectors_deployed=False,
        debezium_plugin="s3://cdclake-test-plugins/plugins/debezium-connector-postgres-next.zip",
    )


@pytest.fixture(scope="module")
def prod(synth) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return synth("prod").template("capture")


@pytest.fixture(scope="module")
def unverified() -> dict[str, Any]:
    """dev with ``database.tls_verify: false`` (the fan-out tests share this synth)."""
    return synth_config_variant("dev", "database", tls_verify=False)["capture"]


@pytest.fixture(scope="module")
def rds_ca_location(synth) -> str:  # type: ignore[no-untyped-def]
    return rds_ca_object(synth("dev"), "capture")


def _connector(template: dict[str, Any], role: str) -> dict[str, Any]:
    for props in resources(template, "AWS::KafkaConnect::Connector").values():
        if props["ConnectorName"].endswith(role):
            return props
    raise AssertionError(f"no connector named *{role}")


def _config_value(value: Any) -> str:
    """A connector setting as text; token parts of a Fn::Join shown as <token>."""
    if isinstance(value, str):
        return value
    delimiter, parts = value["Fn::Join"]
    return delimiter.join(p if isinstance(p, str) else "<token>" for p in parts)


def test_capture_msk_iam_auth_only(dev: dict[str, Any]) -> None:
    auth = only(dev, "AWS::MSK::Cluster")["ClientAuthentication"]
    assert auth["Sasl"]["Iam"]["Enabled"] is True
    assert auth["Unauthenticated"]["Enabled"] is False


def test_capture_msk_tls_in_transit_and_kms_at_rest(dev: dict[str, Any]) -> None:
    encryption = only(dev, "AWS::MSK::Cluster")["EncryptionInfo"]
    assert encryption["EncryptionInTransit"] == {"ClientBroker": "TLS", "InCluster": True}
    assert "Fn::GetAtt" in encryption["EncryptionAtRest"]["DataVolumeKMSKeyId"]


def test_capture_msk_broker_logs_enabled(dev: dict[str, Any]) -> None:
    logs = only(dev, "AWS::MSK::Cluster")["LoggingInfo"]["BrokerLogs"]["CloudWatchLogs"]
    assert logs["Enabled"] is True


@pytest.mark.parametrize(("env", "brokers"), [("dev", 2), ("prod", 3)])
def test_capture_msk_one_broker_per_az_from_config(synth, env: str, brokers: int) -> None:  # type: ignore[no-untyped-def]
    cluster = only(synth(env).template("capture"), "AWS::MSK::Cluster")
    assert cluster["NumberOfBrokerNodes"] == brokers
    assert len(cluster["BrokerNodeGroupInfo"]["ClientSubnets"]) == brokers


def test_capture_msk_configuration_retained_with_its_cluster(dev: dict[str, Any]) -> None:
    policies = {
        r["Type"]: r.get("DeletionPolicy")
        for r in dev["Resources"].values()
        if r["Type"] in ("AWS::MSK::Cluster", "AWS::MSK::Configuration")
    }
    assert policies == {"AWS::MSK::Cluster": "Retain", "AWS::MSK::Configuration": "Retain"}


def test_capture_msk_topics_not_auto_created(dev: dict[str, Any]) -> None:
    properties = only(dev, "AWS::MSK::Configuration")["ServerProperties"]
    assert "auto.create.topics.enable=false" in properties
    assert "default.replication.factor=2" in properties


def test_capture_plugins_context_location_overrides_config(dev: dict[str, Any]) -> None:
    # The tests' context gives s3:// locations (`-c debezium_plugin=...`), as CI has no zips.
    plugins = resources(dev, "AWS::KafkaConnect::CustomPlugin").values()
    locations = sorted(p["Location"]["S3Location"]["FileKey"] for p in plugins)
    assert locations == [
        "plugins/confluentinc-kafka-connect-s3-10.5.17.zip",
        "plugins/debezium-connector-postgres-2.7.4.Final.zip",
    ]
    assert {_config_value(p["Location"]["S3Location"]["BucketArn"]) for p in plugins} == {
        "arn:<token>:s3:::cdclake-test-plugins"
    }


def _names(template: dict[str, Any], resource_type: str) -> set[str]:
    return {props["Name"] for props in resources(template, resource_type).values()}


def test_capture_plugin_upgrade_step_removes_connectors_and_keeps_the_rest(
    upgrade_step: dict[str, Any],
) -> None:
    assert resources(upgrade_step, "AWS::KafkaConnect::Connector") == {}
    assert len(resources(upgrade_step, "AWS::KafkaConnect::CustomPlugin")) == 2
    assert len(resources(upgrade_step, "AWS::KafkaConnect::WorkerConfiguration")) == 1


def test_capture_plugin_new_location_gets_new_name(
    dev: dict[str, Any], upgrade_step: dict[str, Any]
) -> None:
    # A replaced resource with an unchanged name is what CloudFormation cannot create.
    before = _names(dev, "AWS::KafkaConnect::CustomPlugin")
    after = _names(upgrade_step, "AWS::KafkaConnect::CustomPlugin")
    assert len(before - after) == 1 and len(after - before) == 1
    assert all(name.startswith("cdclake-dev-debezium-postgres-") for name in after - before)


def test_capture_worker_configuration_named_by_its_content(dev: dict[str, Any]) -> None:
    content = render_properties(worker_properties(load_config("dev"), s3_import=True))
    assert _names(dev, "AWS::KafkaConnect::WorkerConfiguration") == {
        f"cdclake-dev-connect-worker-{digest(content)}"
    }


def test_capture_connector_names_fixed_across_plugin_versions(dev: dict[str, Any]) -> None:
    # Source offsets are keyed by connector name: a new name would snapshot everything again.
    names = {p["ConnectorName"] for p in resources(dev, "AWS::KafkaConnect::Connector").values()}
    assert names == {"cdclake-dev-debezium-source", "cdclake-dev-s3-sink"}


def test_capture_snapshot_signal_follows_connectors_with_lake_tables(dev: dict[str, Any]) -> None:
    (signal,) = [r for r in dev["Resources"].values() if r["Type"] == "Custom::SnapshotSignal"]
    lake = [t.name for t in load_config("dev").lake_tables]
    assert json.loads(signal["Properties"]["Tables"]) == lake
    connectors = set(resources(dev, "AWS::KafkaConnect::Connector"))
    assert connectors and connectors <= set(signal["DependsOn"])


def test_capture_worker_configuration_names_compacted_offsets_topic(dev: dict[str, Any]) -> None:
    worker = only(dev, "AWS::KafkaConnect::WorkerConfiguration")
    properties = base64.b64decode(worker["PropertiesFileContent"]).decode()
    assert "offset.storage.topic=cdclake-dev.connect-offsets\n" in properties
    assert (
        "config.providers.secretsmanager.class="
        "com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider\n"
    ) in properties


def test_capture_both_connectors_use_the_worker_configuration(dev: dict[str, Any]) -> None:
    for role in ("debezium-source", "s3-sink"):
        connector = _connector(dev, role)
        assert "WorkerConfigurationArn" in connector["WorkerConfiguration"]
        assert connector["KafkaConnectVersion"] == "3.7.x"
        assert connector["KafkaClusterClientAuthentication"] == {"AuthenticationType": "IAM"}
        assert connector["KafkaClusterEncryptionInTransit"] == {"EncryptionType": "TLS"}


def test_capture_debezium_password_through_config_provider(dev: dict[str, Any]) -> None:
    settings = _connector(dev, "debezium-source")["ConnectorConfiguration"]
    password = _config_value(settings["database.password"])
    assert password.startswith("${secretsmanager:") and password.endswith(":password}")
    # The secret's name, cut from its ARN at deploy time: the pinned provider does not
    # URL-decode, and a ':' would end the reference's path.
    rendered = json.dumps(settings["database.password"])
    assert "%3A" not in rendered and "%2F" not in rendered
    assert '"Fn::Split": [":"' in rendered and "ReplicationSecret" in rendered


def test_capture_no_connector_setting_holds_a_literal_password(dev: dict[str, Any]) -> None:
    for role in ("debezium-source", "s3-sink"):
        settings = _connector(dev, role)["ConnectorConfiguration"]
        for key, value in settings.items():
            if "password" in key or "secret" in key:
                assert _config_value(value).startswith("${secretsmanager:"), key


def test_capture_debezium_connector_from_config(dev: dict[str, Any]) -> None:
    settings = _connector(dev, "debezium-source")["ConnectorConfiguration"]
    assert settings["slot.name"] == "cdclake_msk"
    assert settings["publication.autocreate.mode"] == "disabled"
    assert settings["snapshot.mode"] == "initial"
    assert settings["table.include.list"] == (
        r"public\.customers,public\.orders,public\.order_lines,cdclake\.heartbeat"
    )
    assert "Fn::GetAtt" in json.dumps(
        settings["database.hostname"]
    ) or "Fn::ImportValue" in json.dumps(settings["database.hostname"])


def test_capture_s3_sink_from_config(dev: dict[str, Any], prod: dict[str, Any]) -> None:
    assert _connector(dev, "s3-sink")["ConnectorConfiguration"]["flush.size"] == "1000"
    sink = _connector(prod, "s3-sink")
    assert sink["ConnectorConfiguration"]["rotate.schedule.interval.ms"] == "300000"
    assert "rotate.interval.ms" not in sink["ConnectorConfiguration"]
    assert sink["Capacity"]["ProvisionedCapacity"] == {"McuCount": 2, "WorkerCount": 2}


def test_capture_connector_role_reads_only_the_replication_secret(dev: dict[str, Any]) -> None:
    statements = [
        s
        for policy in resources(dev, "AWS::IAM::Policy").values()
        for s in policy["PolicyDocument"]["Statement"]
        if "secretsmanager:GetSecretValue" in s["Action"]
    ]
    assert len(statements) == 1
    assert "*" not in json.dumps(statements[0]["Resource"])


def _connect_role(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    for logical_id, props in resources(template, "AWS::IAM::Role").items():
        principals = [
            s["Principal"].get("Service") for s in props["AssumeRolePolicyDocument"]["Statement"]
        ]
        if "kafkaconnect.amazonaws.com" in principals:
            return logical_id, props
    raise AssertionError("no role assumed by kafkaconnect.amazonaws.com")


def _connect_role_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    role_id, _ = _connect_role(template)
    return [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Roles"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]


def _kafka_resources(template: dict[str, Any], action: str) -> set[str]:
    """Flattened ARNs of the Connect role's statements that allow ``action``."""
    return {
        _config_value(resource)
        for s in _connect_role_statements(template)
        if action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
        for resource in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    }


def test_capture_connect_role_writes_idempotently_on_the_cluster(dev: dict[str, Any]) -> None:
    # Connect 3.7's producers are idempotent: without this, the first write is refused.
    (cluster_id,) = resources(dev, "AWS::MSK::Cluster")
    statements = [
        s
        for s in _connect_role_statements(dev)
        if "kafka-cluster:WriteDataIdempotently" in s["Action"]
    ]
    assert [s["Resource"] for s in statements] == [{"Fn::GetAtt": [cluster_id, "Arn"]}]


@pytest.mark.parametrize(
    ("action", "kind"),
    [("kafka-cluster:WriteData", "topic"), ("kafka-cluster:DescribeGroup", "group")],
)
def test_capture_connect_role_grants_both_internal_prefixes(
    dev: dict[str, Any], action: str, kind: str
) -> None:
    arns = _kafka_resources(dev, action)
    for prefix in ("__amazon_msk_connect_*", "__msk_connect_*"):
        assert [a for a in arns if f":{kind}/" in a and a.endswith(f"/{prefix}")], prefix


def test_capture_connect_role_trusts_only_own_account_connectors(dev: dict[str, Any]) -> None:
    _, role = _connect_role(dev)
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    condition = statement["Condition"]
    assert condition["StringEquals"] == {"aws:SourceAccount": "111111111111"}
    assert _config_value(condition["ArnLike"]["aws:SourceArn"]) == (
        "arn:<token>:kafkaconnect:eu-west-1:111111111111:connector/*"
    )


def test_capture_database_ingress_lives_in_capture_stack(synth) -> None:  # type: ignore[no-untyped-def]
    port = synth("dev").stacks["database"].port
    ingress = [
        props
        for props in resources(
            synth("dev").template("capture"), "AWS::EC2::SecurityGroupIngress"
        ).values()
        if props.get("FromPort") == port
    ]
    assert len(ingress) == 1
    assert "Fn::GetAtt" in ingress[0]["SourceSecurityGroupId"]  # the workers' group, local


def test_capture_brokers_reachable_only_on_iam_port(dev: dict[str, Any]) -> None:
    ports = {
        props["FromPort"]
        for props in resources(dev, "AWS::EC2::SecurityGroupIngress").values()
        if "Fn::ImportValue" not in props["GroupId"]  # the database's group
    }
    assert ports == {9098}


def test_plugin_location_s3_uri_is_referenced() -> None:
    stack = cdk.Stack()
    found = plugin_location(stack, "P", "s3://bucket/plugins/x.zip")
    assert (found.bucket_name, found.key) == ("bucket", "plugins/x.zip")
    assert not stack.node.children


def test_plugin_location_missing_local_file_fails_in_one_line_naming_make_plugins(
    tmp_path: Path,
) -> None:
    with pytest.raises(PluginNotFound) as raised:
        plugin_location(cdk.Stack(), "P", str(tmp_path / "missing.zip"), setting="connect.x")
    message = str(raised.value)
    assert "`make plugins`" in message and "connect.x" in message and "\n" not in message
    assert isinstance(raised.value, ConfigError)  # app.py exits with it, no traceback


def test_plugin_location_placeholder_bucket_fails_naming_make_plugins() -> None:
    stack = cdk.Stack()
    with pytest.raises(PluginNotFound, match=r"placeholder.*`make plugins`"):
        plugin_location(stack, "P", "s3://REPLACE-ME/plugins/x.zip")
    assert not stack.node.children


@pytest.mark.slow
def test_app_synth_without_built_plugins_exits_with_one_line(tmp_path: Path) -> None:
    """A real environment whose default plugin zips were not built: one line, no traceback."""
    config = load_config("dev")
    built = [p for p in (config.connect.debezium_plugin,) if (ROOT / p).is_file()]
    if built:
        pytest.skip(f"{built[0]} exists here (`make plugins` ran), so dev synthesizes")
    context = {k: v for k, v in cdk_context().items() if k not in PLUGIN_CONTEXT}
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({**context, "env": "dev"}),
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        # jsii's banner about this Node's end of life is not the app's output.
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": node.stdout.strip("v\n").split(".")[0],
    }
    completed = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    # Before it, stderr holds CDK's own progress lines (asset bundling, deprecations).
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr, completed.stderr[-2000:]
    last = completed.stderr.strip().splitlines()[-1]
    assert last.startswith("connect.debezium_plugin: no plugin zip at ")
    assert "`make plugins`" in last


def test_plugin_location_local_file_becomes_asset(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.zip"
    plugin.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    stack = cdk.Stack()
    found = plugin_location(stack, "P", str(plugin))
    assert found.key.endswith(".zip")
    assert stack.node.try_find_child("P") is not None


def _worker_properties(template: dict[str, Any]) -> dict[str, str]:
    worker = only(template, "AWS::KafkaConnect::WorkerConfiguration")
    text = base64.b64decode(worker["PropertiesFileContent"]).decode()
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_capture_worker_declares_s3import_provider(dev: dict[str, Any]) -> None:
    worker = _worker_properties(dev)
    assert worker["config.providers"].split(",") == ["secretsmanager", "s3import"]
    assert worker["config.providers.s3import.class"] == (
        "com.amazonaws.kafka.config.providers.S3ImportConfigProvider"
    )
    assert worker["config.providers.s3import.param.region"] == "eu-west-1"


def test_capture_debezium_rds_ca_is_the_bundle_asset_through_s3import(
    dev: dict[str, Any], rds_ca_location: str
) -> None:
    settings = _connector(dev, "debezium-source")["ConnectorConfiguration"]
    assert settings["database.sslmode"] == "verify-full"
    # The provider copies s3://<bucket>/<key> to the worker and resolves to the local path.
    assert flat(settings["database.sslrootcert"]) == f"${{s3import:eu-west-1:{rds_ca_location}}}"


def test_capture_connect_role_reads_exactly_the_rds_ca_object(
    dev: dict[str, Any], rds_ca_location: str
) -> None:
    assert_reads_exactly(_connect_role_statements(dev), rds_ca_location)


def test_capture_tls_opt_out_no_asset_provider_or_root_cert(unverified: dict[str, Any]) -> None:
    worker = _worker_properties(unverified)
    assert worker["config.providers"] == "secretsmanager"
    assert not [k for k in worker if "s3import" in k]
    settings = _connector(unverified, "debezium-source")["ConnectorConfiguration"]
    assert settings["database.sslmode"] == "require"
    assert "database.sslrootcert" not in settings
    assert not [s for s in strings(unverified) if "s3import" in s or s.endswith(".pem")]


def test_capture_no_literal_secret_strings(dev: dict[str, Any]) -> None:
    assert not [s for s in strings(dev) if "BEGIN PRIVATE KEY" in s or "password=" in s.lower()]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_capture_template_matches_snapshot(synth, snapshot, env: str) -> None:  # type: ignore[no-untyped-def]
    assert masked(synth(env).template("capture"))["Resources"] == snapshot
