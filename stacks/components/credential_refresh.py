"""Restart the captures when the replication password rotates (lambdas/credential_refresh)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from stacks.components.log_storage import log_group
from stacks.components.powertools_function import powertools_function

CODE_DIR = Path(__file__).resolve().parents[2] / "lambdas" / "credential_refresh"


def rotation_succeeded(secret_arn: str) -> events.EventPattern:
    """Secrets Manager's ``RotationSucceeded`` for one secret, as CloudTrail delivers it."""
    return events.EventPattern(
        source=["aws.secretsmanager"],
        detail_type=["AWS Service Event via CloudTrail"],
        detail={
            "eventName": ["RotationSucceeded"],
            "additionalEventData": {"SecretId": [secret_arn]},
        },
    )


class CredentialRefresh(Construct):
    """A rule on the secret's successful rotation and the function that restarts the captures."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        secret: secretsmanager.ISecret,
        connector_arns: Sequence[str],
        services: Sequence[ecs.FargateService],
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.function = powertools_function(
            self,
            package="credential_refresh",
            description="Restart the Debezium captures after the replication password rotated",
            service="credential-refresh",
            timeout=cdk.Duration.minutes(1),
            log_group=log_group(self, "Logs"),
            environment={
                "CONNECTOR_ARNS": stack.to_json_string(list(connector_arns)),
                "ECS_SERVICES": stack.to_json_string(
                    [
                        {"cluster": s.cluster.cluster_name, "service": s.service_name}
                        for s in services
                    ]
                ),
            },
        )
        if connector_arns:
            self.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["kafkaconnect:DescribeConnector", "kafkaconnect:UpdateConnector"],
                    resources=list(connector_arns),
                )
            )
        if services:
            self.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["ecs:UpdateService"], resources=[s.service_arn for s in services]
                )
            )
        self.rule = events.Rule(
            self,
            "OnRotation",
            description="The replication secret rotated: restart what holds the old password",
            event_pattern=rotation_succeeded(secret.secret_arn),
            targets=[targets.LambdaFunction(self.function, retry_attempts=2)],
        )
