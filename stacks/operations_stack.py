"""Operations: lake freshness alarms, failed merge runs and the environment's dashboard, built
after every stack."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_sns as sns
from constructs import Construct

from cdclake.config import EnvironmentConfig
from connectors.configs import broker_count, connector_name, topic_name
from stacks.capture_stack import CaptureStack
from stacks.components.credential_refresh import CredentialRefresh
from stacks.components.dashboard import (
    PipelineDashboard,
    WatchedCapture,
    WatchedDatabase,
    WatchedFanOut,
    WatchedLake,
)
from stacks.components.lake_alarms import LakeAlarms
from stacks.components.merge_job_failures import MergeJobFailures
from stacks.database_stack import DatabaseStack
from stacks.fanout_stack import FanOutStack
from stacks.lake_stack import LakeStack


class OperationsStack(cdk.Stack):
    """Reads the other stacks, changes none of them: nothing there depends on this one.

    Names fixed by config (cluster, connectors, topics, jobs) are used as they are; generated
    ones (streams, function, queues, rules) come from the fan-out stack as exports.
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
        self.add_dependency(capture)  # drawn, not referenced: deploy after it all the same

        # One topic pages for the whole path: the database alarms' topic.
        self.lake_alarms = LakeAlarms(
            self,
            "LakeAlarms",
            config=config.lake,
            tables=config.lake_tables,
            environment=config.env,
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
                topic=sns.Topic.from_topic_arn(self, "AlarmTopic", database.alarm_topic.topic_arn),
            )
            if merge_jobs
            else None
        )

        consumers = fanout.event_consumers.consumers
        self.dashboard = PipelineDashboard(
            self,
            "Dashboard",
            dashboard_name=config.resource_name("pipeline"),
            database=WatchedDatabase(
                cluster_identifier=config.resource_name("aurora"),  # as DatabaseStack names it
                alarms=config.database.alarms,
            ),
            capture=WatchedCapture(
                kafka_cluster_name=capture.kafka.cluster_name,
                broker_ids=range(1, broker_count(config) + 1),
                connector_names=[
                    connector_name(config, "debezium-source"),
                    connector_name(config, "s3-sink"),
                ],
                # Kafka Connect's consumer group of a sink connector: connect-<connector name>.
                sink_consumer_group=f"connect-{connector_name(config, 's3-sink')}",
                topics=[topic_name(config, t) for t in config.lake_tables],
            ),
            fanout=WatchedFanOut(
                function=fanout.fanout_function,
                streams=fanout.kinesis_streams,
                failure_queue=fanout.fanout.failure_queue,
                bus_name=fanout.event_bus.event_bus_name,
                rules={name: c.rule for name, c in consumers.items()},
                dead_letter_queues={
                    label: queue
                    for name, c in consumers.items()
                    for label, queue in (
                        (f"{name} dead letters", c.dead_letter_queue),
                        (f"{name} undelivered", c.delivery_dead_letter_queue),
                    )
                },
            ),
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
        self.credential_refresh = CredentialRefresh(
            self,
            "CredentialRefresh",
            secret=database.replication_secret,
            connector_arns=[c.attr_connector_arn for c in capture.connectors.connectors],
            services=[fanout.debezium_server.service],
        )

        name = config.resource_name("pipeline")
        cdk.CfnOutput(self, "DashboardName", value=name)
        cdk.CfnOutput(
            self,
            "DashboardUrl",
            value=f"https://console.aws.amazon.com/cloudwatch/home?region={self.region}"
            f"#dashboards:name={name}",
        )
