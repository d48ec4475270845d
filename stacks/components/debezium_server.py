"""Debezium Server on ECS Fargate: the fan-out tables into Kinesis, on its own slot.

Offsets are kept in a file on EFS (Debezium's FileOffsetBackingStore): they survive task
restarts and replacements, need no extra database objects or grants, and the single-task
service (never two tasks at once) is the only writer. The database user and password come
from Secrets Manager as ECS secrets; everything else is the plain configuration the composing stack
derives from config (``connectors.configs.debezium_server_properties``).

The RDS CA bundle (``database.sslrootcert``) is an S3 asset: ECS mounts no S3 object, and the
Debezium image is used as published, so a short-lived AWS CLI container copies the object into
a task-scoped volume before Debezium Server starts, and Debezium mounts it read-only.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from connectors.configs import DEBEZIUM_SERVER_RDS_CA, environment_variables
from environment.config import DebeziumServerConfig
from environment.names import resource_name
from stacks.components.log_storage import log_group
from stacks.components.nag import acknowledge

DATA_DIR = "/debezium/data"
OFFSETS_FILE = f"{DATA_DIR}/offsets.dat"
JBOSS_UID = "185"  # the Debezium Server image runs as jboss (185:185)
HEALTH_PORT = 8080
ROUTER = "org.apache.kafka.connect.transforms.RegexRouter"
RDS_CA_DIR = posixpath.dirname(DEBEZIUM_SERVER_RDS_CA)
RDS_CA_VOLUME = "rds-ca"
# Copies the RDS CA bundle from S3 before Debezium starts (entrypoint `aws`); pinned by tag.
AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.31.23"


def service_names(prefix: str) -> tuple[str, str]:
    """(cluster, service) of Debezium Server's ECS service: fixed, so the credential refresh in
    another stack restarts it without an import that turning the fan-out off would have to
    remove while in use."""
    name = resource_name(prefix, "debezium-server")
    return name, name


def stream_routes(properties: Mapping[str, str], stream_names: Mapping[str, str]) -> dict[str, str]:
    """``properties`` plus one RegexRouter per topic, renaming it to its stream's name.

    The Kinesis sink writes each record to the stream named like the record's topic, and the
    streams' names are CloudFormation's; routing after the existing transforms (heartbeats are
    dropped first) keeps both. Transform names are alphanumeric: Debezium Server reads them from
    environment variables, whose names map back to properties by ``_`` -> ``.``.
    """
    routed = dict(properties)
    names = []
    for index, (topic, stream_name) in enumerate(sorted(stream_names.items())):
        name = f"stream{index}"
        names.append(name)
        routed[f"debezium.transforms.{name}.type"] = ROUTER
        routed[f"debezium.transforms.{name}.regex"] = re.escape(topic)
        routed[f"debezium.transforms.{name}.replacement"] = stream_name
    chain = [t for t in routed.get("debezium.transforms", "").split(",") if t]
    routed["debezium.transforms"] = ",".join([*chain, *names])
    return routed


class DebeziumServer(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        server: DebeziumServerConfig,
        prefix: str,
        properties: Mapping[str, str],
        stream_names: Mapping[str, str],
        vpc: ec2.IVpc,
        encryption_key: kms.IKey,
        database_secret_arn: str,
        rds_ca_bundle: Path | None,
    ) -> None:
        """``properties``: Debezium Server's settings, with its offsets in :data:`OFFSETS_FILE`
        and the RDS CA at ``DEBEZIUM_SERVER_RDS_CA``. ``stream_names``: the Kinesis stream of
        each captured topic, by topic name. ``rds_ca_bundle``: the RDS CA bundle Debezium
        verifies Aurora with; None when ``database.tls_verify`` is false. The task's rights on
        the streams and the database key are the composing stack's grants."""
        super().__init__(scope, construct_id)
        # The task mounts these paths; settings that name others would start Debezium without
        # its offsets (a new snapshot) or without the CA it verifies Aurora with.
        expected = {"debezium.source.offset.storage.file.filename": OFFSETS_FILE}
        if rds_ca_bundle is not None:
            expected["debezium.source.database.sslrootcert"] = DEBEZIUM_SERVER_RDS_CA
        wrong = {k: properties.get(k) for k, v in expected.items() if properties.get(k) != v}
        if wrong:
            raise ValueError(
                f"Debezium Server settings name paths the task does not mount: {wrong}"
            )

        # The task reaches the database, EFS and AWS APIs; nothing reaches the task.
        self.security_group = ec2.SecurityGroup(
            self, "SecurityGroup", vpc=vpc, description=f"{prefix} Debezium Server"
        )

        # Offsets on an encrypted file system, through an access point owned by the image's user.
        self.file_system = efs.FileSystem(
            self,
            "Offsets",
            vpc=vpc,
            encrypted=True,
            kms_key=encryption_key,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.file_system.connections.allow_default_port_from(self.security_group)
        access_point = self.file_system.add_access_point(
            "AccessPoint",
            path="/debezium",
            create_acl=efs.Acl(owner_uid=JBOSS_UID, owner_gid=JBOSS_UID, permissions="750"),
            posix_user=efs.PosixUser(uid=JBOSS_UID, gid=JBOSS_UID),
        )

        cluster_name, service_name = service_names(prefix)
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            cluster_name=cluster_name,
            vpc=vpc,
            container_insights_v2=ecs.ContainerInsights.ENABLED,
        )
        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "Task",
            cpu=server.cpu,
            memory_limit_mib=server.memory_mib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        self.task_definition.add_volume(
            name="data",
            efs_volume_configuration=ecs.EfsVolumeConfiguration(
                file_system_id=self.file_system.file_system_id,
                transit_encryption="ENABLED",
                authorization_config=ecs.AuthorizationConfig(
                    access_point_id=access_point.access_point_id, iam="ENABLED"
                ),
            ),
        )
        self.file_system.grant_read_write(self.task_definition.task_role)
        self.task_definition.task_role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
                resources=[self.file_system.file_system_arn],
                conditions={
                    "StringEquals": {
                        "elasticfilesystem:AccessPointArn": access_point.access_point_arn
                    }
                },
            )
        )

        self.log_group = log_group(self, "Logs")
        # Imported by ARN: grants stay identity policies in this stack (no edits to the database
        # stack's key policy, so no dependency cycle).
        secret = secretsmanager.Secret.from_secret_complete_arn(
            self, "ReplicationSecret", database_secret_arn
        )
        self.container = self.task_definition.add_container(
            "debezium",
            image=ecs.ContainerImage.from_registry(server.image),
            environment=environment_variables(stream_routes(properties, stream_names)),
            secrets={
                "DEBEZIUM_SOURCE_DATABASE_USER": ecs.Secret.from_secrets_manager(
                    secret, "username"
                ),
                "DEBEZIUM_SOURCE_DATABASE_PASSWORD": ecs.Secret.from_secrets_manager(
                    secret, "password"
                ),
            },
            logging=ecs.LogDrivers.aws_logs(stream_prefix="debezium", log_group=self.log_group),
            port_mappings=[ecs.PortMapping(container_port=HEALTH_PORT)],
            health_check=ecs.HealthCheck(
                command=[
                    "CMD-SHELL",
                    f"curl -fs http://localhost:{HEALTH_PORT}/q/health || exit 1",
                ],
                interval=cdk.Duration.seconds(30),
                timeout=cdk.Duration.seconds(5),
                retries=3,
                start_period=cdk.Duration.seconds(120),
            ),
        )
        self.container.add_mount_points(
            ecs.MountPoint(container_path=DATA_DIR, source_volume="data", read_only=False)
        )
        if rds_ca_bundle is not None:
            self._ship_rds_ca(rds_ca_bundle)

        # Exactly one task: a replication slot has one reader, and the offsets file one writer.
        self.service = ecs.FargateService(
            self,
            "Service",
            service_name=service_name,
            cluster=self.cluster,
            task_definition=self.task_definition,
            desired_count=1,
            min_healthy_percent=0,
            max_healthy_percent=100,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
            security_groups=[self.security_group],
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            assign_public_ip=False,
            enable_execute_command=False,
        )
        acknowledge(
            self.task_definition,
            {
                "AwsSolutions-ECS2": (
                    "environment holds Debezium Server settings only; the database user and "
                    "password are ECS secrets from Secrets Manager"
                ),
            },
        )

    def _ship_rds_ca(self, bundle: Path) -> None:
        """The bundle as an asset, copied into a task volume by a container that must succeed
        before Debezium starts; the task role reads that one object only."""
        asset = s3_assets.Asset(self, "RdsCaBundle", path=str(bundle))
        self.rds_ca_asset = asset
        self.task_definition.add_volume(name=RDS_CA_VOLUME)
        stack = cdk.Stack.of(self)
        fetch = self.task_definition.add_container(
            "rds-ca",
            image=ecs.ContainerImage.from_registry(AWS_CLI_IMAGE),
            essential=False,
            command=[
                "s3",
                "cp",
                "--only-show-errors",
                "--region",
                stack.region,
                asset.s3_object_url,
                DEBEZIUM_SERVER_RDS_CA,
            ],
            logging=ecs.LogDrivers.aws_logs(stream_prefix="rds-ca", log_group=self.log_group),
        )
        fetch.add_mount_points(
            ecs.MountPoint(container_path=RDS_CA_DIR, source_volume=RDS_CA_VOLUME, read_only=False)
        )
        self.container.add_mount_points(
            ecs.MountPoint(container_path=RDS_CA_DIR, source_volume=RDS_CA_VOLUME, read_only=True)
        )
        self.container.add_container_dependencies(
            ecs.ContainerDependency(
                container=fetch, condition=ecs.ContainerDependencyCondition.SUCCESS
            )
        )
        self.task_definition.task_role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[asset.bucket.arn_for_objects(asset.s3_object_key)],
            )
        )
