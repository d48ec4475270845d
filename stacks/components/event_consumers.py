"""Consumers of the change bus: per consumer a rule, an SQS queue and optionally an HTTP endpoint.

Each queue has its own dead-letter queue (redrive after 5 receives) and a visibility timeout of
six times the consumer's timeout. Each rule target retries with a bounded age and sends what it
cannot deliver to a per-consumer delivery DLQ. The rule and both dead-letter queues' alarms are
named from config (``consumer_rule_name``, ``dead_letter_alarm_names``): the operations stack's
dashboard uses those names, so it imports nothing a removed consumer would take away. HTTP
endpoints go through an API destination whose Connection reads its credentials from Secrets
Manager (a dynamic reference, never a literal): ``api_key`` secrets hold ``{"api_key": ...}``,
OAuth client credentials ``{"client_id": ..., "client_secret": ...}``.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from environment.config import ConfigError, ConsumerConfig, FanOutConfig, HttpTarget
from environment.tables import TableConfig
from stacks.components.dead_letters import DEAD_LETTER_RETENTION, dead_letter_queue

API_KEY_HEADER = "x-api-key"
MAX_RECEIVES = 5
# Dead-letter queues keep the SQS maximum (see dead_letters); consumer queues the SQS default,
# watched by an age alarm so a stalled consumer pages days before anything expires.
QUEUE_RETENTION = cdk.Duration.days(4)
OLDEST_MESSAGE_ALARM = cdk.Duration.days(1)
TARGET_RETRIES = 8
TARGET_MAX_AGE = cdk.Duration.hours(6)
RULE_NAME_MAX = 64  # EventBridge


def consumer_rule_name(prefix: str, consumer: str) -> str:
    """``<prefix>-<consumer>``: the consumer's rule on the change bus."""
    return _checked(f"{prefix}-{consumer}", RULE_NAME_MAX, "EventBridge rule", consumer)


def dead_letter_alarm_names(prefix: str, consumer: str) -> dict[str, str]:
    """The alarms of the consumer's dead-letter queues by role: ``dead letters`` (the consumer
    gave up on them) and ``undelivered`` (EventBridge could not deliver them), named like the
    queues of the local stack (``cdclake.local.fanout.consumer_names``). The queues themselves
    are named by CloudFormation: they are retained in prod, and a fixed name would collide."""
    return {
        "dead letters": f"{prefix}-{consumer}-dlq",
        "undelivered": f"{prefix}-{consumer}-delivery-dlq",
    }


def _checked(name: str, limit: int, kind: str, consumer: str) -> str:
    if len(name) > limit:
        raise ConfigError(
            f"fanout.consumers ({consumer}): {kind} name {name!r} is longer than {limit} "
            "characters; shorten the consumer name or the prefix"
        )
    return name


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
        prefix: str,
        retain: bool,
    ) -> None:
        """``retain``: keep the queue and its dead-letter queues when the stack or the consumer
        goes."""
        super().__init__(scope, construct_id)
        names = dead_letter_alarm_names(prefix, consumer.name)

        # The consumer's queue and its dead-letter queue.
        dead_letters = dead_letter_queue(
            self,
            "DeadLetters",
            retain=retain,
            what=f"{consumer.name} gave up on these changes",
            encryption_key=encryption_key,
            retention=DEAD_LETTER_RETENTION,
            alarm_name=names["dead letters"],
        )
        self.dead_letter_queue = dead_letters.queue
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=encryption_key,
            enforce_ssl=True,
            retention_period=QUEUE_RETENTION,
            visibility_timeout=cdk.Duration.seconds(6 * consumer.consumer_timeout_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVES
            ),
            # Changes the consumer has not read yet are data like its dead letters.
            removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
        )
        # What EventBridge could not deliver to this consumer's targets.
        undelivered = dead_letter_queue(
            self,
            "DeliveryDeadLetters",
            retain=retain,
            what=f"changes EventBridge could not deliver to {consumer.name}",
            encryption_key=encryption_key,
            retention=DEAD_LETTER_RETENTION,
            alarm_name=names["undelivered"],
        )
        self.delivery_dead_letter_queue = undelivered.queue

        self.rule = events.Rule(
            self,
            "Rule",
            rule_name=consumer_rule_name(prefix, consumer.name),
            event_bus=bus,
            description=f"{consumer.name}: {', '.join(consumer.tables)} ({''.join(consumer.ops)})",
            event_pattern=event_pattern(tables, consumer),
        )
        # CDK's SQS target grants EventBridge the queue's key with no condition at all. It gets
        # the queue as a plain reference instead; EventBridge may send to it for this rule only,
        # and use the key for this account only (the fan-out stack's key statement).
        self.queue.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"],
                resources=[self.queue.queue_arn],
                conditions={"ArnEquals": {"aws:SourceArn": self.rule.rule_arn}},
            )
        )
        self.rule.add_target(
            targets.SqsQueue(
                sqs.Queue.from_queue_attributes(
                    self, "Target", queue_arn=self.queue.queue_arn, queue_url=self.queue.queue_url
                ),
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
            dead_letters.alarm,
            undelivered.alarm,
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
        prefix: str,
        retain: bool,
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
                prefix=prefix,
                retain=retain,
            )
            for consumer in fanout.consumers
        }
