"""Dead-letter queues: what a target could not deliver, kept, and an alarm on the first message.

One shape for every dead-letter queue (EventBridge rule targets, Lambda on-failure destinations,
SQS redrive, event source mappings): encrypted (the caller's key, else SQS-managed), TLS only,
messages kept 14 days (the SQS maximum: a message keeps its original enqueue time when SQS
dead-letters it, so a DLQ must keep longer than its source) and, where the environment keeps
its data (``retain``), kept when its stack is deleted or it leaves the template. The alarm
fires on the first visible message; with ``alarm_topic`` it pages there.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.components.nag import acknowledge

DEAD_LETTER_RETENTION = cdk.Duration.days(14)


@dataclass(frozen=True)
class DeadLetters:
    queue: sqs.Queue
    alarm: cloudwatch.Alarm


def dead_letter_queue(
    scope: Construct,
    construct_id: str,
    *,
    retain: bool,
    what: str,
    encryption_key: kms.IKey | None = None,
    retention: cdk.Duration = DEAD_LETTER_RETENTION,
    alarm_name: str | None = None,
    alarm_topic: sns.ITopic | None = None,
) -> DeadLetters:
    """The queue ``construct_id`` and its alarm ``<construct_id>Alarm``, both in ``scope``.

    ``what`` says in the alarm what the messages are (e.g. "rotation events not delivered").
    The queue is named by CloudFormation (a retained queue with a fixed name would collide
    with the next deploy); ``alarm_name`` names the alarm, for readers in other stacks.
    """
    queue = sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.KMS if encryption_key else sqs.QueueEncryption.SQS_MANAGED,
        encryption_master_key=encryption_key,
        enforce_ssl=True,
        retention_period=retention,
        removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
    )
    acknowledge(queue, {"AwsSolutions-SQS3": "this queue is a dead-letter queue"})
    alarm = queue_depth_alarm(scope, f"{construct_id}Alarm", queue, what=what, name=alarm_name)
    if alarm_topic is not None:
        alarm.add_alarm_action(actions.SnsAction(alarm_topic))
    return DeadLetters(queue=queue, alarm=alarm)


def queue_depth_alarm(
    scope: Construct,
    construct_id: str,
    queue: sqs.IQueue,
    *,
    what: str | None = None,
    name: str | None = None,
) -> cloudwatch.Alarm:
    """Any message in a dead-letter queue is something that was not delivered."""
    waiting = f"messages waiting in dead-letter queue {queue.node.path}"
    return cloudwatch.Alarm(
        scope,
        construct_id,
        alarm_name=name,
        alarm_description=f"{what}: {waiting}" if what else waiting,
        metric=queue.metric_approximate_number_of_messages_visible(
            period=cdk.Duration.minutes(1), statistic="Maximum"
        ),
        threshold=1,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
