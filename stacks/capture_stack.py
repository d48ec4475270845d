"""Capture: MSK and MSK Connect (Debezium source, S3 sink) writing change files to the lake."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdclake.config import EnvironmentConfig
from stacks.database_stack import DatabaseStack
from stacks.lake_stack import LakeStack


class CaptureStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        vpc: ec2.IVpc,
        database: DatabaseStack,
        lake: LakeStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
