"""Narrow cdk-nag acknowledgments: one finding id per construct, always with its reason."""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from constructs import IConstruct, IValidation

# CDK's KMS grants use these action wildcards; every such grant here is scoped to one key ARN.
KMS_GRANT_REASON = "CDK's KMS grant (GenerateDataKey*/ReEncrypt*) scoped to this stack's own key"


def managed_policy_finding(name: str) -> str:
    """cdk-nag's IAM4 finding id for the AWS managed policy ``service-role/<name>``."""
    return f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{name}]"


# What CDK gives every Lambda function's role (its own logs); each site says whose function.
LAMBDA_LOGS_FINDING = managed_policy_finding("AWSLambdaBasicExecutionRole")


def acknowledge(construct: IConstruct, findings: dict[str, str]) -> None:
    """Acknowledge each ``{finding id: reason}`` on ``construct`` (and what it contains)."""
    validations = cdk.Validations.of(construct)
    for finding, reason in findings.items():
        validations.acknowledge(cdk.Acknowledgment(id=finding, reason=reason))


def flatten_reference(value: Any) -> str:
    """cdk-nag's rendering of a CloudFormation value in finding ids (flatten-cfn-reference)."""
    if isinstance(value, str):
        return value.replace("${", "<").replace("}", ">")
    if isinstance(value, dict):
        if "Fn::Join" in value:
            delimiter, items = value["Fn::Join"]
            return str(delimiter).join(flatten_reference(item) for item in items)
        if "Fn::Sub" in value:
            return flatten_reference(value["Fn::Sub"])
        if "Fn::GetAtt" in value:
            resource, attribute = value["Fn::GetAtt"]
            return f"<{flatten_reference(resource)}.{flatten_reference(attribute)}>"
        if "Fn::ImportValue" in value:
            return flatten_reference(value["Fn::ImportValue"])
        if "Ref" in value:
            return f"<{flatten_reference(value['Ref'])}>"
    return json.dumps(value, separators=(",", ":"))


@jsii.implements(IValidation)
class _WildcardAcknowledger:
    """Acknowledges IAM5 findings once references are final (validation runs after prepare).

    Cross-stack ARNs only become ``Fn::ImportValue`` names during synthesis, so the exact finding
    ids cannot be spelled at construction time; each allowed finding is still acknowledged by
    its own id, and only findings matched by the given patterns.
    """

    def __init__(self, scope: IConstruct, allowed: dict[str, str]) -> None:
        self.scope = scope
        self.allowed = {re.compile(pattern): reason for pattern, reason in allowed.items()}

    def validate(self) -> list[str]:
        # Found by type, not by CDK's internal ids (a role's grants land in "DefaultPolicy").
        for policy in self.scope.node.find_all():
            if isinstance(policy, iam.Policy):
                self._acknowledge(policy)
        return []

    def _acknowledge(self, policy: iam.Policy) -> None:
        stack = cdk.Stack.of(policy)
        document = stack.resolve(policy.document.to_json())
        findings: dict[str, str] = {}
        for statement in document.get("Statement", []):
            if statement.get("Effect") != "Allow":
                continue
            actions = statement.get("Action", [])
            resources = statement.get("Resource", [])
            for action in actions if isinstance(actions, list) else [actions]:
                if "*" in action:
                    findings[f"Action::{action}"] = action
            for resource in resources if isinstance(resources, list) else [resources]:
                flat = flatten_reference(resource)
                if "*" in flat:
                    findings[f"Resource::{flat}"] = flat
        for finding in findings:
            for pattern, reason in self.allowed.items():
                if pattern.search(finding):
                    acknowledge(policy, {f"AwsSolutions-IAM5[{finding}]": reason})
                    break


def acknowledge_wildcards(scope: IConstruct, allowed: dict[str, str]) -> None:
    """Acknowledge the IAM5 findings of the policies in ``scope`` (a role, a function) that
    match ``{regex: reason}``, and no other."""
    scope.node.add_validation(_WildcardAcknowledger(scope, allowed))
