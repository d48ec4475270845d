"""Consumers of the change bus: per consumer a rule, an SQS queue and optionally an HTTP endpoint.

Each queue has its own dead-letter queue (redrive after 5 receives) and a visibility timeout of
six times the consumer's timeout. Each rule target retries with a bounded age and sends what it
cannot deliver to a per-consumer delivery DLQ. HTTP endpoints go through an API destination
whose Connection reads its credentials from Secrets Manager (a dynamic reference, never a
literal): ``api_key`` secrets hold ``{"api_key": ...}``, OAuth client credentials
``{"client_id": ..., "client_secret": ...}``.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cdclake.config import ConsumerConfig, FanOutConfig, HttpTarget, TableConfig
from stacks.components.fanout_function import queue_depth_alarm
from stacks.components.nag import acknowledge

API_KEY_HEADER = "x-api-key"
MAX_RECEIVES = 5
# A standard queue's message keeps its original enqueue time when it is dead-lettered, so a DLQ
# must keep messages longer than its source (AWS: "Setting-up dead-letter queue retention").
# Dead-letter queues keep the SQS maximum; consumer queues the SQS default, watched by an
# age alarm so a stalled consumer pages days before anything expires.
DEAD_LETTER_RETENTION = cdk.Duration.days(14)
QUEUE_RETENTION = cdk.Duration.days(4)
OLDEST_MESSAGE_ALARM = cdk.Duration.days(1)
TARGET_RETRIES = 8
TARGET_MAX_AGE = cdk.Duration.hours(6)


def event_pattern(tables: Sequence[TableConfig], consumer: ConsumerConfig) -> events.EventPattern:
    """The consumer's tables (by Source and DetailType) and operations."""
    chosen = [t for t in tables if t.name in consumer.tables]
    return events.EventPattern(
        source=sorted({t.event_source for t in chosen}),
        detail_type=sorted({t.event_detail_type for t in chosen}),
        detail={"op": list(consumer.ops)},
    )


def _pascal(name: str) -> str:
    return "".join(part.title() for part in name.split("_"))


class EventConsumer(Construct):
    """One consumer: rule -> SQS (+ HTTP), with DLQs and alarms."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        consumer: ConsumerConfig,
        tables: Sequence[TableConfig],
        bus: events.IEventBus,
        encryption_key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)

        def queue(queue_id: str, retention: cdk.Duration, **kwargs: object) -> sqs.Queue:
            return sqs.Queue(
                self,
                queue_id,
                encryption=sqs.QueueEncryption.KMS,
                encryption_master_key=encryption_key,
                enforce_ssl=True,
                retention_period=retention,
                **kwargs,  # type: ignore[arg-type]
            )

        # The consumer's queue and its dead-letter queue.
        self.dead_letter_queue = queue("DeadLetters", DEAD_LETTER_RETENTION)
        self.queue = queue(
            "Queue",
            QUEUE_RETENTION,
            visibility_timeout=cdk.Duration.seconds(6 * consumer.consumer_timeout_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVES
            ),
        )
        # What EventBridge could not deliver to this consumer's targets.
        self.delivery_dead_letter_queue = queue("DeliveryDeadLetters", DEAD_LETTER_RETENTION)

        self.rule = events.Rule(
            self,
            "Rule",
            event_bus=bus,
            description=f"{consumer.name}: {', '.join(consumer.tables)} ({''.join(consumer.ops)})",
            event_pattern=event_pattern(tables, consumer),
        )
        self.rule.add_target(
            targets.SqsQueue(
                self.queue,
                dead_letter_queue=self.delivery_dead_letter_queue,
                retry_attempts=TARGET_RETRIES,
                max_event_age=TARGET_MAX_AGE,
            )
        )
        if consumer.http is not None:
            self.api_destination = self._http(consumer.name, consumer.http)
            self.rule.add_target(
                targets.ApiDestination(
                    self.api_destination,
                    dead_letter_queue=self.delivery_dead_letter_queue,
                    retry_attempts=TARGET_RETRIES,
                    max_event_age=TARGET_MAX_AGE,
                )
            )

        self.alarms = [
            queue_depth_alarm(self, "DeadLettersAlarm", self.dead_letter_queue),
            queue_depth_alarm(self, "DeliveryDeadLettersAlarm", self.delivery_dead_letter_queue),
            cloudwatch.Alarm(
                self,
                "OldestMessageAlarm",
                alarm_description=(
                    f"{consumer.name} is not consuming: messages expire after "
                    f"{QUEUE_RETENTION.to_days()} days"
                ),
                metric=self.queue.metric_approximate_age_of_oldest_message(
                    period=cdk.Duration.minutes(5), statistic="Maximum"
                ),
                threshold=OLDEST_MESSAGE_ALARM.to_seconds(),
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
        ]
        for dlq in (self.dead_letter_queue, self.delivery_dead_letter_queue):
            acknowledge(dlq, {"AwsSolutions-SQS3": "this queue is a dead-letter queue"})

    def _http(self, name: str, http: HttpTarget) -> events.ApiDestination:
        """Connection (credentials by Secrets Manager reference) and the API destination."""
        if http.auth == "api_key":
            authorization = events.Authorization.api_key(
                API_KEY_HEADER,
                cdk.SecretValue.secrets_manager(http.secret_arn, json_field="api_key"),
            )
        else:
            assert http.oauth_token_url is not None  # the config model requires it for OAuth
            authorization = events.Authorization.oauth(
                authorization_endpoint=http.oauth_token_url,
                http_method=events.HttpMethod.POST,
                client_id=cdk.SecretValue.secrets_manager(
                    http.secret_arn, json_field="client_id"
                ).unsafe_unwrap(),
                client_secret=cdk.SecretValue.secrets_manager(
                    http.secret_arn, json_field="client_secret"
                ),
            )
        connection = events.Connection(
            self, "Connection", authorization=authorization, description=f"{name} endpoint"
        )
        return events.ApiDestination(
            self,
            "ApiDestination",
            connection=connection,
            endpoint=http.endpoint,
            http_method=events.HttpMethod[http.method],
            rate_limit_per_second=http.rate_per_second,
            description=f"{name} endpoint",
        )


class EventConsumers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fanout: FanOutConfig,
        tables: Sequence[TableConfig],
        bus: events.IEventBus,
        encryption_key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.consumers = {
            consumer.name: EventConsumer(
                self,
                _pascal(consumer.name),
                consumer=consumer,
                tables=tables,
                bus=bus,
                encryption_key=encryption_key,
            )
            for consumer in fanout.consumers
        }
