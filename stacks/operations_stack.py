"""Operations: lake freshness alarms, failed merge runs and the environment's dashboard, built
after every stack."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_sns as sns
from constructs import Construct

from connectors.configs import broker_count, connector_name, topic_name
from environment.config import EnvironmentConfig
from stacks.capture_stack import CaptureStack
from stacks.components.capture_restarts import grant_capture_restarts
from stacks.components.change_streams import stream_name
from stacks.components.credential_refresh import CredentialRefresh
from stacks.components.dashboard import (
    PipelineDashboard,
    WatchedCapture,
    WatchedDatabase,
    WatchedFanOut,
    WatchedLake,
)
from stacks.components.debezium_server import service_names
from stacks.components.event_consumers import consumer_rule_name, dead_letter_alarm_names
from stacks.components.fanout_function import failed_records_alarm_name
from stacks.components.fanout_function import function_name as fanout_function_name
from stacks.components.lake_alarms import LakeAlarms
from stacks.components.merge_job_failures import MergeJobFailures
from stacks.database_stack import DatabaseStack
from stacks.fanout_stack import FanOutStack
from stacks.lake_stack import LakeStack


class OperationsStack(cdk.Stack):
    """Reads the other stacks, changes none of them: nothing there depends on this one.

    Names fixed by config (cluster, connectors, topics, jobs, the fan-out's streams, function,
    bus, Debezium Server service, the consumers' rules and dead-letter alarms) are used as they
    are, so a documented change (connectors removed for an upgrade, a fan-out table or consumer
    removed, the fan-out turned off) takes no export this stack imports away; CloudFormation
    refuses to delete or change an export in use. Only what those changes leave alone is
    imported: the alarm topic, the replication secret and the dispatcher.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        database: DatabaseStack,
        lake: LakeStack,
        capture: CaptureStack,
        fanout: FanOutStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # Drawn and restarted by name, not referenced: deploy after them all the same.
        self.add_dependency(capture)
        self.add_dependency(fanout)
        # Where the environment keeps its data, dead letters outlive the stack.
        retain = config.database.deletion_protection
        alarm_topic = sns.Topic.from_topic_arn(self, "AlarmTopic", database.alarm_topic.topic_arn)

        # One topic pages for the whole path: the database alarms' topic.
        self.lake_alarms = LakeAlarms(
            self,
            "LakeAlarms",
            config=config.lake,
            tables=config.lake_tables,
            environment=config.env,
            dispatcher=lake.dispatcher.function,
            topic=database.alarm_topic,
        )

        # A merge run that fails pages at once, not a freshness objective later. The topic is
        # imported: the database stack's alarms grant EventBridge its policy and key, so this
        # rule's target adds nothing to that stack.
        merge_jobs = {t: str(job.name) for t, job in lake.merge_jobs.jobs.items()}
        self.merge_job_failures = (
            MergeJobFailures(
                self,
                "MergeJobFailures",
                job_names=list(merge_jobs.values()),
                environment=config.env,
                topic=alarm_topic,
                retain=retain,
            )
            if merge_jobs
            else None
        )

        consumers = [c.name for c in config.fanout.consumers]
        fanout_tables = config.fanout_tables
        connectors = [connector_name(config, "debezium-source"), connector_name(config, "s3-sink")]
        self.dashboard = PipelineDashboard(
            self,
            "Dashboard",
            dashboard_name=config.resource_name("pipeline"),
            database=WatchedDatabase(
                cluster_identifier=config.cluster_identifier,
                alarms=config.database.alarms,
            ),
            capture=WatchedCapture(
                kafka_cluster_name=capture.kafka.cluster_name,
                broker_ids=range(1, broker_count(config) + 1),
                connector_names=connectors,
                # Kafka Connect's consumer group of a sink connector: connect-<connector name>.
                sink_consumer_group=f"connect-{connector_name(config, 's3-sink')}",
                topics=[topic_name(config, t) for t in config.lake_tables],
            ),
            fanout=WatchedFanOut(
                function_name=fanout_function_name(config.prefix),
                stream_names={t.name: stream_name(config.prefix, t.name) for t in fanout_tables},
                bus_name=config.resource_name("changes"),  # as FanOutStack names it
                rule_names={name: consumer_rule_name(config.prefix, name) for name in consumers},
                dead_letter_alarm_names={
                    "fanout failed records": failed_records_alarm_name(config.prefix),
                    **{
                        f"{name} {role}": alarm_name
                        for name in consumers
                        for role, alarm_name in dead_letter_alarm_names(config.prefix, name).items()
                    },
                },
            )
            if fanout_tables
            else None,
            lake=WatchedLake(
                environment=config.env,
                merge_jobs=merge_jobs,
                alarms=self.lake_alarms,
                failed_runs_rule=None
                if self.merge_job_failures is None
                else self.merge_job_failures.rule,
            ),
        )

        # A rotated replication password reaches the captures only when their tasks restart.
        services = [service_names(config.prefix)] if fanout_tables else []
        self.credential_refresh = CredentialRefresh(
            self,
            "CredentialRefresh",
            secret=database.replication_secret,
            connector_names=connectors,
            services=services,
            alarm_topic=alarm_topic,
            retain=retain,
        )
        grant_capture_restarts(
            self.credential_refresh.function, connectors=connectors, services=services
        )

        name = config.resource_name("pipeline")
        cdk.CfnOutput(self, "DashboardName", value=name)
        cdk.CfnOutput(
            self,
            "DashboardUrl",
            value=f"https://console.aws.amazon.com/cloudwatch/home?region={self.region}"
            f"#dashboards:name={name}",
        )
