"""The rule and function that restart both captures after the replication password rotates."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cdk.stack_helpers import as_list, assert_rule_dead_letters, resources

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def operations(synth) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return synth("dev").template("operations")


def _refresh_function(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (logical_id, props)
        for logical_id, props in resources(template, "AWS::Lambda::Function").items()
        if "CONNECTOR_NAMES" in props.get("Environment", {}).get("Variables", {})
    ]
    return found


def test_credential_refresh_rule_matches_replication_secret_rotation(
    operations: dict[str, Any],
) -> None:
    function_id, _ = _refresh_function(operations)
    (rule,) = [
        r
        for r in resources(operations, "AWS::Events::Rule").values()
        if r["Targets"][0]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    ]
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["aws.secretsmanager"]
    assert pattern["detail"]["eventName"] == ["RotationSucceeded"]
    (secret,) = pattern["detail"]["additionalEventData"]["SecretId"]
    assert "ReplicationSecret" in json.dumps(secret)  # the replication role's, not the master's


SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:111111111111:secret:cdclake-dev-replication-AbCdEf"


def rotation_event(event_name: str, secret_arn: str) -> dict[str, Any]:
    """Secrets Manager's rotation entry as CloudTrail hands it to EventBridge: an
    ``AwsServiceEvent`` whose secret is ``additionalEventData.SecretId`` (docs: Secrets Manager
    user guide, "AWS CloudTrail entries for Secrets Manager", log entries for rotation)."""
    return {
        "eventVersion": "1.05",
        "userIdentity": {"accountId": "111111111111", "invokedBy": "secretsmanager.amazonaws.com"},
        "eventTime": "2026-11-24T06:00:00Z",
        "eventSource": "secretsmanager.amazonaws.com",
        "eventName": event_name,
        "awsRegion": "eu-west-1",
        "sourceIPAddress": "secretsmanager.amazonaws.com",
        "userAgent": "secretsmanager.amazonaws.com",
        "requestParameters": None,
        "responseElements": None,
        "additionalEventData": {"SecretId": secret_arn},
        "requestID": "6ab5c6a4-3d8e-4a8b-9d2b-2f4c1e6f0a11",
        "eventID": "1c4b0a62-8a9f-4f0e-b6a3-5d7e2c9a8b10",
        "readOnly": False,
        "eventType": "AwsServiceEvent",
        "managementEvent": True,
        "recipientAccountId": "111111111111",
        "eventCategory": "Management",
    }


@pytest.fixture(scope="module")
def rotation_rule_delivers(operations: dict[str, Any]) -> Any:
    """``delivers(event_name, secret_arn)``: whether EventBridge (moto's) routes that CloudTrail
    entry through the rotation rule's own pattern, its secret token standing for SECRET_ARN."""
    import boto3
    from moto import mock_aws

    function_id, _ = _refresh_function(operations)
    (rule,) = [
        r
        for r in resources(operations, "AWS::Events::Rule").values()
        if r["Targets"][0]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    ]
    pattern = json.loads(json.dumps(rule["EventPattern"]))
    pattern["detail"]["additionalEventData"]["SecretId"] = [SECRET_ARN]

    def delivers(event_name: str, secret_arn: str) -> bool:
        with mock_aws():
            events = boto3.client("events", region_name="eu-west-1")
            sqs = boto3.client("sqs", region_name="eu-west-1")
            queue = sqs.create_queue(QueueName="rotations")["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
            events.put_rule(Name="rotation", EventPattern=json.dumps(pattern))
            events.put_targets(
                Rule="rotation",
                Targets=[{"Id": "q", "Arn": arn["Attributes"]["QueueArn"]}],
            )
            events.put_events(
                Entries=[
                    {
                        "Source": "aws.secretsmanager",
                        "DetailType": "AWS Service Event via CloudTrail",
                        "Detail": json.dumps(rotation_event(event_name, secret_arn)),
                    }
                ]
            )
            received = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0)
            return bool(received.get("Messages"))

    return delivers


@pytest.mark.moto
def test_credential_refresh_rule_real_rotation_succeeded_entry_is_delivered(
    rotation_rule_delivers: Any,
) -> None:
    assert rotation_rule_delivers("RotationSucceeded", SECRET_ARN)


@pytest.mark.moto
@pytest.mark.parametrize(
    ("event_name", "secret_arn"),
    [
        ("RotationFailed", SECRET_ARN),
        ("RotationStarted", SECRET_ARN),
        ("RotationSucceeded", SECRET_ARN.replace("replication", "master")),
    ],
    ids=["failed", "started", "other-secret"],
)
def test_credential_refresh_rule_other_rotation_entry_is_not_delivered(
    rotation_rule_delivers: Any, event_name: str, secret_arn: str
) -> None:
    assert not rotation_rule_delivers(event_name, secret_arn)


def _role_statements(template: dict[str, Any], function: dict[str, Any]) -> list[dict[str, Any]]:
    role_id = function["Role"]["Fn::GetAtt"][0]
    return [
        s
        for policy in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Roles"]
        for s in policy["PolicyDocument"]["Statement"]
    ]


def test_credential_refresh_function_may_restart_only_the_captures(
    operations: dict[str, Any],
) -> None:
    _, props = _refresh_function(operations)
    statements = _role_statements(operations, props)
    actions = {a: s["Resource"] for s in statements for a in as_list(s["Action"])}
    assert {a for a in actions if a.split(":")[0] in {"kafkaconnect", "ecs"}} == {
        "kafkaconnect:ListConnectors",
        "kafkaconnect:RestartConnector",
        "ecs:UpdateService",
    }
    assert actions["kafkaconnect:ListConnectors"] == "*"  # no resource-level permission
    # The connectors by their fixed names, any revision; never an ARN imported from Capture.
    assert sorted(json.dumps(r) for r in as_list(actions["kafkaconnect:RestartConnector"])) == [
        json.dumps(
            {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        f":kafkaconnect:eu-west-1:111111111111:connector/cdclake-dev-{name}/*",
                    ],
                ]
            }
        )
        for name in ("debezium-source", "s3-sink")
    ]
    # The fan-out's service by its fixed name: turning the fan-out off removes no export in use.
    assert actions["ecs:UpdateService"] == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":ecs:eu-west-1:111111111111:service/cdclake-dev-debezium-server/"
                "cdclake-dev-debezium-server",
            ],
        ]
    }


