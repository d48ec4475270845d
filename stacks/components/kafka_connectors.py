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
from collections.abc import Mapping
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kafkaconnect as kafkaconnect
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from connectors import versions
from connectors.configs import render_properties
from environment.artifacts import plugin_source
from environment.config import ConnectConfig
from environment.names import resource_name
from stacks.components.log_storage import log_group


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
        connect: ConnectConfig,
        prefix: str,
        vpc: ec2.IVpc,
        bootstrap_brokers: str,
        source_name: str,
        source_config: Mapping[str, str],
        sink_name: str,
        sink_config: Mapping[str, str],
        worker: Mapping[str, str],
        debezium_plugin: str,
        s3_sink_plugin: str,
    ) -> None:
        """The connectors' configurations are the composing stack's (``connectors.configs``),
        as are the role's rights on the brokers, the database secret and the change bucket;
        ``worker``: the worker configuration both connectors share; ``debezium_plugin`` and
        ``s3_sink_plugin``: where the plugins are (``connect.*_plugin`` or an override)."""
        super().__init__(scope, construct_id)

        # Workers run in the private subnets and reach brokers, the database and AWS APIs.
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"{prefix} MSK Connect workers",
            allow_all_outbound=True,
        )

        # One role for both connectors. Only MSK Connect acting for this account's connectors
        # may assume it (confused deputy).
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
            description=f"{prefix} MSK Connect connectors",
        )

        self.log_group = log_group(self, "Logs")

        # Custom plugins: from S3 as given, or uploaded from a local zip (`make plugins`).
        self.debezium_plugin = self._plugin(
            "DebeziumPlugin",
            debezium_plugin,
            setting="connect.debezium_plugin",
            name_prefix=resource_name(
                prefix, "debezium-postgres", _slug(versions.DEBEZIUM_VERSION)
            ),
        )
        self.s3_sink_plugin = self._plugin(
            "S3SinkPlugin",
            s3_sink_plugin,
            setting="connect.s3_sink_plugin",
            name_prefix=resource_name(prefix, "s3-sink", _slug(versions.CONFLUENT_S3_SINK_VERSION)),
        )

        # Worker configuration: offsets in a named compacted topic, the config providers.
        rendered = render_properties(worker)
        self.worker_configuration = kafkaconnect.CfnWorkerConfiguration(
            self,
            "WorkerConfiguration",
            name=resource_name(prefix, "connect-worker", digest(rendered)),
            properties_file_content=base64.b64encode(rendered.encode()).decode(),
            description="Named offsets topic and the Secrets Manager config provider",
        )

        subnets = vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        common = {
            "kafka_cluster": kafkaconnect.CfnConnector.KafkaClusterProperty(
                apache_kafka_cluster=kafkaconnect.CfnConnector.ApacheKafkaClusterProperty(
                    bootstrap_servers=bootstrap_brokers,
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
        if not connect.connectors_deployed:
            return

        # Debezium source: one task (a replication slot has one reader).
        debezium_source = kafkaconnect.CfnConnector(
            self,
            "DebeziumSource",
            connector_name=source_name,
            connector_description="Debezium PostgreSQL source: lake tables into MSK topics",
            connector_configuration=dict(source_config),
            capacity=kafkaconnect.CfnConnector.CapacityProperty(
                provisioned_capacity=kafkaconnect.CfnConnector.ProvisionedCapacityProperty(
                    mcu_count=connect.mcu_count, worker_count=1
                )
            ),
            plugins=[self._plugin_ref(self.debezium_plugin)],
            **common,  # type: ignore[arg-type]
        )

        # S3 sink: change files in the layout the merge job reads.
        s3_sink = kafkaconnect.CfnConnector(
            self,
            "S3Sink",
            connector_name=sink_name,
            connector_description="Confluent S3 sink: MSK topics into change files",
            connector_configuration=dict(sink_config),
            capacity=kafkaconnect.CfnConnector.CapacityProperty(
                provisioned_capacity=kafkaconnect.CfnConnector.ProvisionedCapacityProperty(
                    mcu_count=connect.mcu_count, worker_count=connect.workers
                )
            ),
            plugins=[self._plugin_ref(self.s3_sink_plugin)],
            **common,  # type: ignore[arg-type]
        )
        # The role's policies (the stack's grants) must exist before a connector starts and
        # resolves its secret (a dependency on the role covers every resource under it, its
        # policy included).
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
