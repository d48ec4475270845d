"""Fan-out: Debezium Server to Kinesis, Lambda to EventBridge, rules to SQS and HTTP consumers."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from connectors.configs import DEBEZIUM_SERVER_RDS_CA, debezium_server_properties, topic_name
from environment.artifacts import rds_ca_bundle
from environment.config import EnvironmentConfig
from stacks.components.change_streams import ChangeStreams
from stacks.components.database_access import allow_database_from, database_endpoint
from stacks.components.debezium_server import OFFSETS_FILE, DebeziumServer
from stacks.components.event_bus import ChangeEventBus
from stacks.components.event_consumers import EventConsumers
from stacks.components.fanout_function import FanOut
from stacks.database_stack import DatabaseStack


class FanOutStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        vpc: ec2.IVpc,
        database: DatabaseStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config

        # One customer-managed key for this stack's data at rest: streams, bus, queues, files.
        self.encryption_key = kms.Key(
            self,
            "Key",
            description=f"{config.prefix} fan-out data",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        # SQS, Kinesis and EFS use the key with their caller's permissions (the roles' grants):
        # only EventBridge acts on its own, delivering to the encrypted consumer queues and
        # their dead-letter queues, and only for this account (confused deputy).
        self.encryption_key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeDeliversToEncryptedQueues",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            )
        )
        # Where the environment keeps its data, failed records and dead letters outlive the stack.
        retain = config.database.deletion_protection
        if not config.fanout_tables:
            # The fan-out turned off keeps its key alone: prod's retained queues stay readable
            # under it, turning the fan-out back on finds it, and the stack keeps a resource
            # (CloudFormation refuses a template without one). A Debezium Server with nothing
            # to capture would hold a slot open for no table.
            return
        self._build(config, vpc=vpc, database=database, retain=retain)

    def _build(
        self, config: EnvironmentConfig, *, vpc: ec2.IVpc, database: DatabaseStack, retain: bool
    ) -> None:
        # Kinesis: one stream per fan-out table.
        self.change_streams = ChangeStreams(
            self,
            "Streams",
            config=config.kinesis,
            prefix=config.prefix,
            tables=config.fanout_tables,
            encryption_key=self.encryption_key,
        )
        self.kinesis_streams = self.change_streams.streams
        streams = list(self.kinesis_streams.values())

        # Debezium Server: the fan-out tables into those streams, from its own slot.
        self.debezium_server = DebeziumServer(
            self,
            "DebeziumServer",
            server=config.debezium_server,
            prefix=config.prefix,
            properties=debezium_server_properties(
                config,
                database=database_endpoint(database),
                offsets_file=OFFSETS_FILE,
                rds_ca=DEBEZIUM_SERVER_RDS_CA,
            ),
            stream_names={
                topic_name(config, config.table(name)): stream.stream_name
                for name, stream in self.kinesis_streams.items()
            },
            vpc=vpc,
            encryption_key=self.encryption_key,
            database_secret_arn=database.replication_secret.secret_arn,
            rds_ca_bundle=rds_ca_bundle(config),
        )
        allow_database_from(database, self.debezium_server.security_group, "Debezium Server")
        # Identity policies by ARN: no edits to the database stack's key policy (no cycle).
        if database.encryption_key is not None:
            self.debezium_server.task_definition.obtain_execution_role().add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt"], resources=[database.encryption_key.key_arn]
                )
            )
        # Exactly what the Kinesis sink does (tests/iam records it): one PutRecord per change,
        # for which Kinesis asks the stream's key for a data key. CDK's grant_write would add
        # PutRecords, ListShards, kms:Encrypt and kms:ReEncrypt*, none of which it uses.
        server_role = self.debezium_server.task_definition.task_role
        server_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PutChanges",
                actions=["kinesis:PutRecord"],
                resources=[stream.stream_arn for stream in streams],
            )
        )
        keys = {id(s.encryption_key): s.encryption_key for s in streams}
        server_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EncryptChanges",
                actions=["kms:GenerateDataKey"],
                resources=[key.key_arn for key in keys.values() if key is not None],
            )
        )

        # The bus and its archive.
        self.change_bus = ChangeEventBus(
            self,
            "Bus",
            name=config.resource_name("changes"),
            fanout=config.fanout,
            tables=config.fanout_tables,
            encryption_key=self.encryption_key,
            retain=retain,
        )
        self.event_bus = self.change_bus.bus

        self.fanout = FanOut(
            self,
            "FanOut",
            fanout=config.fanout,
            prefix=config.prefix,
            tables=config.fanout_tables,
            encryption_key=self.encryption_key,
            bus=self.event_bus,
            streams=streams,
            retain=retain,
        )
        self.fanout_function = self.fanout.function
        self.event_bus.grant_put_events_to(self.fanout_function)
        self.encryption_key.grant_encrypt_decrypt(self.fanout_function)

        # Consumers: rules into SQS (and HTTP endpoints).
        self.event_consumers = EventConsumers(
            self,
            "Consumers",
            fanout=config.fanout,
            tables=config.fanout_tables,
            bus=self.event_bus,
            encryption_key=self.encryption_key,
            prefix=config.prefix,
            retain=retain,
        )

        # What the fan-out or the bus gave up on, and where it or a consumer falls behind, pages
        # on the environment's one alarm topic: a stalled consumer must page before its
        # messages expire.
        page = cw_actions.SnsAction(database.alarm_topic)
        for alarm in (
            self.fanout.failure_alarm,
            self.fanout.iterator_age_alarm,
            self.change_bus.dead_letters.alarm,
            *(a for c in self.event_consumers.consumers.values() for a in c.alarms),
        ):
            alarm.add_alarm_action(page)
