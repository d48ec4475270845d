"""One CloudWatch dashboard per environment: the whole path from the database to the lake.

Rows follow a change: lake freshness first (the question operators ask), then the merge jobs,
the database and its replication slots, MSK and MSK Connect, and the fan-out path (Kinesis,
the Lambda, EventBridge rules and every dead-letter queue). Each graph uses the metric names
and dimensions the service publishes:

* RDS ``AWS/RDS``: ``OldestReplicationSlotLag``, ``TransactionLogsDiskUsage``, ``CPUUtilization``
  by ``DBClusterIdentifier`` and ``Role=WRITER`` (follows a failover).
* MSK ``AWS/Kafka``: consumer lag (``MaxOffsetLag``, ``EstimatedMaxTimeLag``) by ``Cluster Name``,
  ``Consumer Group`` and ``Topic``; ``KafkaDataLogsDiskUsed`` by ``Cluster Name`` and
  ``Broker ID``. MSK Connect ``AWS/KafkaConnect``: ``RunningTaskCount``, ``ErroredTaskCount`` by
  ``ConnectorName`` (it publishes no connector state; a failed task is an errored one).
* Kinesis ``GetRecords.IteratorAgeMilliseconds``; Lambda ``Errors``, ``Throttles``,
  ``IteratorAge`` and ``DestinationDeliveryFailures``. Lambda publishes no metric for a partial
  batch response: items it reports failed are retried (``IteratorAge`` grows) and those that
  exhaust the retries land in the on-failure queue, whose alarm the dead-letter row draws.
* EventBridge ``FailedInvocations`` and ``InvocationsSentToDlq`` by ``EventBusName`` and
  ``RuleName`` (a custom bus); SQS ``ApproximateNumberOfMessagesVisible`` of the failed-records
  queue and of each consumer's dead-letter queues as their alarms draw it (alarm widgets by the
  alarms' config names: the queues are named by CloudFormation). Streams and the function are
  drawn by their config names too, so nothing of the fan-out is imported.
* Glue ``glue.driver.aggregate.elapsedTime`` and ``numFailedTasks`` by ``JobName``,
  ``JobRunId=ALL`` and ``Type=count`` (``--enable-metrics``), beside the runs' own metrics; failed
  runs as the failure rule's ``TriggeredRules`` (and ``FailedInvocations``: pages not delivered)
  by ``RuleName`` (the default bus).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from constructs import Construct

from cdclake_merge import metrics
from environment.config import DatabaseAlarms as DatabaseAlarmsConfig
from stacks.components.lake_alarms import LakeAlarms, lake_metric

PERIOD = cdk.Duration.minutes(5)
WIDTH = 24  # the dashboard grid
HEIGHT = 6


@dataclass(frozen=True)
class WatchedDatabase:
    cluster_identifier: str
    alarms: DatabaseAlarmsConfig  # thresholds drawn on the graphs


@dataclass(frozen=True)
class WatchedCapture:
    kafka_cluster_name: str
    broker_ids: Sequence[int]
    connector_names: Sequence[str]
    sink_consumer_group: str
    topics: Sequence[str]  # the S3 sink reads these


@dataclass(frozen=True)
class WatchedFanOut:
    """Tables and consumers come and go with config, and the whole fan-out with its last
    table: everything is given by its name (fixed by config), never as a reference another
    stack would have to export and could not remove while this one imports it."""

    function_name: str
    stream_names: Mapping[str, str]  # by table
    bus_name: str
    rule_names: Mapping[str, str]  # by consumer
    # Alarms on the failed-records queue and the consumers' DLQs, by label.
    dead_letter_alarm_names: Mapping[str, str]


@dataclass(frozen=True)
class WatchedLake:
    environment: str  # the Environment dimension of the lake metrics
    merge_jobs: Mapping[str, str]  # table -> Glue job name
    alarms: LakeAlarms
    failed_runs_rule: events.IRule | None = None  # failed merge runs -> alarm topic (default bus)


def _metric(
    namespace: str, name: str, dimensions: Mapping[str, str], statistic: str, label: str
) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map=dict(dimensions),
        statistic=statistic,
        period=PERIOD,
        label=label,
    )


def _graph(
    title: str,
    left: Sequence[cloudwatch.IMetric],
    *,
    width: int = 8,
    right: Sequence[cloudwatch.IMetric] = (),
    annotations: Sequence[cloudwatch.HorizontalAnnotation] = (),
) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(
        title=title,
        left=list(left),
        right=list(right),
        left_annotations=list(annotations),
        width=width,
        height=HEIGHT,
    )


def _header(text: str) -> cloudwatch.TextWidget:
    return cloudwatch.TextWidget(markdown=text, width=WIDTH, height=1)


class PipelineDashboard(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        database: WatchedDatabase,
        capture: WatchedCapture,
        fanout: WatchedFanOut | None,
        lake: WatchedLake,
    ) -> None:
        """``fanout``: None where the environment has no fan-out table (no row drawn)."""
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=dashboard_name,
            default_interval=cdk.Duration.hours(6),
        )
        for row in (
            self._lake(lake),
            self._merge_jobs(lake),
            self._database(database),
            self._capture(capture),
            self._fanout(fanout) if fanout else [],
            self._dead_letters(fanout) if fanout else [],
        ):
            self.dashboard.add_widgets(*row)

    @staticmethod
    def _lake(lake: WatchedLake) -> list[cloudwatch.IWidget]:
        tables = list(lake.alarms.freshness_minutes)

        def per_table(name: str, statistic: str) -> list[cloudwatch.IMetric]:
            return [
                lake_metric(name, environment=lake.environment, table=t, statistic=statistic)
                for t in tables
            ]

        objectives = sorted(set(lake.alarms.freshness_minutes.values()))
        return [
            _header("## Lake freshness: lag = now - newest source commit in the table"),
            _graph(
                "Lag per table (seconds)",
                per_table(metrics.LAG, "Maximum"),
                width=12,
                annotations=[
                    cloudwatch.HorizontalAnnotation(value=m * 60, label=f"objective {m} min")
                    for m in objectives
                ],
            ),
            cloudwatch.AlarmStatusWidget(
                title="Lake alarms",
                alarms=[
                    *lake.alarms.lag.values(),
                    *lake.alarms.quarantined.values(),
                    *([lake.alarms.heartbeat] if lake.alarms.heartbeat is not None else []),
                ],
                width=12,
                height=HEIGHT,
            ),
            _graph("Events applied", per_table(metrics.EVENTS_APPLIED, "Sum")),
            _graph(
                "Upserts and deletes",
                per_table(metrics.UPSERTS, "Sum"),
                right=per_table(metrics.DELETES, "Sum"),
            ),
            _graph("Quarantined lines", per_table(metrics.QUARANTINED, "Sum")),
            # Every lag stays 0 while the capture is stopped: its heartbeat's age shows it.
            _graph(
                "Capture heartbeat age (seconds)",
                [
                    _metric(
                        metrics.NAMESPACE,
                        metrics.HEARTBEAT_AGE,
                        {metrics.ENVIRONMENT: lake.environment},
                        "Maximum",
                        "newest heartbeat change file",
                    )
                ],
                annotations=[
                    cloudwatch.HorizontalAnnotation(value=objectives[0] * 60, label="alarm")
                ]
                if objectives
                else [],
            ),
        ]

    @staticmethod
    def _merge_jobs(lake: WatchedLake) -> list[cloudwatch.IWidget]:
        def glue(name: str, statistic: str) -> list[cloudwatch.IMetric]:
            return [
                _metric(
                    "Glue",
                    name,
                    {"JobName": job, "JobRunId": "ALL", "Type": "count"},
                    statistic,
                    table,
                )
                for table, job in lake.merge_jobs.items()
            ]

        durations = [
            lake_metric(
                metrics.RUN_DURATION, environment=lake.environment, table=t, statistic="Maximum"
            )
            for t in lake.merge_jobs
        ]
        widgets: list[cloudwatch.IWidget] = [
            _header("## Merge jobs (Glue)"),
            _graph("Merge run duration (seconds)", durations, width=6),
            _graph(
                "Glue elapsed time (ms)",
                glue("glue.driver.aggregate.elapsedTime", "Maximum"),
                width=6,
            ),
            _graph(
                "Glue failed tasks", glue("glue.driver.aggregate.numFailedTasks", "Sum"), width=6
            ),
        ]
        if lake.failed_runs_rule is not None:
            # The failure rule is on the default bus: its metrics carry RuleName only. Each
            # trigger is one failed run (any job); a failed invocation is a page not delivered.
            rule = {"RuleName": lake.failed_runs_rule.rule_name}
            widgets.append(
                _graph(
                    "Failed merge runs",
                    [_metric("AWS/Events", "TriggeredRules", rule, "Sum", "failed runs")],
                    right=[_metric("AWS/Events", "FailedInvocations", rule, "Sum", "not notified")],
                    width=6,
                )
            )
        return widgets

    @staticmethod
    def _database(database: WatchedDatabase) -> list[cloudwatch.IWidget]:
        writer = {"DBClusterIdentifier": database.cluster_identifier, "Role": "WRITER"}

        def rds(name: str, label: str) -> cloudwatch.Metric:
            return _metric("AWS/RDS", name, writer, "Maximum", label)

        return [
            _header("## Database: replication slots keep WAL until the connectors confirm it"),
            _graph(
                "Oldest replication slot lag (bytes)",
                [rds("OldestReplicationSlotLag", "slot lag")],
                annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=database.alarms.replication_slot_lag_bytes, label="alarm"
                    )
                ],
            ),
            _graph(
                "Transaction logs disk usage (bytes)",
                [rds("TransactionLogsDiskUsage", "transaction logs")],
                annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=database.alarms.transaction_logs_disk_usage_bytes, label="alarm"
                    )
                ],
            ),
            _graph("Writer CPU (%)", [rds("CPUUtilization", "CPU")]),
        ]

    @staticmethod
    def _capture(capture: WatchedCapture) -> list[cloudwatch.IWidget]:
        def lag(name: str) -> list[cloudwatch.IMetric]:
            return [
                _metric(
                    "AWS/Kafka",
                    name,
                    {
                        "Cluster Name": capture.kafka_cluster_name,
                        "Consumer Group": capture.sink_consumer_group,
                        "Topic": topic,
                    },
                    "Maximum",
                    topic,
                )
                for topic in capture.topics
            ]

        def connect(name: str, statistic: str, suffix: str) -> list[cloudwatch.IMetric]:
            return [
                _metric("AWS/KafkaConnect", name, {"ConnectorName": c}, statistic, c + suffix)
                for c in capture.connector_names
            ]

        disk = [
            _metric(
                "AWS/Kafka",
                "KafkaDataLogsDiskUsed",
                {"Cluster Name": capture.kafka_cluster_name, "Broker ID": str(broker)},
                "Maximum",
                f"broker {broker}",
            )
            for broker in capture.broker_ids
        ]
        return [
            _header("## Capture: MSK and MSK Connect (Debezium source, S3 sink)"),
            _graph("S3 sink consumer lag (messages)", lag("MaxOffsetLag"), width=6),
            _graph("S3 sink consumer lag (seconds)", lag("EstimatedMaxTimeLag"), width=6),
            _graph(
                "Connector tasks: running / errored",
                connect("RunningTaskCount", "Minimum", " running"),
                right=connect("ErroredTaskCount", "Maximum", " errored"),
                width=6,
            ),
            _graph("Broker data disk used (%)", disk, width=6),
        ]

    @staticmethod
    def _fanout(fanout: WatchedFanOut) -> list[cloudwatch.IWidget]:
        iterator_ages = [
            _metric(
                "AWS/Kinesis",
                "GetRecords.IteratorAgeMilliseconds",
                {"StreamName": stream},
                "Maximum",
                table,
            )
            for table, stream in fanout.stream_names.items()
        ]

        def function(name: str, statistic: str, label: str) -> cloudwatch.IMetric:
            return _metric(
                "AWS/Lambda", name, {"FunctionName": fanout.function_name}, statistic, label
            )

        def rule(name: str) -> list[cloudwatch.IMetric]:
            return [
                _metric(
                    "AWS/Events",
                    name,
                    {"EventBusName": fanout.bus_name, "RuleName": rule_name},
                    "Sum",
                    consumer,
                )
                for consumer, rule_name in fanout.rule_names.items()
            ]

        return [
            _header("## Fan-out: Kinesis, the fan-out Lambda, EventBridge"),
            _graph("Kinesis iterator age (ms)", iterator_ages),
            _graph(
                "Fan-out Lambda errors, throttles, failed destination deliveries",
                [
                    function("Errors", "Sum", "errors"),
                    function("Throttles", "Sum", "throttles"),
                    function("DestinationDeliveryFailures", "Sum", "destination delivery failures"),
                ],
                right=[function("IteratorAge", "Maximum", "iterator age")],
            ),
            _graph(
                "EventBridge failed invocations",
                rule("FailedInvocations"),
                right=rule("InvocationsSentToDlq"),
            ),
        ]

    def _dead_letters(self, fanout: WatchedFanOut) -> list[cloudwatch.IWidget]:
        """Each dead-letter queue's depth as its alarm draws it (the alarm's metric and
        threshold): the alarms are named by config, the queues by CloudFormation."""
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.AlarmWidget(
                title=f"{label} (messages)",
                alarm=cloudwatch.Alarm.from_alarm_name(self, f"DeadLetters{index}", alarm_name),
                width=6,
                height=HEIGHT,
            )
            for index, (label, alarm_name) in enumerate(fanout.dead_letter_alarm_names.items())
        ]
        return (
            [_header("## Fan-out: failed records and the consumers' dead-letter queues"), *widgets]
            if widgets
            else []
        )
