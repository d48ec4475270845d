"""Lake freshness alarms: per lake table, lag beyond its objective and quarantined lines.

Both watch the lake metrics (``cdclake_merge.metrics``). ``LagSeconds`` comes from the
environment's dispatcher every turn, for every table it could read (0 when nothing waits, the
age of the oldest waiting change file otherwise), and from each merge run that applied events.
The lag alarm's period is the table's freshness objective: a period without any datapoint
means nothing could read the table in that time (the dispatcher is stopped or failing, the
table unreadable) and counts as breaching, like a lag over the objective. A table that never
received a change file reports 0 (nothing waits), so a new or empty table does not page.
Quarantined lines are events: any in five minutes alarms, silence is fine. A change file
waiting unapplied for half of ``lake.change_file_expiration_days`` pages again on its own alarm
(``expiring``), whatever the freshness alarm's state: the bucket's lifecycle deletes a change
file at that age whether it was applied or not, so what pages then is data about to be lost
(``cdclake doctor`` fails its check from the same point).

A table's lag is 0 whenever none of its change files waits, so a stopped Debezium source or S3
sink shows in no lag. The capture's heartbeat does (``cdclake_merge.heartbeat``): the dispatcher
publishes the age of its newest heartbeat change file every turn, and ``heartbeat`` alarms when
it passes the smallest freshness objective of the lake tables, the tables that capture carries,
or when no age came in that time (the dispatcher stopped, or the capture never delivered).

The dispatcher's own failures (a table it cannot read, a start Glue refused, lag it could not
publish: the turn ends in an error) alarm within the hour, before a freshness objective would.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from cdclake_merge import metrics
from environment.lake import LakeConfig
from environment.tables import TableConfig

QUARANTINE_PERIOD = cdk.Duration.minutes(5)
GRAPH_PERIOD = cdk.Duration.minutes(5)
# Longer than any dispatch schedule's interval: a turn that keeps failing keeps the alarm on.
DISPATCHER_ERROR_PERIOD = cdk.Duration.hours(1)
EXPIRY_PERIOD = cdk.Duration.hours(1)
# The share of the change files' life a waiting file may reach before its alarm pages (the
# doctor's check fails from the same share).
EXPIRY_WARNING_SHARE = 0.5


def lake_metric(
    name: str,
    *,
    environment: str,
    table: str | None,
    statistic: str,
    period: cdk.Duration = GRAPH_PERIOD,
) -> cloudwatch.Metric:
    """One of the lake metrics of ``table`` (schema.table), or of the environment's alone
    (None: the dispatcher's heartbeat age)."""
    dimensions = {metrics.ENVIRONMENT: environment}
    if table is not None:
        dimensions[metrics.TABLE] = table
    return cloudwatch.Metric(
        namespace=metrics.NAMESPACE,
        metric_name=name,
        dimensions_map=dimensions,
        statistic=statistic,
        period=period,
    )


class LakeAlarms(Construct):
    """Per lake table: ``lag[table]`` and ``quarantined[table]``; ``dispatcher_errors`` for the
    environment's dispatcher and ``heartbeat`` for its lake capture (None without lake
    tables); all notifying ``topic``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: LakeConfig,
        tables: Sequence[TableConfig],
        environment: str,
        dispatcher: lambda_.IFunction,
        topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, construct_id)
        #: Minutes each table may lag its source (its objective from config).
        self.freshness_minutes = {t.name: config.freshness_of(t) for t in tables}
        self.lag: dict[str, cloudwatch.Alarm] = {}
        #: Per table: a change file waiting past the share of its life (missing data is the
        #: lag alarm's to page).
        self.expiring: dict[str, cloudwatch.Alarm] = {}
        self.quarantined: dict[str, cloudwatch.Alarm] = {}
        expiry_days = config.change_file_expiration_days * EXPIRY_WARNING_SHARE
        for table in tables:
            minutes = self.freshness_minutes[table.name]
            construct_name = "".join(p.title() for p in table.lake_table_name.split("_"))
            self.lag[table.name] = _age_alarm(
                self,
                f"Lag{construct_name}",
                description=(
                    f"{table.name}: the lake lags its source by more than {minutes} min, or no lag "
                    f"was reported in {minutes} min."
                ),
                metric=lake_metric(
                    metrics.LAG,
                    environment=environment,
                    table=table.name,
                    statistic="Maximum",
                    period=cdk.Duration.minutes(minutes),
                ),
                seconds=minutes * 60,
                missing=cloudwatch.TreatMissingData.BREACHING,
            )
            self.expiring[table.name] = _age_alarm(
                self,
                f"ChangeFilesExpiring{construct_name}",
                description=(
                    f"{table.name}: a change file has waited unapplied for more than "
                    f"{expiry_days:g} days; the bucket deletes change files after "
                    f"{config.change_file_expiration_days} days, applied or not."
                ),
                metric=lake_metric(
                    metrics.LAG,
                    environment=environment,
                    table=table.name,
                    statistic="Maximum",
                    period=EXPIRY_PERIOD,
                ),
                seconds=int(expiry_days * 86400),
                missing=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            self.quarantined[table.name] = cloudwatch.Alarm(
                self,
                f"Quarantined{construct_name}",
                alarm_description=(
                    f"{table.name}: a merge run quarantined change lines it could not apply. "
                    "See docs/operations.md#metrics-alarms-and-the-dashboard"
                ),
                metric=lake_metric(
                    metrics.QUARANTINED,
                    environment=environment,
                    table=table.name,
                    statistic="Sum",
                    period=QUARANTINE_PERIOD,
                ),
                threshold=0,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        self.dispatcher_errors = cloudwatch.Alarm(
            self,
            "DispatcherErrors",
            alarm_description=(
                "The merge dispatcher failed a turn in the last hour: a table it could not read, "
                "a start Glue refused, or lag it could not publish. Its log names the job. See "
                "docs/operations.md#metrics-alarms-and-the-dashboard"
            ),
            metric=dispatcher.metric_errors(statistic="Sum", period=DISPATCHER_ERROR_PERIOD),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.heartbeat = self._heartbeat(environment) if self.freshness_minutes else None
        heartbeat = [self.heartbeat] if self.heartbeat is not None else []
        for alarm in (
            *self.lag.values(),
            *self.expiring.values(),
            *self.quarantined.values(),
            self.dispatcher_errors,
            *heartbeat,
        ):
            alarm.add_alarm_action(cw_actions.SnsAction(topic))
            alarm.add_ok_action(cw_actions.SnsAction(topic))

    def _heartbeat(self, environment: str) -> cloudwatch.Alarm:
        """The capture's newest heartbeat older than the strictest objective of its tables."""
        minutes = min(self.freshness_minutes.values())
        return _age_alarm(
            self,
            "CaptureHeartbeat",
            description=(
                f"The lake capture delivered no heartbeat change file in {minutes} min (the "
                "smallest freshness objective of its tables): its Debezium source or S3 sink is "
                "stopped or failing, or the dispatcher reported no heartbeat age."
            ),
            metric=lake_metric(
                metrics.HEARTBEAT_AGE,
                environment=environment,
                table=None,
                statistic="Maximum",
                period=cdk.Duration.minutes(minutes),
            ),
            seconds=minutes * 60,
            missing=cloudwatch.TreatMissingData.BREACHING,
        )


def _age_alarm(
    scope: Construct,
    construct_id: str,
    *,
    description: str,
    metric: cloudwatch.Metric,
    seconds: int,
    missing: cloudwatch.TreatMissingData,
) -> cloudwatch.Alarm:
    """An age metric (seconds) above ``seconds`` in one period of ``metric``."""
    return cloudwatch.Alarm(
        scope,
        construct_id,
        alarm_description=f"{description} See docs/operations.md#metrics-alarms-and-the-dashboard",
        metric=metric,
        threshold=seconds,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=missing,
    )
