"""How capture components reach the database stack without making it depend on them."""

from __future__ import annotations

from typing import Protocol

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager

from connectors.configs import DatabaseEndpoint


class DatabaseOutputs(Protocol):
    """What the database stack exposes to the capture and fan-out stacks."""

    @property
    def cluster(self) -> rds.IDatabaseCluster: ...
    @property
    def encryption_key(self) -> kms.IKey: ...
    @property
    def replication_secret(self) -> secretsmanager.ISecret: ...
    @property
    def database_name(self) -> str: ...
    @property
    def port(self) -> int: ...


def allow_database_from(
    database: DatabaseOutputs, peer: ec2.ISecurityGroup, description: str
) -> None:
    """Open the database port to ``peer`` with the rule living in *peer's* stack.

    ``remote_rule=True`` makes CDK create the ingress rule next to the peer, so the consuming
    stack references the database stack and never the other way round (no cross-stack cycle).
    """
    port = ec2.Port.tcp(cdk.Token.as_number(database.port))
    for group in database.cluster.connections.security_groups:
        group.add_ingress_rule(peer, port, description, remote_rule=True)


def database_endpoint(database: DatabaseOutputs) -> DatabaseEndpoint:
    return DatabaseEndpoint(
        hostname=database.cluster.cluster_endpoint.hostname,
        port=cdk.Tokenization.stringify_number(database.port),
        dbname=database.database_name,
        secret_arn=database.replication_secret.secret_arn,
    )
