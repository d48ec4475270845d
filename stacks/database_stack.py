"""Database: Aurora PostgreSQL with logical replication and its replication bootstrap."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_rds as rds
from constructs import Construct

from connectors.configs import connector_name
from environment.artifacts import rds_ca_bundle
from environment.config import EnvironmentConfig
from environment.replication import bootstrap_spec, master_endpoint
from stacks.components.database import DATABASE_PORT, AttachedDatabase, Database
from stacks.components.database_alarms import DatabaseAlarms
from stacks.components.debezium_server import service_names
from stacks.components.network import existing_vpc
from stacks.components.operator_access import OperatorAccess
from stacks.components.replication_bootstrap import ReplicationBootstrap


class DatabaseStack(cdk.Stack):
    """The source database, ready for Debezium, with alarms and operator access.

    Other stacks connect with ``replication_secret`` and open ingress themselves with
    ``database_access.allow_database_from``: its rules live in the depending stack (a remote
    rule), so there is no cycle back to this one.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        vpc: ec2.IVpc | None,
        **kwargs: Any,
    ) -> None:
        """``vpc``: the network stack's, or None with ``network.existing``: then the user's VPC
        is imported here, by id (no lookup), for this stack and the ones after it."""
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        if vpc is None:
            assert config.network.existing is not None, "a VPC to import, or the created one"
            vpc = existing_vpc(self, "Vpc", config=config.network.existing)
        #: The environment's VPC, as every stack after this one places its resources.
        self.vpc = vpc
        cluster_identifier = config.cluster_identifier
        existing = config.database.existing

        self.database: Database | AttachedDatabase
        if existing is None:
            self.database = Database(
                self,
                "Database",
                config=config.database,
                vpc=vpc,
                cluster_identifier=cluster_identifier,
            )
        else:
            self.database = AttachedDatabase(
                self,
                "Database",
                config=existing,
                retain_secrets=config.database.deletion_protection,
            )
        #: Aurora PostgreSQL cluster (Amazon RDS): created here, or the existing one imported.
        self.cluster: rds.IDatabaseCluster = self.database.cluster
        #: Customer-managed KMS key of the cluster, its snapshots and its secrets (with an
        #: existing cluster: of the secrets this stack keeps).
        self.encryption_key = self.database.encryption_key
        #: Name of the application database in the cluster.
        self.database_name = config.database.name
        #: TCP port of the cluster endpoints.
        self.port = DATABASE_PORT if existing is None else existing.port

        self.alarms = DatabaseAlarms(
            self,
            "Alarms",
            config=config.database.alarms,
            cluster_identifier=cluster_identifier,
            environment=config.env,
            reconcile_every=cdk.Duration.minutes(
                config.database.replication.reconcile_every_minutes
            ),
        )
        #: SNS topic of the database alarms.
        self.alarm_topic = self.alarms.topic

        self.bootstrap = ReplicationBootstrap(
            self,
            "ReplicationBootstrap",
            database=config.database,
            spec=bootstrap_spec(config),
            environment=config.env,
            vpc=vpc,
            # An existing VPC has no endpoints of ours to open: its APIs go out through its NAT.
            vpc_cidr=config.network.cidr if config.network.existing is None else None,
            cluster=self.cluster,
            master_secret=self.database.master_secret,
            encryption_key=self.encryption_key,
            alarm_topic=self.alarm_topic,
            rds_ca_bundle=rds_ca_bundle(config),
            captures=captures(config),
            master_endpoint=master_endpoint(config),
        )
        self.cluster.connections.allow_default_port_from(
            self.bootstrap.security_group, "Replication bootstrap"
        )
        self.database.master_secret.grant_read(self.bootstrap.function)
        #: Secrets Manager secret of the master user (the bootstrap's custom resources use it).
        self.master_secret = self.database.master_secret
        #: Secrets Manager secret of the replication role (username, password, host, port,
        #: dbname) that the Debezium connectors use.
        self.replication_secret = self.bootstrap.replication_secret

        self.operator_access = OperatorAccess(self, "OperatorAccess", vpc=vpc)
        self.cluster.connections.allow_default_port_from(
            self.operator_access.security_group, "Operators via SSM port forwarding"
        )

        cdk.CfnOutput(self, "ClusterEndpoint", value=self.cluster.cluster_endpoint.hostname)
        cdk.CfnOutput(self, "ReplicationSecretArn", value=self.replication_secret.secret_arn)
        cdk.CfnOutput(self, "BootstrapFunctionName", value=self.bootstrap.function.function_name)
        # The lake's merge jobs import the function (a rebuild's snapshot signal). Exported
        # whether or not anything imports it: an environment whose last lake table goes would
        # otherwise drop the exports while the deployed lake stack still imports them, and
        # CloudFormation refuses that update ("Export ... cannot be updated as it is in use").
        self.export_value(self.bootstrap.function.function_name)
        self.export_value(self.bootstrap.function.function_arn)
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic_arn)
        cdk.CfnOutput(
            self, "OperatorAccessInstanceId", value=self.operator_access.instance.instance_id
        )


def captures(config: EnvironmentConfig) -> list[dict[str, str]]:
    """Each capture's slot, signal table and what runs it, by the names the capture and
    fan-out stacks fix (this stack deploys first, so nothing is imported from them)."""
    replication = config.database.replication
    found = [
        {
            "slot": replication.slot,
            "signal_table": replication.signal_table,
            "connector": connector_name(config, "debezium-source"),
        }
    ]
    if config.fanout_tables:
        cluster, service = service_names(config.prefix)
        found.append(
            {
                "slot": replication.fanout_slot,
                "signal_table": replication.fanout_signal_table,
                "cluster": cluster,
                "service": service,
            }
        )
    return found
