"""MSK Connect: the Debezium PostgreSQL source and the S3 sink, with their plugins and worker.

Plugins are located by ``connect.debezium_plugin`` / ``connect.s3_sink_plugin`` (the capture
stack lets a CDK context value of the same name override them): an ``s3://bucket/key`` is
referenced as is, a local path is uploaded as an asset and must exist. The defaults are the zips
``make plugins`` builds into ``connectors/dist``, so a deploy after it needs no config edit; a
missing zip or a placeholder bucket fails synth with one line naming ``make plugins``. Both
connectors share one worker configuration whose offsets live in a named, compacted topic, so a
replaced source connector resumes from its last LSN instead of re-snapshotting.

CloudFormation replaces a plugin, a worker configuration or a connector whose plugin or worker
configuration changed, and cannot replace a resource that keeps its name. Plugins and the worker
configuration are therefore named by their content (version and a digest), so each upgrade is a
new resource. Connectors keep fixed names, because Kafka Connect keys source offsets by connector
name: an upgrade removes them in one deploy (``connect.connectors_deployed: false``) and creates
them again, with the new plugin, in the next; docs/connectors.md has the walkthrough.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kafkaconnect as kafkaconnect
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from cdclake.config import EnvironmentConfig, plugin_source
from connectors import versions
from connectors.configs import (
    MSK_CONNECT_RDS_CA,
    TOPICS_DIR,
    DatabaseEndpoint,
    connector_name,
    debezium_source_config,
    heartbeat_topic,
    render_properties,
    replication_factor,
    s3_import_reference,
    s3_sink_config,
    worker_properties,
)
from stacks.components.kafka_cluster import KafkaCluster
from stacks.components.log_storage import log_group
from stacks.components.nag import acknowledge_wildcards

# MSK Connect's own topics and groups (configs, status, default offsets, the worker group):
# AWS pages name both prefixes, so both are granted.
MSK_CONNECT_INTERNAL = ["__amazon_msk_connect_*", "__msk_connect_*"]


@dataclass(frozen=True)
class PluginLocation:
    bucket_name: str
    key: str
    bucket_arn: str
    #: What identifies the zip's content at synth time (the location, or the asset's hash).
    content_id: str


def plugin_location(
    scope: Construct, construct_id: str, location: str, *, setting: str = "plugin"
) -> PluginLocation:
    """Resolve ``s3://bucket/key`` or a local zip (uploaded as an asset) to bucket and key.

    ``setting`` names where the location came from in the one-line error.
    """
    source = plugin_source(location, setting=setting)
    if isinstance(source, tuple):
        bucket, key = source
        return PluginLocation(bucket, key, f"arn:{cdk.Aws.PARTITION}:s3:::{bucket}", location)
    asset = s3_assets.Asset(scope, construct_id, path=str(source))
    return PluginLocation(
        asset.s3_bucket_name, asset.s3_object_key, asset.bucket.bucket_arn, asset.asset_hash
    )


class KafkaConnectors(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        vpc: ec2.IVpc,
        kafka: KafkaCluster,
        database: DatabaseEndpoint,
        database_secret: secretsmanager.ISecret,
        database_key: kms.IKey | None,
        change_bucket: s3.IBucket,
        change_bucket_key: kms.IKey | None,
        debezium_plugin: str,
        s3_sink_plugin: str,
        rds_ca_bundle: Path | None,
    ) -> None:
        """``rds_ca_bundle``: the RDS CA bundle the source verifies Aurora with (uploaded as an
        asset the workers fetch); None when ``database.tls_verify`` is false."""
        super().__init__(scope, construct_id)

        # Workers run in the private subnets and reach brokers, the database and AWS APIs.
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"{config.prefix} MSK Connect workers",
            allow_all_outbound=True,
        )
        kafka.allow_clients(self.security_group, "MSK Connect workers")

        # One role for both connectors: Kafka topics/groups, the secret, the change bucket.
        # Only MSK Connect acting for this account's connectors may assume it (confused deputy).
        stack = cdk.Stack.of(self)
        self.role = iam.Role(
            self,
            "ServiceExecutionRole",
            assumed_by=iam.ServicePrincipal(
                "kafkaconnect.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": (
                            f"arn:{stack.partition}:kafkaconnect:{stack.region}:"
                            f"{stack.account}:connector/*"
                        )
                    },
                },
            ),
            description=f"{config.prefix} MSK Connect connectors",
        )
        kafka.grant_connect(
            self.role,
            topics=[f"{config.prefix}.*", heartbeat_topic(config), *MSK_CONNECT_INTERNAL],
            groups=[*MSK_CONNECT_INTERNAL, f"connect-{config.prefix}-*"],
        )
        # Identity policies only: Secret.grant_read would edit the database stack's key policy
        # and make that stack depend on this one.
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                resources=[database_secret.secret_arn],
            )
        )
        if database_key is not None:
            self.role.add_to_policy(
                iam.PolicyStatement(actions=["kms:Decrypt"], resources=[database_key.key_arn])
            )
        # The S3 sink writes and lists only under topics/ (explicit actions, no wildcards).
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "s3:PutObject",
                    "s3:GetObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                resources=[change_bucket.arn_for_objects(f"{TOPICS_DIR}/*")],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"],
                resources=[change_bucket.bucket_arn],
            )
        )
        if change_bucket_key is not None:
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt", "kms:GenerateDataKey"],
                    resources=[change_bucket_key.key_arn],
                )
            )
        acknowledge_wildcards(
            self.role,
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

        self.log_group = log_group(self, "Logs")

        # Custom plugins: from S3 as given, or uploaded from a local zip (`make plugins`).
        self.debezium_plugin = self._plugin(
            "DebeziumPlugin",
            debezium_plugin,
            setting="connect.debezium_plugin",
            name_prefix=config.resource_name("debezium-postgres", _slug(versions.DEBEZIUM_VERSION)),
        )
        self.s3_sink_plugin = self._plugin(
            "S3SinkPlugin",
            s3_sink_plugin,
            setting="connect.s3_sink_plugin",
            name_prefix=config.resource_name("s3-sink", _slug(versions.CONFLUENT_S3_SINK_VERSION)),
        )

        # The RDS CA bundle: MSK Connect puts no file of ours on a worker, so the source names
        # the asset through the s3import provider, which copies it there at connector start.
        # Without a bundle (``database.tls_verify: false``) the source sets no sslrootcert.
        rds_ca = MSK_CONNECT_RDS_CA
        if rds_ca_bundle is not None:
            self.rds_ca_asset = s3_assets.Asset(self, "RdsCaBundle", path=str(rds_ca_bundle))
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject"],
                    resources=[
                        self.rds_ca_asset.bucket.arn_for_objects(self.rds_ca_asset.s3_object_key)
                    ],
                )
            )
            rds_ca = s3_import_reference(
                stack.region, self.rds_ca_asset.s3_bucket_name, self.rds_ca_asset.s3_object_key
            )

        # Worker configuration: offsets in a named compacted topic, the config providers.
        worker = render_properties(worker_properties(config, s3_import=rds_ca_bundle is not None))
        self.worker_configuration = kafkaconnect.CfnWorkerConfiguration(
            self,
            "WorkerConfiguration",
            name=config.resource_name("connect-worker", digest(worker)),
            properties_file_content=base64.b64encode(worker.encode()).decode(),
            description="Named offsets topic and the Secrets Manager config provider",
        )

        # The pinned config provider passes the reference's path to GetSecretValue as is, and
        # ':' ends the path: the secret is named, not given by (URL-encoded) ARN.
        secret_id = database_secret.secret_name
        source = debezium_source_config(
            config,
            database=database,
            replication_factor=replication_factor(config),
            secret_id=secret_id,
            rds_ca=rds_ca,
        )
        sink = s3_sink_config(
            config,
            bucket_name=change_bucket.bucket_name,
            kms_key_arn=change_bucket_key.key_arn if change_bucket_key is not None else None,
        )

        subnets = vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        common = {
            "kafka_cluster": kafkaconnect.CfnConnector.KafkaClusterProperty(
                apache_kafka_cluster=kafkaconnect.CfnConnector.ApacheKafkaClusterProperty(
                    bootstrap_servers=kafka.bootstrap_brokers,
                    vpc=kafkaconnect.CfnConnector.VpcProperty(
                        security_groups=[self.security_group.security_group_id],
                        subnets=subnets.subnet_ids,
                    ),
                )
            ),
            "kafka_cluster_client_authentication": (
                kafkaconnect.CfnConnector.KafkaClusterClientAuthenticationProperty(
                    authentication_type="IAM"
                )
            ),
            "kafka_cluster_encryption_in_transit": (
                kafkaconnect.CfnConnector.KafkaClusterEncryptionInTransitProperty(
                    encryption_type="TLS"
                )
            ),
            "kafka_connect_version": versions.KAFKA_CONNECT_VERSION,
            "service_execution_role_arn": self.role.role_arn,
            "worker_configuration": kafkaconnect.CfnConnector.WorkerConfigurationProperty(
                worker_configuration_arn=self.worker_configuration.attr_worker_configuration_arn,
                revision=self.worker_configuration.attr_revision,
            ),
            "log_delivery": kafkaconnect.CfnConnector.LogDeliveryProperty(
                worker_log_delivery=kafkaconnect.CfnConnector.WorkerLogDeliveryProperty(
                    cloud_watch_logs=kafkaconnect.CfnConnector.CloudWatchLogsLogDeliveryProperty(
                        enabled=True, log_group=self.log_group.log_group_name
                    )
                )
            ),
        }

        self.connectors: list[kafkaconnect.CfnConnector] = []
        if not config.connect.connectors_deployed:
            return

        # Debezium source: one task (a replication slot has one reader).
        debezium_source = kafkaconnect.CfnConnector(
            self,
            "DebeziumSource",
            connector_name=connector_name(config, "debezium-source"),
            connector_description="Debezium PostgreSQL source: lake tables into MSK topics",
            connector_configuration=source,
            capacity=kafkaconnect.CfnConnector.CapacityProperty(
                provisioned_capacity=kafkaconnect.CfnConnector.ProvisionedCapacityProperty(
                    mcu_count=config.connect.mcu_count, worker_count=1
                )
            ),
            plugins=[self._plugin_ref(self.debezium_plugin)],
            **common,  # type: ignore[arg-type]
        )

        # S3 sink: change files in the layout the merge job reads.
        s3_sink = kafkaconnect.CfnConnector(
            self,
            "S3Sink",
            connector_name=connector_name(config, "s3-sink"),
            connector_description="Confluent S3 sink: MSK topics into change files",
            connector_configuration=sink,
            capacity=kafkaconnect.CfnConnector.CapacityProperty(
                provisioned_capacity=kafkaconnect.CfnConnector.ProvisionedCapacityProperty(
                    mcu_count=config.connect.mcu_count, worker_count=config.connect.workers
                )
            ),
            plugins=[self._plugin_ref(self.s3_sink_plugin)],
            **common,  # type: ignore[arg-type]
        )
        # The role's policies must exist before a connector starts and resolves its secret
        # (a dependency on the role covers every resource under it, its policy included).
        self.connectors = [debezium_source, s3_sink]
        for connector in self.connectors:
            connector.node.add_dependency(self.role)

    def _plugin(
        self, construct_id: str, location: str, *, setting: str, name_prefix: str
    ) -> kafkaconnect.CfnCustomPlugin:
        found = plugin_location(self, f"{construct_id}Asset", location, setting=setting)
        # An asset's key is its content hash; an s3:// location is named by where it points.
        return kafkaconnect.CfnCustomPlugin(
            self,
            construct_id,
            name=f"{name_prefix}-{digest(found.content_id)}",
            content_type="ZIP",
            location=kafkaconnect.CfnCustomPlugin.CustomPluginLocationProperty(
                s3_location=kafkaconnect.CfnCustomPlugin.S3LocationProperty(
                    bucket_arn=found.bucket_arn, file_key=found.key
                )
            ),
        )

    @staticmethod
    def _plugin_ref(
        plugin: kafkaconnect.CfnCustomPlugin,
    ) -> kafkaconnect.CfnConnector.PluginProperty:
        return kafkaconnect.CfnConnector.PluginProperty(
            custom_plugin=kafkaconnect.CfnConnector.CustomPluginProperty(
                custom_plugin_arn=plugin.attr_custom_plugin_arn,
                revision=plugin.attr_revision,
            )
        )


def digest(text: str) -> str:
    """Eight hex characters naming a content: short enough for MSK Connect's name limits."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _slug(version: str) -> str:
    return version.lower().replace(".", "-")
