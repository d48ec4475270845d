"""The fan-out stack: streams, Debezium Server, the Lambda and its mappings, bus and consumers."""

from __future__ import annotations

import json
import posixpath
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms

from environment.config import DebeziumServerConfig
from stacks.components.debezium_server import DebeziumServer
from stacks.components.fanout_function import routes
from tests.cdk.stack_helpers import (
    as_list,
    assert_reads_exactly,
    fanout_turned_off,
    flat,
    masked,
    of_type,
    only,
    policy_statements,
    props,
    rds_ca_object,
    resources,
    strings,
    synth_config_variant,
    synth_edited,
)

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def dev(synth) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return synth("dev").template("fanout")


@pytest.fixture(scope="module")
def prod(synth) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return synth("prod").template("fanout")


def _container(template: dict[str, Any]) -> dict[str, Any]:
    """Debezium Server's container (the task may hold helper containers beside it)."""
    (container,) = [
        c
        for c in only(template, "AWS::ECS::TaskDefinition")["ContainerDefinitions"]
        if c["Name"] == "debezium"
    ]
    return dict(container)


def test_fanout_one_encrypted_stream_per_fanout_table(dev: dict[str, Any]) -> None:
    streams = list(resources(dev, "AWS::Kinesis::Stream").values())
    assert len(streams) == 1  # public.orders
    assert streams[0]["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
    assert streams[0]["StreamEncryption"]["EncryptionType"] == "KMS"


def test_fanout_debezium_server_image_and_slot_from_config(dev: dict[str, Any]) -> None:
    container = _container(dev)
    assert container["Image"] == "quay.io/debezium/server:2.7.3.Final"
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert env["DEBEZIUM_SOURCE_SLOT_NAME"] == "cdclake_fanout"
    assert env["DEBEZIUM_SINK_TYPE"] == "kinesis"
    assert env["DEBEZIUM_SOURCE_TABLE_INCLUDE_LIST"] == r"public\.orders"


def test_fanout_debezium_server_password_is_an_ecs_secret(dev: dict[str, Any]) -> None:
    container = _container(dev)
    secrets = {s["Name"]: s["ValueFrom"] for s in container["Secrets"]}
    assert json.dumps(secrets["DEBEZIUM_SOURCE_DATABASE_PASSWORD"]).endswith(':password::"]]}')
    assert not [e for e in container["Environment"] if "PASSWORD" in e["Name"]]


def test_fanout_debezium_server_offsets_on_efs(dev: dict[str, Any]) -> None:
    task = only(dev, "AWS::ECS::TaskDefinition")
    (volume,) = [v for v in task["Volumes"] if "EFSVolumeConfiguration" in v]
    assert volume["EFSVolumeConfiguration"]["TransitEncryption"] == "ENABLED"
    env = {e["Name"]: e["Value"] for e in _container(dev)["Environment"]}
    mount = _container(dev)["MountPoints"][0]["ContainerPath"]
    assert env["DEBEZIUM_SOURCE_OFFSET_STORAGE_FILE_FILENAME"].startswith(mount + "/")
    assert only(dev, "AWS::EFS::FileSystem")["Encrypted"] is True


def test_fanout_debezium_server_health_check_and_logs(dev: dict[str, Any]) -> None:
    container = _container(dev)
    assert "/q/health" in " ".join(container["HealthCheck"]["Command"])
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"


def test_fanout_debezium_server_runs_one_task_at_a_time(dev: dict[str, Any]) -> None:
    service = only(dev, "AWS::ECS::Service")
    assert service["DesiredCount"] == 1
    assert service["DeploymentConfiguration"]["MaximumPercent"] == 100


def test_fanout_function_environment_from_config(dev: dict[str, Any], synth) -> None:  # type: ignore[no-untyped-def]
    function = only(dev, "AWS::Lambda::Function")
    env = function["Environment"]["Variables"]
    assert json.loads(env["ROUTES"]) == routes(synth("dev").config.fanout_tables)
    assert json.loads(env["ROUTES"])["public.orders"]["source"] == "shop.orders"
    assert "Ref" in env["EVENT_BUS_NAME"]
    assert env["CLAIM_CHECK_THRESHOLD_BYTES"] == "200000"
    assert function["Handler"] == "handler.handler"
    assert "AWSLambdaPowertoolsPythonV3-python313-arm64" in json.dumps(function["Layers"])


def test_fanout_event_source_mapping_bounded_retries(dev: dict[str, Any]) -> None:
    mapping = only(dev, "AWS::Lambda::EventSourceMapping")
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == 5
    assert mapping["MaximumRecordAgeInSeconds"] == 6 * 3600
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert "Fn::GetAtt" in mapping["DestinationConfig"]["OnFailure"]["Destination"]


def test_fanout_bus_encrypted_with_archive(dev: dict[str, Any], prod: dict[str, Any]) -> None:
    assert "Fn::GetAtt" in only(dev, "AWS::Events::EventBus")["KmsKeyIdentifier"]
    assert only(dev, "AWS::Events::Archive")["RetentionDays"] == 7
    assert only(prod, "AWS::Events::Archive")["RetentionDays"] == 30


def test_fanout_rule_pattern_from_consumer_config(dev: dict[str, Any]) -> None:
    rule = only(dev, "AWS::Events::Rule")
    assert rule["EventPattern"] == {
        "source": ["shop.orders"],
        "detail-type": ["OrderChanged"],
        "detail": {"op": ["c", "u", "d"]},
    }


def test_fanout_every_rule_target_has_retry_policy_and_dlq(prod: dict[str, Any]) -> None:
    targets = [t for rule in resources(prod, "AWS::Events::Rule").values() for t in rule["Targets"]]
    assert len(targets) == 3  # two SQS queues and one API destination
    for target in targets:
        assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0
        assert "Arn" in target["DeadLetterConfig"]


def test_fanout_queue_visibility_six_times_consumer_timeout(prod: dict[str, Any]) -> None:
    timeouts = sorted(
        q["VisibilityTimeout"]
        for q in resources(prod, "AWS::SQS::Queue").values()
        if "RedrivePolicy" in q
    )
    assert timeouts == [180, 360]  # billing_webhook 30 s, order_notifications 60 s


def _bus_dead_letters_id(template: dict[str, Any]) -> str:
    return str(only(template, "AWS::Events::EventBus")["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0])


def test_fanout_queues_encrypted_with_redrive(dev: dict[str, Any]) -> None:
    # All under the stack's key but the bus's dead letters: those are the key's own failures.
    bus_dead_letters = _bus_dead_letters_id(dev)
    queues = resources(dev, "AWS::SQS::Queue")
    assert [i for i, q in queues.items() if "KmsMasterKeyId" not in q] == [bus_dead_letters]
    assert queues[bus_dead_letters]["SqsManagedSseEnabled"] is True
    redrives = [
        q["RedrivePolicy"]["maxReceiveCount"] for q in queues.values() if "RedrivePolicy" in q
    ]
    assert redrives == [5]


def test_fanout_bus_dead_letters_accept_only_this_bus(dev: dict[str, Any]) -> None:
    queue_id = _bus_dead_letters_id(dev)
    (bus_id,) = resources(dev, "AWS::Events::EventBus")
    (policy,) = [
        p
        for p in resources(dev, "AWS::SQS::QueuePolicy").values()
        if p["Queues"] == [{"Ref": queue_id}]
    ]
    (send,) = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert send["Principal"] == {"Service": "events.amazonaws.com"}
    assert send["Action"] == "sqs:SendMessage"
    assert send["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [bus_id, "Arn"]}}}


def test_fanout_http_connection_reads_secrets_manager(prod: dict[str, Any]) -> None:
    connection = only(prod, "AWS::Events::Connection")
    api_key = connection["AuthParameters"]["ApiKeyAuthParameters"]
    assert api_key["ApiKeyValue"].startswith("{{resolve:secretsmanager:")
    assert only(prod, "AWS::Events::ApiDestination")["InvocationEndpoint"] == (
        "https://billing.example.com/hooks/orders"
    )


def test_fanout_alarms_on_iterator_age_and_every_dlq(prod: dict[str, Any], synth) -> None:  # type: ignore[no-untyped-def]
    alarms = list(resources(prod, "AWS::CloudWatch::Alarm").values())
    iterator = [a for a in alarms if a["MetricName"] == "IteratorAge"]
    assert [a["Threshold"] for a in iterator] == [synth("prod").config.fanout.iterator_age_alarm_ms]
    depth = [a for a in alarms if a["MetricName"] == "ApproximateNumberOfMessagesVisible"]
    # The failed records, the bus's dead letters, and each consumer's two dead-letter queues.
    assert len(depth) == 2 + 2 * len(synth("prod").config.fanout.consumers)


def test_fanout_no_literal_secret_in_template(prod: dict[str, Any]) -> None:
    assert not [s for s in strings(prod) if "password=" in s.lower()]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_fanout_template_matches_snapshot(synth, snapshot, env: str) -> None:  # type: ignore[no-untyped-def]
    assert masked(synth(env).template("fanout"))["Resources"] == snapshot


def _stack_key_arn(template: dict[str, Any]) -> dict[str, Any]:
    (key_id,) = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::KMS::Key"]
    return {"Fn::GetAtt": [key_id, "Arn"]}


def test_fanout_archive_encrypted_with_stack_key(dev: dict[str, Any]) -> None:
    assert only(dev, "AWS::Events::Archive")["KmsKeyIdentifier"] == _stack_key_arn(dev)


def test_fanout_archive_keeps_its_logical_id(dev: dict[str, Any]) -> None:
    # The id deployed so far: a new one would replace the archive (and lose its events),
    # and the replacement's fixed name would collide with the old one.
    assert list(resources(dev, "AWS::Events::Archive")) == ["BusArchiveDBBF46CD"]


def test_fanout_key_policy_eventbridge_describe_key_for_archive_allowed(
    dev: dict[str, Any],
) -> None:
    # The bus's own statement holds only for calls from the bus (aws:SourceArn); the archive
    # key policy AWS documents lets EventBridge describe the key without that condition.
    statements = only(dev, "AWS::KMS::Key")["KeyPolicy"]["Statement"]
    unconditioned = {
        action
        for s in statements
        if "events.amazonaws.com" in json.dumps(s.get("Principal", {}))
        and "aws:SourceArn" not in json.dumps(s.get("Condition", {}))
        for action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    assert "kms:DescribeKey" in unconditioned


def test_fanout_dead_letter_queue_outlives_its_source_queue(prod: dict[str, Any]) -> None:
    # A standard queue's message keeps its enqueue time in the DLQ: the DLQ must keep longer.
    queues = resources(prod, "AWS::SQS::Queue")
    sources = [q for q in queues.values() if "RedrivePolicy" in q]
    assert sources
    for source in sources:
        dlq_id = source["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        dlq = queues[dlq_id]
        assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600  # the SQS maximum
        assert source["MessageRetentionPeriod"] < dlq["MessageRetentionPeriod"]


def test_fanout_consumer_queue_age_alarm_before_messages_expire(prod: dict[str, Any]) -> None:
    retention = {q["MessageRetentionPeriod"] for q in _consumer_queues(prod)}
    ages = [
        a
        for a in resources(prod, "AWS::CloudWatch::Alarm").values()
        if a["MetricName"] == "ApproximateAgeOfOldestMessage"
    ]
    assert len(ages) == len(_consumer_queues(prod))
    assert all(a["Threshold"] < min(retention) for a in ages)


def _consumer_queues(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for q in resources(template, "AWS::SQS::Queue").values() if "RedrivePolicy" in q]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_fanout_streams_deleted_with_their_table(synth, env: str) -> None:  # type: ignore[no-untyped-def]
    # Changes in transit, already on the bus or in the failed-records queue: a stream kept
    # after its table left the fan-out would bill by the hour for nothing.
    template = synth(env).template("fanout")
    streams = [r for r in template["Resources"].values() if r["Type"] == "AWS::Kinesis::Stream"]
    assert streams
    assert {(s["DeletionPolicy"], s["UpdateReplacePolicy"]) for s in streams} == {
        ("Delete", "Delete")
    }


def test_fanout_debezium_server_routes_each_topic_to_its_stream(dev: dict[str, Any]) -> None:
    env = {e["Name"]: e["Value"] for e in _container(dev)["Environment"]}
    chain = env["DEBEZIUM_TRANSFORMS"].split(",")
    assert chain[0] == "dropheartbeat"  # heartbeats are dropped before any routing
    routes = {
        env[f"DEBEZIUM_TRANSFORMS_{name.upper()}_REGEX"]: env[
            f"DEBEZIUM_TRANSFORMS_{name.upper()}_REPLACEMENT"
        ]
        for name in chain[1:]
        if env[f"DEBEZIUM_TRANSFORMS_{name.upper()}_TYPE"]
        == "org.apache.kafka.connect.transforms.RegexRouter"
    }
    (stream_id,) = resources(dev, "AWS::Kinesis::Stream")
    assert routes == {r"cdclake\-dev\.public\.orders": {"Ref": stream_id}}
    # Env var names map back to property names by '_' -> '.', so names must not contain '_'.
    assert all(name.isalnum() for name in chain)


def _key_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    return list(only(template, "AWS::KMS::Key")["KeyPolicy"]["Statement"])


def test_fanout_key_grants_no_service_acting_with_its_callers_permissions(
    dev: dict[str, Any],
) -> None:
    # SQS, Kinesis and EFS use the key with the caller's permissions: no statement of their own.
    principals = {
        service
        for s in _key_statements(dev)
        for service in as_list(s.get("Principal", {}).get("Service", []))
    }
    assert principals == {"events.amazonaws.com"}


def test_fanout_key_eventbridge_only_for_this_account(dev: dict[str, Any]) -> None:
    statements = [
        s
        for s in _key_statements(dev)
        if "events.amazonaws.com" in as_list(s.get("Principal", {}).get("Service", []))
    ]
    assert len(statements) == 3  # the bus, the archive's DescribeKey, deliveries to queues
    for statement in statements:
        assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == "111111111111"
    (delivery,) = [s for s in statements if s.get("Sid") == "EventBridgeDeliversToEncryptedQueues"]
    assert sorted(as_list(delivery["Action"])) == ["kms:Decrypt", "kms:GenerateDataKey"]


def _dead_letter_queues(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every queue but the consumers' own: their dead letters, undelivered events, failed
    records, the bus's dead letters (the consumer queues are the ones with a redrive policy)."""
    return [
        q
        for q in template["Resources"].values()
        if q["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" not in q["Properties"]
    ]


@pytest.mark.parametrize(("env", "policy"), [("dev", "Delete"), ("prod", "Retain")])
def test_fanout_dead_letter_and_failed_record_queues_retained_in_prod(synth, env, policy) -> None:  # type: ignore[no-untyped-def]
    template = synth(env).template("fanout")
    queues = _dead_letter_queues(template)
    consumers = synth(env).config.fanout.consumers
    assert len(queues) == 2 + 2 * len(consumers)
    assert {(q["DeletionPolicy"], q["UpdateReplacePolicy"]) for q in queues} == {(policy, policy)}


@pytest.mark.parametrize(("env", "policy"), [("dev", "Delete"), ("prod", "Retain")])
def test_fanout_consumer_queues_retained_in_prod(synth, env, policy) -> None:  # type: ignore[no-untyped-def]
    # What a consumer has not read yet is data like its dead letters.
    template = synth(env).template("fanout")
    queues = [q for q in of_type(template, "AWS::SQS::Queue") if "RedrivePolicy" in q["Properties"]]
    assert len(queues) == len(synth(env).config.fanout.consumers)
    assert {(q["DeletionPolicy"], q["UpdateReplacePolicy"]) for q in queues} == {(policy, policy)}


def test_fanout_rules_and_dead_letter_alarms_named_from_config(
    prod: dict[str, Any],
) -> None:
    rules = sorted(r["Name"] for r in resources(prod, "AWS::Events::Rule").values())
    assert rules == ["cdclake-prod-billing_webhook", "cdclake-prod-order_notifications"]
    alarms = sorted(
        a["AlarmName"]
        for a in resources(prod, "AWS::CloudWatch::Alarm").values()
        if "AlarmName" in a
    )
    assert alarms == [
        "cdclake-prod-billing_webhook-delivery-dlq",
        "cdclake-prod-billing_webhook-dlq",
        "cdclake-prod-fanout-failed-records",
        "cdclake-prod-order_notifications-delivery-dlq",
        "cdclake-prod-order_notifications-dlq",
    ]
    # Retained queues carry no fixed name: the next deploy after a delete would collide.
    assert not [q for q in _dead_letter_queues(prod) if "QueueName" in q["Properties"]]


def test_fanout_consumer_name_too_long_for_rule_refused() -> None:
    from environment.config import ConfigError
    from stacks.components.event_consumers import consumer_rule_name

    # A ConfigError: app.py ends synth with its one line, no traceback.
    with pytest.raises(ConfigError, match=r"fanout.consumers \(a{60}\): EventBridge rule name"):
        consumer_rule_name("cdclake-prod", "a" * 60)


def test_fanout_consumer_queue_accepts_events_of_its_rule_only(dev: dict[str, Any]) -> None:
    ((rule_id, rule),) = resources(dev, "AWS::Events::Rule").items()
    (queue_id,) = [i for i, q in resources(dev, "AWS::SQS::Queue").items() if "RedrivePolicy" in q]
    assert [t["Arn"] for t in rule["Targets"]] == [{"Fn::GetAtt": [queue_id, "Arn"]}]
    (policy,) = [
        p
        for p in resources(dev, "AWS::SQS::QueuePolicy").values()
        if p["Queues"] == [{"Ref": queue_id}]
    ]
    (allow,) = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "events.amazonaws.com"}
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}}


@pytest.fixture(scope="module")
def unverified() -> dict[str, Any]:
    """dev with ``database.tls_verify: false`` (the capture tests share this synth)."""
    return synth_config_variant("dev", "database", tls_verify=False)["fanout"]


@pytest.fixture(scope="module")
def rds_ca_location(synth) -> str:  # type: ignore[no-untyped-def]
    return rds_ca_object(synth("dev"), "fanout")


def _helpers(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The task's containers other than Debezium Server's."""
    definitions = only(template, "AWS::ECS::TaskDefinition")["ContainerDefinitions"]
    return [c for c in definitions if c["Name"] != "debezium"]


def _environment(template: dict[str, Any]) -> dict[str, str]:
    return {e["Name"]: e["Value"] for e in _container(template)["Environment"]}


def _task_role_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    (role_id, _) = only(template, "AWS::ECS::TaskDefinition")["TaskRoleArn"]["Fn::GetAtt"]
    return [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Roles"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]


def test_fanout_debezium_server_rds_ca_copied_before_start(
    dev: dict[str, Any], rds_ca_location: str
) -> None:
    root_cert = _environment(dev)["DEBEZIUM_SOURCE_DATABASE_SSLROOTCERT"]
    assert _environment(dev)["DEBEZIUM_SOURCE_DATABASE_SSLMODE"] == "verify-full"
    (fetch,) = _helpers(dev)
    assert fetch["Essential"] is False
    assert fetch["Image"].startswith("public.ecr.aws/aws-cli/aws-cli:2.")
    command = [flat(part) for part in fetch["Command"]]
    assert command[:2] == ["s3", "cp"] and command[-2:] == [f"s3://{rds_ca_location}", root_cert]
    # Debezium starts only once the copy has succeeded.
    assert _container(dev)["DependsOn"] == [
        {"ContainerName": fetch["Name"], "Condition": "SUCCESS"}
    ]


def test_fanout_debezium_server_rds_ca_on_a_shared_task_volume(dev: dict[str, Any]) -> None:
    folder = posixpath.dirname(_environment(dev)["DEBEZIUM_SOURCE_DATABASE_SSLROOTCERT"])
    (fetch,) = _helpers(dev)
    (written,) = [m for m in fetch["MountPoints"] if m["ContainerPath"] == folder]
    (read,) = [m for m in _container(dev)["MountPoints"] if m["ContainerPath"] == folder]
    assert written["SourceVolume"] == read["SourceVolume"]
    assert (written["ReadOnly"], read["ReadOnly"]) == (False, True)
    # A task volume (no EFS, no host path): it lives and dies with the task.
    volumes = {v["Name"]: v for v in only(dev, "AWS::ECS::TaskDefinition")["Volumes"]}
    assert volumes[read["SourceVolume"]] == {"Name": read["SourceVolume"]}


def test_fanout_debezium_server_task_role_reads_exactly_the_rds_ca_object(
    dev: dict[str, Any], rds_ca_location: str
) -> None:
    assert_reads_exactly(_task_role_statements(dev), rds_ca_location)


def test_fanout_tls_opt_out_no_rds_ca_container_volume_or_grant(
    unverified: dict[str, Any],
) -> None:
    assert _helpers(unverified) == []
    assert "DependsOn" not in _container(unverified)
    (volume,) = only(unverified, "AWS::ECS::TaskDefinition")["Volumes"]
    assert "EFSVolumeConfiguration" in volume
    env = _environment(unverified)
    assert env["DEBEZIUM_SOURCE_DATABASE_SSLMODE"] == "require"
    assert "DEBEZIUM_SOURCE_DATABASE_SSLROOTCERT" not in env
    assert not [s for s in strings(unverified) if s.endswith(".pem")]


def test_fanout_every_alarm_pages_the_alarm_topic(synth) -> None:  # type: ignore[no-untyped-def]
    dev = synth("dev")
    template = dev.template("fanout")
    database = dev.stacks["database"]
    topic = flat(database.resolve(database.alarm_topic.topic_arn)).strip("<>")  # its logical id
    alarms = list(resources(template, "AWS::CloudWatch::Alarm").values())
    consumers = len(dev.config.fanout.consumers)
    metrics = sorted(alarm.get("MetricName", "") for alarm in alarms)
    # The failed records, the bus's dead letters and the fan-out's lag; per consumer: its dead
    # letters, what EventBridge did not deliver, and its oldest message.
    assert metrics.count("ApproximateNumberOfMessagesVisible") == 2 + 2 * consumers
    assert metrics.count("IteratorAge") == 1
    assert metrics.count("ApproximateAgeOfOldestMessage") == consumers
    for alarm in alarms:
        actions = [flat(a) for a in alarm.get("AlarmActions", [])]
        assert len(actions) == 1, alarm["AlarmDescription"]
        assert f"ExportsOutputRef{topic}" in actions[0], alarm["AlarmDescription"]


def test_fanout_debezium_server_settings_naming_an_unmounted_offsets_file_refused() -> None:
    stack = cdk.Stack(cdk.App(), "Scratch")
    with pytest.raises(ValueError, match=r"offset\.storage\.file\.filename"):
        DebeziumServer(
            stack,
            "DebeziumServer",
            server=DebeziumServerConfig(),
            prefix="scratch",
            properties={"debezium.source.offset.storage.file.filename": "/tmp/offsets.dat"},
            stream_names={},
            vpc=ec2.Vpc(stack, "Vpc"),
            encryption_key=kms.Key(stack, "Key"),
            database_secret_arn="arn:aws:secretsmanager:eu-west-1:123456789012:secret:s-AbCdEf",
            rds_ca_bundle=None,
        )


@pytest.fixture(scope="module")
def fanout_off(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """dev's stacks with every table out of the fan-out and its consumer removed."""
    return synth_edited("dev", fanout_turned_off, tmp_path_factory.mktemp("fanout-off"))


def test_fanout_stack_fanout_turned_off_keeps_only_its_key(
    fanout_off: dict[str, dict[str, Any]],
) -> None:
    # No Debezium Server holding a slot for no table, no streams, function, bus or consumers;
    # the key stays, retained, under whatever prod's queues kept.
    resources_left = list(fanout_off["fanout"]["Resources"].values())
    assert [(r["Type"], r.get("DeletionPolicy")) for r in resources_left] == [
        ("AWS::KMS::Key", "Retain")
    ]


def test_fanout_stack_fanout_turned_off_credential_refresh_restarts_no_service(
    fanout_off: dict[str, dict[str, Any]],
) -> None:
    operations = fanout_off["operations"]
    (function,) = [
        f
        for f in props(operations, "AWS::Lambda::Function")
        if "ECS_SERVICES" in f.get("Environment", {}).get("Variables", {})
    ]
    assert function["Environment"]["Variables"]["ECS_SERVICES"] == "[]"
    assert not [s for s in policy_statements(operations) if "ecs:UpdateService" in s["Action"]]
