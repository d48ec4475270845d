"""Capture: MSK and MSK Connect (Debezium source, S3 sink) writing change files to the lake."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdclake.config import EnvironmentConfig, rds_ca_bundle
from connectors.configs import broker_count, replication_factor
from stacks.components.database_access import allow_database_from, database_endpoint
from stacks.components.kafka_cluster import KafkaCluster
from stacks.components.kafka_connectors import KafkaConnectors
from stacks.database_stack import DatabaseStack
from stacks.lake_stack import LakeStack


class CaptureStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        vpc: ec2.IVpc,
        database: DatabaseStack,
        lake: LakeStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config

        self.kafka = KafkaCluster(
            self,
            "Kafka",
            msk_config=config.msk,
            cluster_name=config.resource_name("msk"),
            brokers=broker_count(config),
            replication_factor=replication_factor(config),
            vpc=vpc,
        )
        self.msk_cluster = self.kafka.cluster

        # The connectors: Debezium into MSK, S3 sink out to the change-file bucket. A context
        # value (`-c debezium_plugin=s3://...`) overrides a plugin location of the config file.
        self.connectors = KafkaConnectors(
            self,
            "Connectors",
            config=config,
            vpc=vpc,
            kafka=self.kafka,
            database=database_endpoint(database),
            database_secret=database.replication_secret,
            database_key=database.encryption_key,
            change_bucket=lake.change_bucket,
            change_bucket_key=lake.encryption_key,
            debezium_plugin=self._plugin("debezium_plugin", config.connect.debezium_plugin),
            s3_sink_plugin=self._plugin("s3_sink_plugin", config.connect.s3_sink_plugin),
            rds_ca_bundle=rds_ca_bundle(config),
        )
        allow_database_from(database, self.connectors.security_group, "MSK Connect Debezium")

        # After the connectors: a deploy that adds lake tables restarts Debezium with them in
        # its include list first, then this asks it to snapshot their existing rows.
        replication = config.database.replication
        self.snapshot_signal = cdk.CustomResource(
            self,
            "SnapshotSignal",
            service_token=database.bootstrap.provider.service_token,
            resource_type="Custom::SnapshotSignal",
            properties={
                "Tables": json.dumps([t.name for t in config.lake_tables]),
                "Database": config.database.name,
                "MasterSecretArn": database.master_secret.secret_arn,
                "Publication": replication.publication,
                "SignalTable": replication.signal_table,
            },
        )
        for connector in self.connectors.connectors:
            self.snapshot_signal.node.add_dependency(connector)
        self.kafka.acknowledge_custom_resource()

        # What the connectors connect with, whether they are deployed or not: an upgrade that
        # removes them for a deploy (connect.connectors_deployed: false) must not take away
        # the database and lake stacks' exports of these, which CloudFormation refuses while
        # the previous template still imports them.
        cdk.CfnOutput(self, "ReplicationSecretName", value=database.replication_secret.secret_name)
        cdk.CfnOutput(self, "ChangeBucketName", value=lake.change_bucket.bucket_name)

    def _plugin(self, key: str, configured: str) -> str:
        override = self.node.try_get_context(key)
        return str(override) if override else configured
