"""The change-event bus: KMS-encrypted, with an archive of every change for replay.

An event the bus cannot encrypt or decrypt (its key disabled or its policy changed) is an error
EventBridge does not retry: it goes to the bus's dead-letter queue, whose alarm pages. That
queue is not under the bus's key, which is what failed: SQS-managed encryption.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from environment.config import FanOutConfig
from environment.tables import TableConfig
from stacks.components.dead_letters import dead_letter_queue


class ChangeEventBus(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        fanout: FanOutConfig,
        tables: Sequence[TableConfig],
        encryption_key: kms.IKey,
        retain: bool,
    ) -> None:
        """``retain``: keep the dead-letter queue when the stack is deleted; the composing
        stack pages :attr:`dead_letters` ``.alarm``."""
        super().__init__(scope, construct_id)
        self.dead_letters = dead_letter_queue(
            self,
            "DeadLetters",
            retain=retain,
            what="change events the bus could not encrypt or decrypt with its key",
        )
        self.bus = events.EventBus(
            self,
            "Bus",
            event_bus_name=name,
            kms_key=encryption_key,
            dead_letter_queue=self.dead_letters.queue,
        )
        # CDK writes no queue policy for a bus's dead-letter queue: EventBridge may send to it
        # for this bus only.
        self.dead_letters.queue.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sqs:SendMessage"],
                resources=[self.dead_letters.queue.queue_arn],
                conditions={"ArnEquals": {"aws:SourceArn": self.bus.event_bus_arn}},
            )
        )
        # Everything the fan-out publishes, kept for replay into the same bus. L1, because
        # EventBus.archive() drops kms_key (aws-cdk#38298) and the Archive L2 writes the bus's
        # GetAtt ARN into the key policy, a cycle (key -> bus -> key) CloudFormation rejects.
        # Placed where archive() put it, so the logical id stays and the archive is updated.
        sources = sorted({t.event_source for t in tables})
        self.archive = events.CfnArchive(
            Construct(self.bus, "Archive"),
            "Archive",
            source_arn=self.bus.event_bus_arn,
            archive_name=name,
            description="every change event, for replay",
            event_pattern={"source": sources or ["cdc"]},
            retention_days=fanout.archive_retention_days,
            kms_key_identifier=encryption_key.key_arn,
        )
        # Replayable only into this bus, which goes with the stack; a retained archive's fixed
        # name would also block the stack's next create.
        self.archive.apply_removal_policy(cdk.RemovalPolicy.DESTROY)
        # The archive key policy AWS documents (describe, generate, decrypt, re-encrypt)
        # whatever the call's source (the bus's own statement only covers calls whose source is
        # the bus), but only for this account (confused deputy).
        encryption_key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeArchive",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=[
                    "kms:DescribeKey",
                    "kms:GenerateDataKey",
                    "kms:Decrypt",
                    "kms:ReEncryptFrom",
                    "kms:ReEncryptTo",
                ],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account}},
            )
        )
