"""Database: Aurora PostgreSQL with logical replication and its replication bootstrap."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from connectors.configs import connector_name
from environment.artifacts import rds_ca_bundle
from environment.config import EnvironmentConfig
from environment.replication import bootstrap_spec
from stacks.components.database import DATABASE_PORT, Database
from stacks.components.database_alarms import DatabaseAlarms
from stacks.components.debezium_server import service_names
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
        vpc: ec2.IVpc,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        cluster_identifier = config.resource_name("aurora")

        self.database = Database(
            self, "Database", config=config.database, vpc=vpc, cluster_identifier=cluster_identifier
        )
        #: Aurora PostgreSQL cluster (Amazon RDS).
        self.cluster = self.database.cluster
        #: Customer-managed KMS key of the cluster, its snapshots and its secrets.
        self.encryption_key = self.database.encryption_key
        #: Name of the application database in the cluster.
        self.database_name = config.database.name
        #: TCP port of the cluster endpoints.
        self.port = DATABASE_PORT

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
            vpc_cidr=config.network.cidr,
            cluster=self.cluster,
            master_secret=self.database.master_secret,
            encryption_key=self.encryption_key,
            alarm_topic=self.alarm_topic,
            rds_ca_bundle=rds_ca_bundle(config),
            captures=captures(config),
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
