"""Alarms that page before a stalled replication slot fills the database's disk."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as sns_subscriptions
from constructs import Construct

from environment.config import DatabaseAlarms as DatabaseAlarmsConfig


class DatabaseAlarms(Construct):
    """Slot lag and transaction-log disk alarms on the writer, notifying an SNS topic.

    An idle or stopped connector keeps its slot, and the slot keeps WAL: lag and
    ``TransactionLogsDiskUsage`` grow until ``max_slot_wal_keep_size`` invalidates the slot
    (a new snapshot) or the volume fills. Both alarms use the cluster's WRITER role
    dimension, so they follow a failover. Subscribe the on-call rotation to ``topic``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DatabaseAlarmsConfig,
        cluster_identifier: str,
        environment: str,
        reconcile_every: cdk.Duration,
    ) -> None:
        super().__init__(scope, construct_id)

        # Own key for the topic: the services that publish to it must be allowed to use it (the
        # database key not): CloudWatch for the alarms, EventBridge for rules on the default bus
        # (the operations stack's failed merge runs). Each only for this account (confused
        # deputy): CloudWatch says which alarm it acts for; EventBridge's requests to KMS through
        # SNS carry no source (the SNS guide: aws:SourceAccount and aws:SourceArn are not
        # supported there), so it is bound to this account's topics by the topic ARN SNS puts
        # in the encryption context. The key cannot name the topic itself (topic -> key -> topic).
        stack = cdk.Stack.of(self)
        key = kms.Key(
            self,
            "TopicKey",
            description=f"SNS alarm topic of {cluster_identifier}",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                },
            )
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeRulesPublish",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:sns:topicArn": stack.format_arn(
                            service="sns", resource="*"
                        )
                    }
                },
            )
        )
        #: SNS topic the database alarms notify (subscribe the on-call pager to it).
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name=f"{cluster_identifier} database alarms",
            master_key=key,
            enforce_ssl=True,
        )
        # EventBridge publishes through the topic's policy (an SNS target takes no role here);
        # granted here, with the key, so a rule in another stack changes nothing of this one:
        # any rule of this account, none of another's.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeRulesPublish",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            )
        )

        # Optional on-call address from config (it confirms the subscription by email).
        if config.notify_email:
            self.topic.add_subscription(sns_subscriptions.EmailSubscription(config.notify_email))

        def writer_metric(name: str) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace="AWS/RDS",
                metric_name=name,
                dimensions_map={"DBClusterIdentifier": cluster_identifier, "Role": "WRITER"},
                statistic="Maximum",
                period=cdk.Duration.minutes(5),
                unit=cloudwatch.Unit.BYTES,
            )

        # Slot lag: bytes of WAL the slowest slot has not confirmed (a stopped connector).
        self.slot_lag = cloudwatch.Alarm(
            self,
            "ReplicationSlotLag",
            alarm_description=(
                "Oldest replication slot lags more than the configured bytes: a CDC connector "
                "is stopped or slow. See docs/database.md#when-slot-lag-pages"
            ),
            metric=writer_metric("OldestReplicationSlotLag"),
            threshold=config.replication_slot_lag_bytes,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        # Disk used by retained WAL, whatever retains it.
        self.transaction_logs = cloudwatch.Alarm(
            self,
            "TransactionLogsDiskUsage",
            alarm_description=(
                "Transaction logs use more disk than the configured bytes; usually a slot "
                "nobody reads. See docs/database.md#when-slot-lag-pages"
            ),
            metric=writer_metric("TransactionLogsDiskUsage"),
            threshold=config.transaction_logs_disk_usage_bytes,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=2,
            datapoints_to_alarm=2,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        # Configured tables the database does not have are not captured at all; the scheduled
        # bootstrap publishes how many there are (lambdas/bootstrap/handler.py).
        self.missing_tables = cloudwatch.Alarm(
            self,
            "MissingTables",
            alarm_description=(
                "Configured tables do not exist in the database, so none of their changes are "
                "captured. See docs/operations.md#a-configured-table-is-missing"
            ),
            metric=cloudwatch.Metric(
                namespace="CdcLake",
                metric_name="MissingTables",
                dimensions_map={"Environment": environment},
                statistic="Maximum",
                period=reconcile_every,
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.MISSING,
        )
        for alarm in (self.slot_lag, self.transaction_logs, self.missing_tables):
            alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
            alarm.add_ok_action(cw_actions.SnsAction(self.topic))
