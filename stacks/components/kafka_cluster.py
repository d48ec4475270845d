"""A provisioned MSK cluster: IAM auth, TLS everywhere, KMS at rest, broker logs.

Provisioned rather than Serverless: MSK Connect's Debezium source needs topics it can create with
a chosen replication factor and a compacted offsets topic, and Serverless limits partitions,
retention and topic configs per cluster. Topics are created by Kafka Connect (KIP-158) from the
connector configs, not by the brokers: ``auto.create.topics.enable`` is off, so a typo cannot
create a stray topic.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_msk as msk
from aws_cdk import custom_resources as cr
from constructs import Construct

from environment.config import MskConfig
from stacks.components.log_storage import log_group
from stacks.components.nag import LAMBDA_LOGS_FINDING, acknowledge

IAM_TLS_PORT = 9098  # brokers' SASL/IAM listener inside the VPC


class KafkaCluster(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        msk_config: MskConfig,
        cluster_name: str,
        brokers: int,
        replication_factor: int,
        vpc: ec2.IVpc,
    ) -> None:
        """``brokers`` in all (``brokers_per_az`` in each AZ); ``replication_factor`` of the
        topics the brokers' defaults create (connectors.configs derives both from config)."""
        super().__init__(scope, construct_id)
        self.cluster_name = cluster_name

        # Customer-managed key for broker volumes.
        self.encryption_key = kms.Key(
            self,
            "Key",
            description=f"{self.cluster_name} broker storage",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )

        # Brokers accept only the IAM/TLS listener, and only from security groups granted access.
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"{self.cluster_name} brokers",
            allow_all_outbound=False,
        )

        # Broker logs to CloudWatch.
        self.log_group = log_group(self, "BrokerLogs")

        # Server properties: no auto-created topics, durable defaults sized to the broker count.
        server_properties = "\n".join(
            [
                "auto.create.topics.enable=false",
                f"default.replication.factor={replication_factor}",
                f"min.insync.replicas={max(1, replication_factor - 1)}",
                "num.partitions=1",
                "unclean.leader.election.enable=false",
                "",
            ]
        )
        self.configuration = msk.CfnConfiguration(
            self,
            "Configuration",
            name=self.cluster_name,
            kafka_versions_list=[msk_config.kafka_version],
            server_properties=server_properties,
        )

        # One broker group across the private subnets (one subnet per AZ).
        subnets = vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.cluster = msk.CfnCluster(
            self,
            "Cluster",
            cluster_name=self.cluster_name,
            kafka_version=msk_config.kafka_version,
            number_of_broker_nodes=brokers,
            enhanced_monitoring="PER_BROKER",
            broker_node_group_info=msk.CfnCluster.BrokerNodeGroupInfoProperty(
                client_subnets=subnets.subnet_ids,
                instance_type=msk_config.broker_instance_type,
                security_groups=[self.security_group.security_group_id],
                storage_info=msk.CfnCluster.StorageInfoProperty(
                    ebs_storage_info=msk.CfnCluster.EBSStorageInfoProperty(
                        volume_size=msk_config.broker_volume_gib
                    )
                ),
            ),
            client_authentication=msk.CfnCluster.ClientAuthenticationProperty(
                sasl=msk.CfnCluster.SaslProperty(iam=msk.CfnCluster.IamProperty(enabled=True)),
                unauthenticated=msk.CfnCluster.UnauthenticatedProperty(enabled=False),
            ),
            encryption_info=msk.CfnCluster.EncryptionInfoProperty(
                encryption_at_rest=msk.CfnCluster.EncryptionAtRestProperty(
                    data_volume_kms_key_id=self.encryption_key.key_arn
                ),
                encryption_in_transit=msk.CfnCluster.EncryptionInTransitProperty(
                    client_broker="TLS", in_cluster=True
                ),
            ),
            logging_info=msk.CfnCluster.LoggingInfoProperty(
                broker_logs=msk.CfnCluster.BrokerLogsProperty(
                    cloud_watch_logs=msk.CfnCluster.CloudWatchLogsProperty(
                        enabled=True, log_group=self.log_group.log_group_name
                    )
                )
            ),
            configuration_info=msk.CfnCluster.ConfigurationInfoProperty(
                arn=self.configuration.attr_arn,
                revision=self.configuration.attr_latest_revision_revision,
            ),
        )
        # Retained with the cluster: a configuration in use by a live cluster cannot be deleted,
        # so deleting it would fail the stack's deletion.
        self.cluster.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        self.configuration.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        self.cluster_arn = self.cluster.attr_arn

        # CloudFormation has no attribute for the bootstrap string: read it once per cluster.
        bootstrap = cr.AwsCustomResource(
            self,
            "BootstrapBrokers",
            on_update=cr.AwsSdkCall(
                service="Kafka",
                action="getBootstrapBrokers",
                parameters={"ClusterArn": self.cluster_arn},
                physical_resource_id=cr.PhysicalResourceId.of(self.cluster_arn),
                output_paths=["BootstrapBrokerStringSaslIam"],
            ),
            policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[self.cluster_arn]),
            install_latest_aws_sdk=False,
        )
        self.bootstrap_brokers = bootstrap.get_response_field("BootstrapBrokerStringSaslIam")

    def allow_clients(self, peer: ec2.ISecurityGroup, description: str) -> None:
        """Let a client security group reach the IAM/TLS listener (and only that)."""
        self.security_group.add_ingress_rule(peer, ec2.Port.tcp(IAM_TLS_PORT), description)
        peer.add_egress_rule(self.security_group, ec2.Port.tcp(IAM_TLS_PORT), description)

    def _arn(self, resource: str, name: str) -> str:
        """``arn:...:kafka:...:<resource>/<cluster name>/<cluster uuid>/<name>``."""
        uuid = cdk.Fn.select(2, cdk.Fn.split("/", self.cluster_arn))
        stack = cdk.Stack.of(self)
        return (
            f"arn:{stack.partition}:kafka:{stack.region}:{stack.account}:"
            f"{resource}/{self.cluster_name}/{uuid}/{name}"
        )

    def grant_connect(
        self, grantee: iam.IGrantable, *, topics: list[str], groups: list[str]
    ) -> None:
        """Kafka data-plane IAM for a Connect worker: its topics and consumer groups only."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "kafka-cluster:Connect",
                    "kafka-cluster:DescribeCluster",
                    # Kafka 3.x producers are idempotent by default and fail their first
                    # write without it. Connect 3.7's workers turn idempotence off for their
                    # own producers (tests/iam records no idempotent write), but a connector's
                    # producer.override or exactly-once source support turns it back on.
                    "kafka-cluster:WriteDataIdempotently",
                ],
                resources=[self.cluster_arn],
            )
        )
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "kafka-cluster:CreateTopic",
                    "kafka-cluster:DescribeTopic",
                    "kafka-cluster:DescribeTopicDynamicConfiguration",
                    "kafka-cluster:AlterTopic",
                    "kafka-cluster:ReadData",
                    "kafka-cluster:WriteData",
                ],
                resources=[self._arn("topic", t) for t in topics],
            )
        )
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["kafka-cluster:AlterGroup", "kafka-cluster:DescribeGroup"],
                resources=[self._arn("group", g) for g in groups],
            )
        )

    def acknowledge_custom_resource(self) -> None:
        """The SDK-call provider is CDK's singleton Lambda; its findings are CDK's, not ours."""
        stack = cdk.Stack.of(self)
        for child in stack.node.children:
            if child.node.id.startswith("AWS679f53fac002430cb0da5b7982bd2287"):
                acknowledge(
                    child,
                    {
                        LAMBDA_LOGS_FINDING: (
                            "CDK's AwsCustomResource provider logs through the AWS managed "
                            "basic execution policy"
                        ),
                        "AwsSolutions-L1": (
                            "CDK's AwsCustomResource provider pins its own Node.js runtime"
                        ),
                    },
                )
