"""The rule and function that restart both captures after the replication password rotates."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cdk.stack_helpers import as_list, resources

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def operations(synth) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return synth("dev").template("operations")


def _refresh_function(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (logical_id, props)
        for logical_id, props in resources(template, "AWS::Lambda::Function").items()
        if "CONNECTOR_ARNS" in props.get("Environment", {}).get("Variables", {})
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


def test_credential_refresh_function_may_restart_only_the_captures(
    operations: dict[str, Any],
) -> None:
    _, props = _refresh_function(operations)
    role_id = props["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for policy in resources(operations, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Roles"]
        for s in policy["PolicyDocument"]["Statement"]
    ]
    actions = {a: s["Resource"] for s in statements for a in as_list(s["Action"])}
    assert set(actions) == {
        "kafkaconnect:DescribeConnector",
        "kafkaconnect:UpdateConnector",
        "ecs:UpdateService",
    }
    assert len(as_list(actions["kafkaconnect:UpdateConnector"])) == 2  # source and sink
    assert "ImportValue" in json.dumps(actions["ecs:UpdateService"])  # the fan-out's service