def test_credential_refresh_connectors_named_from_config(operations: dict[str, Any]) -> None:
    _, props = _refresh_function(operations)
    names = props["Environment"]["Variables"]["CONNECTOR_NAMES"]
    assert json.loads(names) == ["cdclake-dev-debezium-source", "cdclake-dev-s3-sink"]
    assert "CdclakeDevCapture" not in json.dumps(operations)  # nothing imported from Capture


def _dead_letters(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The rotation rule's dead-letter queue (the target's DeadLetterConfig)."""
    function_id, _ = _refresh_function(template)
    (target,) = [
        t
        for r in resources(template, "AWS::Events::Rule").values()
        for t in r["Targets"]
        if t["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    ]
    queue_id = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    return queue_id, template["Resources"][queue_id]


def test_credential_refresh_undelivered_rotation_kept_in_encrypted_queue(
    operations: dict[str, Any],
) -> None:
    queue_id, queue = _dead_letters(operations)
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert_rule_dead_letters(operations, queue_id)  # only the rotation rule may send to it


def test_credential_refresh_failed_restart_kept_in_the_same_queue(
    operations: dict[str, Any],
) -> None:
    function_id, _ = _refresh_function(operations)
    queue_id, _ = _dead_letters(operations)
    (config,) = resources(operations, "AWS::Lambda::EventInvokeConfig").values()
    assert config["FunctionName"] == {"Ref": function_id}
    assert config["MaximumRetryAttempts"] == 2
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [queue_id, "Arn"]
    }


def test_credential_refresh_dead_letters_page_the_alarm_topic(operations: dict[str, Any]) -> None:
    queue_id, _ = _dead_letters(operations)
    (alarm,) = [
        a
        for a in resources(operations, "AWS::CloudWatch::Alarm").values()
        if a.get("Dimensions")
        == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    ]
    assert (alarm["MetricName"], alarm["Threshold"]) == ("ApproximateNumberOfMessagesVisible", 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    (action,) = alarm["AlarmActions"]
    assert "AlarmsTopic" in json.dumps(action)


@pytest.mark.parametrize(("env", "policy"), [("dev", "Delete"), ("prod", "Retain")])
def test_credential_refresh_dead_letters_retained_in_prod(synth, env: str, policy: str) -> None:  # type: ignore[no-untyped-def]
    template = synth(env).template("operations")
    _, queue = _dead_letters(template)
    assert (queue["DeletionPolicy"], queue["UpdateReplacePolicy"]) == (policy, policy)
