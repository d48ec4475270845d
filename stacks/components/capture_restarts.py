"""The grant to restart the captures by their fixed names: MSK Connect connectors
(RestartConnector) and ECS services (a new deployment). The credential refresh and the
replication bootstrap's Reconcile both restart them, with exactly this and nothing else."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from stacks.components.nag import acknowledge_wildcards


def grant_capture_restarts(
    function: lambda_.Function,
    *,
    connectors: Sequence[str],
    services: Sequence[tuple[str, str]],
) -> None:
    """Let ``function`` restart the named connectors and (cluster, service) services."""
    stack = cdk.Stack.of(function)
    if connectors:
        # ListConnectors has no resource-level permission; the restart is limited to the
        # named connectors (any revision: connector/<name>/<uuid>).
        function.add_to_role_policy(
            iam.PolicyStatement(actions=["kafkaconnect:ListConnectors"], resources=["*"])
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["kafkaconnect:RestartConnector"],
                resources=[
                    stack.format_arn(
                        service="kafkaconnect",
                        resource="connector",
                        resource_name=f"{name}/*",
                        arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
                    )
                    for name in connectors
                ],
            )
        )
    if services:
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["ecs:UpdateService"],
                resources=[
                    stack.format_arn(
                        service="ecs",
                        resource="service",
                        resource_name=f"{cluster}/{service}",
                        arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
                    )
                    for cluster, service in services
                ],
            )
        )
    assert function.role is not None  # the function creates its own role
    acknowledge_wildcards(
        function.role,
        {
            r"^Resource::\*$": "kafkaconnect:ListConnectors has no resource-level permission",
            r"^Resource::arn:.*:kafkaconnect:.*:connector/.+/\*$": (
                "a connector's ARN ends in an id MSK Connect assigns; its name is fixed"
            ),
        },
    )
