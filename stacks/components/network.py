"""A VPC with public, private-with-egress and isolated subnets, flow logs and VPC endpoints."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from environment.config import ExistingNetwork, NetworkConfig
from stacks.components.log_storage import log_group

# Interface endpoints that keep private AWS API calls inside the VPC: the bootstrap Lambda and the
# rotation functions read Secrets Manager, Glue/MSK Connect/Lambda call Glue, STS, Logs and KMS,
# and the SSM trio lets operators open Session Manager sessions without SSH keys or a VPN.
INTERFACE_ENDPOINTS: dict[str, ec2.InterfaceVpcEndpointAwsService] = {
    "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    "Glue": ec2.InterfaceVpcEndpointAwsService.GLUE,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Kms": ec2.InterfaceVpcEndpointAwsService.KMS,
    "Ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
    "SsmMessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES,
    "Ec2Messages": ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES,
}


class Network(Construct):
    """The VPC: three subnet tiers over ``max_azs`` AZs, flow logs, S3 and interface endpoints.

    Databases go in the isolated tier (no route to the internet at all); the brokers and the
    compute that must call AWS APIs go in the private tier and reach them through the
    endpoints, with the NAT gateways only for what has no endpoint.
    """

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
                ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                ),
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20
                ),
                ec2.SubnetConfiguration(
                    name="isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                ),
            ],
            restrict_default_security_group=True,
        )

        # Flow logs so rejected traffic to the database and brokers can be investigated.
        flow_log_group = log_group(
            self, "FlowLogs", retention=logs.RetentionDays[config.flow_log_retention]
        )
        self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )

        # S3 gateway endpoint: change files, lake tables and plugins never cross the NAT.
        self.vpc.add_gateway_endpoint("S3Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3)

        # Interface endpoints in the private tier, open to HTTPS from inside the VPC only.
        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="HTTPS from inside the VPC to the interface endpoints",
            allow_all_outbound=False,
        )
        self.endpoint_security_group.add_ingress_rule(
            ec2.Peer.ipv4(config.cidr), ec2.Port.tcp(443), "HTTPS from the VPC"
        )
        self.interface_endpoints: dict[str, ec2.InterfaceVpcEndpoint] = {
            name: self.vpc.add_interface_endpoint(
                f"{name}Endpoint",
                service=service,
                private_dns_enabled=True,
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                security_groups=[self.endpoint_security_group],
                open=False,
            )
            for name, service in INTERFACE_ENDPOINTS.items()
        }


def existing_vpc(scope: Construct, construct_id: str, *, config: ExistingNetwork) -> ec2.IVpc:
    """The user's VPC from its ids alone: no context lookup (synth stays offline), and only the
    private subnets given, which every placement here selects as PRIVATE_WITH_EGRESS."""
    return ec2.Vpc.from_vpc_attributes(
        scope,
        construct_id,
        vpc_id=config.vpc_id,
        availability_zones=config.availability_zones,
        private_subnet_ids=config.private_subnet_ids,
    )
