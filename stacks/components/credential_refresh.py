"""Restart the captures when the replication password rotates (lambdas/credential_refresh).

The MSK Connect connectors are found by name at run time (ListConnectors): their ARNs change
whenever a connector is replaced or removed for an upgrade, and an imported ARN would block
exactly those deploys ("Export ... cannot be updated as it is in use"). A rotation event that
cannot be delivered, or whose restart still fails after Lambda's retries, lands in a
dead-letter queue that pages: a lost one leaves both captures on a dead password.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.components.dead_letters import dead_letter_queue
from stacks.components.log_storage import log_group
from stacks.components.powertools_function import powertools_function

RETRIES = 2  # the rule target's and the function's own (asynchronous invocation)


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
        connector_names: Sequence[str],
        services: Sequence[tuple[str, str]],
        alarm_topic: sns.ITopic,
        retain: bool,
    ) -> None:
        """``connector_names``: MSK Connect connectors to restart, by their fixed names (a name
        not found at run time, e.g. while an upgrade has removed them, is skipped).
        ``services``: ECS services to restart, as (cluster, service) names fixed by config.
        ``retain``: keep the dead-letter queue when the stack is deleted. Finding and updating
        the connectors and updating ``services`` are the composing stack's grants to
        :attr:`function`."""
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.dead_letters = dead_letter_queue(
            self,
            "DeadLetters",
            retain=retain,
            what="replication password rotations the captures were not restarted for",
            alarm_topic=alarm_topic,
        )
        self.function = powertools_function(
            self,
            package="credential_refresh",
            description="Restart the Debezium captures after the replication password rotated",
            service="credential-refresh",
            timeout=cdk.Duration.minutes(1),
            log_group=log_group(self, "Logs"),
            environment={
                "CONNECTOR_NAMES": stack.to_json_string(list(connector_names)),
                "ECS_SERVICES": stack.to_json_string(
                    [{"cluster": cluster, "service": service} for cluster, service in services]
                ),
            },
        )
        # A restart that still fails after Lambda's own retries keeps its event.
        self.function.configure_async_invoke(
            retry_attempts=RETRIES,
            on_failure=destinations.SqsDestination(self.dead_letters.queue),
        )
        self.rule = events.Rule(
            self,
            "OnRotation",
            description="The replication secret rotated: restart what holds the old password",
            event_pattern=rotation_succeeded(secret.secret_arn),
            targets=[
                targets.LambdaFunction(
                    self.function,
                    retry_attempts=RETRIES,
                    dead_letter_queue=self.dead_letters.queue,
                )
            ],
        )
