"""Aurora PostgreSQL with logical replication turned on, encrypted with its own key."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from environment.config import DatabaseConfig, ExistingDatabase
from stacks.components.log_storage import log_group
from stacks.components.nag import acknowledge

# Not 5432: one less thing a scan of the VPC finds by default (cdk-nag AwsSolutions-RDS11).
DATABASE_PORT = 5433
MASTER_USERNAME = "cdclake_admin"


def _rotated_key(scope: Construct, description: str, *, retain: bool) -> kms.Key:
    """The construct's customer-managed key ("Key"), rotated, kept on delete when ``retain``."""
    return kms.Key(
        scope,
        "Key",
        description=description,
        enable_key_rotation=True,
        removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
    )


class Database(Construct):
    """An Aurora PostgreSQL cluster in the isolated subnets.

    The cluster parameter group sets ``rds.logical_replication=1`` (which makes
    ``wal_level=logical``) and sizes slots, WAL senders and ``max_slot_wal_keep_size``, the cap
    on WAL a stalled slot may retain. Storage, Performance Insights, the master secret and the
    exported logs use one customer-managed key. ``config.deletion_protection`` marks a
    long-lived environment: it also turns on snapshot-on-delete.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DatabaseConfig,
        vpc: ec2.IVpc,
        cluster_identifier: str,
    ) -> None:
        super().__init__(scope, construct_id)

        # Customer-managed key for storage, snapshots, secrets and Performance Insights.
        self.encryption_key = _rotated_key(
            self,
            f"Aurora cluster {cluster_identifier}: storage, secrets, insights",
            retain=config.deletion_protection,
        )

        engine = rds.DatabaseClusterEngine.aurora_postgres(
            version=rds.AuroraPostgresEngineVersion.of(
                config.engine_version, config.engine_version.split(".", 1)[0]
            )
        )

        # Cluster-level parameters: logical decoding for Debezium, sized from config.
        self.parameter_group = rds.ParameterGroup(
            self,
            "ClusterParameters",
            engine=engine,
            description="cdc-lake: logical replication for Debezium (pgoutput)",
            parameters=config.cluster_parameters,
        )

        # The group other stacks open ingress on; no egress needed by a database.
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"Aurora cluster {cluster_identifier}",
            allow_all_outbound=False,
        )

        # Exported PostgreSQL logs, with retention, created before RDS would create it unbounded.
        self.log_group = log_group(
            self,
            "PostgresqlLogs",
            log_group_name=f"/aws/rds/cluster/{cluster_identifier}/postgresql",
        )

        instance_type = ec2.InstanceType(config.instance_class)

        def instance_props(name: str) -> dict[str, object]:
            return {
                "instance_type": instance_type,
                "enable_performance_insights": True,
                "performance_insight_encryption_key": self.encryption_key,
                "publicly_accessible": False,
                "auto_minor_version_upgrade": False,
                "instance_identifier": f"{cluster_identifier}-{name}",
            }

        # The cluster: writer plus (instances - 1) readers, private, encrypted, IAM auth on.
        self.cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            engine=engine,
            cluster_identifier=cluster_identifier,
            default_database_name=config.name,
            port=DATABASE_PORT,
            credentials=rds.Credentials.from_generated_secret(
                MASTER_USERNAME, encryption_key=self.encryption_key
            ),
            parameter_group=self.parameter_group,
            writer=rds.ClusterInstance.provisioned("Writer", **instance_props("writer")),  # type: ignore[arg-type]
            readers=[
                rds.ClusterInstance.provisioned(f"Reader{i}", **instance_props(f"reader{i}"))  # type: ignore[arg-type]
                for i in range(1, config.instances)
            ],
            vpc=vpc,
            # An existing VPC brings only private subnets (network.existing): the cluster joins
            # them there, and the isolated tier where the stack made one.
            vpc_subnets=ec2.SubnetSelection(
                subnet_type=ec2.SubnetType.PRIVATE_ISOLATED
                if vpc.isolated_subnets
                else ec2.SubnetType.PRIVATE_WITH_EGRESS
            ),
            security_groups=[self.security_group],
            storage_encrypted=True,
            storage_encryption_key=self.encryption_key,
            iam_authentication=True,
            backup=rds.BackupProps(
                retention=cdk.Duration.days(config.backup_retention_days),
                preferred_window="02:00-03:00",
            ),
            preferred_maintenance_window="sun:04:00-sun:05:00",
            cloudwatch_logs_exports=["postgresql"],
            copy_tags_to_snapshot=True,
            deletion_protection=config.deletion_protection,
            removal_policy=cdk.RemovalPolicy.SNAPSHOT
            if config.deletion_protection
            else cdk.RemovalPolicy.DESTROY,
        )
        self.cluster.node.add_dependency(self.log_group)
        # A long-lived environment keeps the master secret with the cluster's final snapshot:
        # a restore needs its credentials. (``cluster.secret`` is the attachment; the secret
        # itself is the cluster's child.)
        (generated,) = [c for c in self.cluster.node.children if isinstance(c, rds.DatabaseSecret)]
        generated.apply_removal_policy(
            cdk.RemovalPolicy.RETAIN if config.deletion_protection else cdk.RemovalPolicy.DESTROY
        )
        if not config.deletion_protection:
            acknowledge(
                self.cluster,
                {
                    "AwsSolutions-RDS10": "Deletion protection comes from config and is off "
                    "only in disposable environments (dev); prod sets it"
                },
            )

        # Master password rotated by the AWS single-user rotation function, inside the VPC.
        self.master_rotation = self.cluster.add_rotation_single_user(
            automatically_after=cdk.Duration.days(30),
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        )

    @property
    def master_secret(self) -> rds.DatabaseSecret:
        secret = self.cluster.secret
        assert secret is not None  # generated credentials always produce one
        return secret  # type: ignore[return-value]


class AttachedDatabase(Construct):
    """The user's cluster (``database.existing``), imported by its identifier, endpoint, port,
    security group and master secret: nothing of it is created, so no removal policy,
    retention or snapshot of ours can reach it. The one resource of its own is a key for the
    secrets the environment keeps (the replication role's), since the cluster's key is not ours.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ExistingDatabase,
        retain_secrets: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.encryption_key = _rotated_key(
            self, f"cdc-lake secrets for cluster {config.cluster_identifier}", retain=retain_secrets
        )
        # Mutable: ingress from our own groups becomes rules of our stacks on the user's group
        # (AWS::EC2::SecurityGroupIngress), which a deploy adds and a delete removes. Outbound
        # taken as allowed, so CDK never adds an egress rule to a group that is not ours.
        self.security_group = ec2.SecurityGroup.from_security_group_id(
            self,
            "SecurityGroup",
            config.security_group_id,
            allow_all_outbound=True,
            mutable=True,
        )
        self.cluster = rds.DatabaseCluster.from_database_cluster_attributes(
            self,
            "Cluster",
            cluster_identifier=config.cluster_identifier,
            cluster_endpoint_address=config.endpoint,
            port=config.port,
            security_groups=[self.security_group],
        )
        #: The master user's secret, read by the bootstrap only (never rotated or changed here).
        self.master_secret = secretsmanager.Secret.from_secret_complete_arn(
            self, "MasterSecret", config.master_secret_arn
        )
