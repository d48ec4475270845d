"""Capture: MSK and MSK Connect (Debezium source, S3 sink) writing change files to the lake."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from connectors.configs import (
    MSK_CONNECT_RDS_CA,
    TOPICS_DIR,
    broker_count,
    connector_name,
    debezium_source_config,
    heartbeat_topic,
    replication_factor,
    s3_import_reference,
    s3_sink_config,
    worker_properties,
)
from environment.artifacts import rds_ca_bundle
from environment.config import EnvironmentConfig
from environment.replication import master_endpoint
from stacks.components.database_access import allow_database_from, database_endpoint
from stacks.components.kafka_cluster import KafkaCluster
from stacks.components.kafka_connectors import KafkaConnectors
from stacks.components.nag import acknowledge_wildcards
from stacks.database_stack import DatabaseStack
from stacks.lake_stack import LakeStack

# MSK Connect's own topics and groups (configs, status, default offsets, the worker group):
# AWS pages name both prefixes, so both are granted.
MSK_CONNECT_INTERNAL = ["__amazon_msk_connect_*", "__msk_connect_*"]


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

        # The RDS CA bundle: MSK Connect puts no file of ours on a worker, so the source names
        # the asset through the s3import provider, which copies it there at connector start.
        # Without a bundle (``database.tls_verify: false``) the source sets no sslrootcert.
        bundle = rds_ca_bundle(config)
        self.rds_ca_asset = (
            s3_assets.Asset(self, "RdsCaBundle", path=str(bundle)) if bundle is not None else None
        )
        rds_ca = MSK_CONNECT_RDS_CA
        if self.rds_ca_asset is not None:
            rds_ca = s3_import_reference(
                self.region, self.rds_ca_asset.s3_bucket_name, self.rds_ca_asset.s3_object_key
            )

        # The connectors: Debezium into MSK, S3 sink out to the change-file bucket. A context
        # value (`-c debezium_plugin=s3://...`) overrides a plugin location of the config file.
        # The pinned config provider passes the reference's path to GetSecretValue as is, and
        # ':' ends the path: the secret is named, not given by (URL-encoded) ARN.
        change_key = lake.encryption_key
        self.connectors = KafkaConnectors(
            self,
            "Connectors",
            connect=config.connect,
            prefix=config.prefix,
            vpc=vpc,
            bootstrap_brokers=self.kafka.bootstrap_brokers,
            source_name=connector_name(config, "debezium-source"),
            source_config=debezium_source_config(
                config,
                database=database_endpoint(database),
                replication_factor=replication_factor(config),
                secret_id=database.replication_secret.secret_name,
                rds_ca=rds_ca,
            ),
            sink_name=connector_name(config, "s3-sink"),
            sink_config=s3_sink_config(
                config,
                bucket_name=lake.change_bucket.bucket_name,
                kms_key_arn=change_key.key_arn if change_key is not None else None,
            ),
            worker=worker_properties(config, s3_import=self.rds_ca_asset is not None),
            debezium_plugin=self._plugin("debezium_plugin", config.connect.debezium_plugin),
            s3_sink_plugin=self._plugin("s3_sink_plugin", config.connect.s3_sink_plugin),
        )
        self.kafka.allow_clients(self.connectors.security_group, "MSK Connect workers")
        allow_database_from(database, self.connectors.security_group, "MSK Connect Debezium")
        self._grant_connectors(config, database, lake)

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
                **master_endpoint(config),
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

    def _grant_connectors(
        self, config: EnvironmentConfig, database: DatabaseStack, lake: LakeStack
    ) -> None:
        """The connectors' role: this environment's topics and groups, the replication secret,
        writing under the change bucket's topics/ and the RDS CA bundle. Identity policies
        only: Secret.grant_read would edit the database stack's key policy and make that stack
        depend on this one."""
        role = self.connectors.role
        self.kafka.grant_connect(
            role,
            topics=[f"{config.prefix}.*", heartbeat_topic(config), *MSK_CONNECT_INTERNAL],
            groups=[*MSK_CONNECT_INTERNAL, f"connect-{config.prefix}-*"],
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                resources=[database.replication_secret.secret_arn],
            )
        )
        if database.encryption_key is not None:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt"], resources=[database.encryption_key.key_arn]
                )
            )
        # The S3 sink writes and lists only under topics/ (explicit actions, no wildcards).
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "s3:PutObject",
                    "s3:GetObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                resources=[lake.change_bucket.arn_for_objects(f"{TOPICS_DIR}/*")],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"],
                resources=[lake.change_bucket.bucket_arn],
            )
        )
        if lake.encryption_key is not None:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt", "kms:GenerateDataKey"],
                    resources=[lake.encryption_key.key_arn],
                )
            )
        acknowledge_wildcards(
            role,
            {
                rf"^Resource::.*/{TOPICS_DIR}/\*$": (
                    "the S3 sink names objects by topic, partition and offset under topics/"
                ),
                r"^Resource::arn:.*:kafka:.*:topic/.*\*$": (
                    "topics are created per table by Kafka Connect; scoped to this "
                    "environment's prefix, its heartbeat topic and MSK Connect's internal topics"
                ),
                r"^Resource::arn:.*:kafka:.*:group/.*\*$": (
                    "consumer groups are named by MSK Connect per connector; scoped to this "
                    "environment's connectors and MSK Connect's internal groups"
                ),
            },
        )
        if self.rds_ca_asset is not None:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject"],
                    resources=[
                        self.rds_ca_asset.bucket.arn_for_objects(self.rds_ca_asset.s3_object_key)
                    ],
                )
            )

    def _plugin(self, key: str, configured: str) -> str:
        override = self.node.try_get_context(key)
        return str(override) if override else configured
