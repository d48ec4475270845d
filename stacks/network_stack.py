"""Network: the VPC every other stack places its private resources in."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from cdclake.config import EnvironmentConfig
from stacks.components.network import Network


class NetworkStack(cdk.Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.network = Network(self, "Network", config=config.network)
        self.vpc = self.network.vpc
