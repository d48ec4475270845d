"""The fan-out Lambda: Kinesis change streams in, EventBridge events out.

Code is the plain folder ``lambdas/fanout`` (no bundling, so synth needs neither Docker nor
pip); Powertools comes from AWS's public Powertools for AWS Lambda (Python) V3 layer, pinned by
version for the region, and boto3 from the runtime.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from constructs import Construct

from environment.config import FanOutConfig
from environment.fanout_settings import (
    FAILED_RECORDS_RETENTION_DAYS,
    MAPPING,
    PUT_EVENTS_BACKOFF_SECONDS,
    PUT_EVENTS_MAX_ATTEMPTS,
)
from environment.names import resource_name
from environment.retention import claim_check_days
from environment.tables import TableConfig
from stacks.components.dead_letters import dead_letter_queue
from stacks.components.log_storage import access_log_bucket, log_group
from stacks.components.nag import KMS_GRANT_REASON, acknowledge_wildcards
from stacks.components.powertools_function import powertools_function

TIMEOUT = cdk.Duration.seconds(60)


def function_name(prefix: str) -> str:
    """The fan-out function's name: fixed, so the operations stack draws it without an
    import that turning the fan-out off would have to remove while in use."""
    return resource_name(prefix, "fanout")


def failed_records_alarm_name(prefix: str) -> str:
    """The failed-records queue's alarm, named for the same reader: the queue itself is named
    by CloudFormation (a retained queue with a fixed name collides with its next deploy)."""
    return resource_name(prefix, "fanout-failed-records")


def routes(tables: Sequence[TableConfig]) -> dict[str, dict[str, object]]:
    """The ``ROUTES`` environment variable: Source/DetailType/primary key per fan-out table."""
    return {
        table.name: {
            "source": table.event_source,
            "detail_type": table.event_detail_type,
            "primary_key": list(table.primary_key),
        }
        for table in tables
    }


class FanOut(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fanout: FanOutConfig,
        prefix: str,
        tables: Sequence[TableConfig],
        encryption_key: kms.IKey,
        bus: events.IEventBus,
        streams: Sequence[kinesis.IStream],
        retain: bool,
    ) -> None:
        """``retain``: keep the failed-records queue when the stack is deleted. Putting events
        on ``bus`` and using ``encryption_key`` for them are the composing stack's grants to
        :attr:`function`; reading ``streams`` comes with their event source mappings, which
        CDK's ``KinesisEventSource`` grants as it binds them."""
        super().__init__(scope, construct_id)

        access_logs = access_log_bucket(self, "AccessLogs", expiration=cdk.Duration.days(90))

        # Claim checks: full events too large for EventBridge, kept as long as the archive.
        self.claim_check_bucket = s3.Bucket(
            self,
            "ClaimChecks",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=encryption_key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="claim-checks/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    expiration=cdk.Duration.days(claim_check_days(fanout.archive_retention_days))
                )
            ],
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )

        # Records that still fail after the retries land here with their shard position.
        failed_records = dead_letter_queue(
            self,
            "FailedRecords",
            retain=retain,
            what="change records the fan-out Lambda gave up on",
            encryption_key=encryption_key,
            retention=cdk.Duration.days(FAILED_RECORDS_RETENTION_DAYS),
            alarm_name=failed_records_alarm_name(prefix),
        )
        self.failure_queue = failed_records.queue
        self.failure_alarm = failed_records.alarm

        self.log_group = log_group(self, "Logs")
        self.function = powertools_function(
            self,
            package="fanout",
            function_name=function_name(prefix),
            description="Debezium change events from Kinesis to the EventBridge bus",
            service="fanout",
            memory_size=512,
            timeout=TIMEOUT,
            log_group=self.log_group,
            environment={
                "EVENT_BUS_NAME": bus.event_bus_name,
                "ROUTES": json.dumps(routes(tables), separators=(",", ":"), sort_keys=True),
                "CLAIM_CHECK_BUCKET": self.claim_check_bucket.bucket_name,
                "CLAIM_CHECK_THRESHOLD_BYTES": str(fanout.claim_check_threshold_bytes),
                "PUT_EVENTS_MAX_ATTEMPTS": str(PUT_EVENTS_MAX_ATTEMPTS),
                "PUT_EVENTS_BACKOFF_SECONDS": str(PUT_EVENTS_BACKOFF_SECONDS),
                "POWERTOOLS_LOG_LEVEL": "INFO",
            },
        )
        self.claim_check_bucket.grant_put(self.function, "claim-check/*")

        # One mapping per stream: bisect poison batches, bounded retries and age, then the queue.
        for stream in streams:
            self.function.add_event_source(
                sources.KinesisEventSource(
                    stream,
                    starting_position=lambda_.StartingPosition[MAPPING.starting_position],
                    batch_size=MAPPING.batch_size,
                    max_batching_window=cdk.Duration.millis(
                        round(MAPPING.batching_window_s * 1000)
                    ),
                    bisect_batch_on_error=MAPPING.bisect_on_error,
                    retry_attempts=MAPPING.retry_attempts,
                    max_record_age=cdk.Duration.seconds(MAPPING.max_record_age_s),
                    report_batch_item_failures=MAPPING.report_batch_item_failures,
                    parallelization_factor=1,
                    on_failure=sources.SqsDlq(self.failure_queue),
                )
            )

        # Page when records wait: the oldest unprocessed record is older than the threshold.
        self.iterator_age_alarm = cloudwatch.Alarm(
            self,
            "IteratorAgeAlarm",
            alarm_description="fan-out is falling behind its Kinesis streams",
            metric=self.function.metric(
                "IteratorAge", statistic="Maximum", period=cdk.Duration.minutes(1)
            ),
            threshold=fanout.iterator_age_alarm_ms,
            evaluation_periods=5,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        assert self.function.role is not None  # the function creates its own role
        acknowledge_wildcards(
            self.function.role,
            {
                r"^Action::kms:(GenerateDataKey|ReEncrypt)\*$": KMS_GRANT_REASON,
                r"^Action::s3:Abort\*$": "CDK's put grant lets the function abort its own uploads",
                r"^Resource::.*/claim-check/\*$": "claim-check objects are named per record",
            },
        )
