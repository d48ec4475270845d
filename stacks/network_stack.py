"""Network: the VPC every other stack places its private resources in."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from environment.config import EnvironmentConfig
from stacks.components.network import Network


class NetworkStack(cdk.Stack):
    """One VPC per environment; other stacks receive ``vpc`` and create their own groups."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.network = Network(self, "Network", config=config.network)
        #: The environment's VPC (Amazon VPC): public, private-with-egress and isolated subnets.
        self.vpc = self.network.vpc

        cdk.CfnOutput(self, "VpcId", value=self.vpc.vpc_id, description="VPC of the environment")
