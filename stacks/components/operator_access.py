"""An SSM-managed host operators use to reach private resources: no SSH key, no VPN."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from stacks.components.nag import acknowledge


class OperatorAccess(Construct):
    """A tiny instance in the private subnets, reachable only through SSM Session Manager.

    It has no key pair and no inbound rules; operators run
    ``aws ssm start-session --document-name AWS-StartPortForwardingSessionToRemoteHost`` to
    forward a local port to the database (see docs/database.md). Stateless: replace at will.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)

        #: Security group of the host; database ingress from it is opened by the stack.
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="SSM operator access host (no inbound rules)",
            allow_all_outbound=True,
        )
        # The host: Graviton nano, IMDSv2 only, encrypted root volume, SSM agent preinstalled.
        self.instance = ec2.Instance(
            self,
            "Host",
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            instance_type=ec2.InstanceType("t4g.nano"),
            machine_image=ec2.MachineImage.latest_amazon_linux2023(
                cpu_type=ec2.AmazonLinuxCpuType.ARM_64
            ),
            security_group=self.security_group,
            ssm_session_permissions=True,
            require_imdsv2=True,
            detailed_monitoring=True,
            block_devices=[
                ec2.BlockDevice(
                    device_name="/dev/xvda",
                    volume=ec2.BlockDeviceVolume.ebs(8, encrypted=True),
                )
            ],
        )
        acknowledge(
            self.instance,
            {
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                "AmazonSSMManagedInstanceCore]": "The AWS-managed policy Session Manager "
                "documents for managed instances; the host needs nothing else",
                "AwsSolutions-EC29": "Stateless access host: replacing it loses nothing, and "
                "termination protection would block deleting the stack",
            },
        )
