"""A VPC with public, private-with-egress and isolated subnets, and flow logs."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdclake.config import NetworkConfig


class Network(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: NetworkConfig) -> None:
        super().__init__(scope, construct_id)

        # Three tiers: NAT/load balancers, workloads with egress, databases without any route out.
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(config.cidr),
            max_azs=config.max_azs,
            nat_gateways=config.nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC),
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS
                ),
                ec2.SubnetConfiguration(name="isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            ],
        )

        # Flow logs so rejected traffic to the database and brokers can be investigated.
        flow_log_group = logs.LogGroup(
            self, "FlowLogs", retention=logs.RetentionDays[config.flow_log_retention]
        )
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group))
