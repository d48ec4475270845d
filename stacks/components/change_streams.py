"""One Kinesis stream per fan-out table, named like its topic: ``<prefix>.<schema>.<table>``."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from cdclake.config import EnvironmentConfig
from connectors.configs import topic_name
from stacks.components.nag import acknowledge


class ChangeStreams(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, key: kms.IKey
    ) -> None:
        super().__init__(scope, construct_id)
        on_demand = config.kinesis.mode == "ON_DEMAND"
        # Debezium Server's Kinesis sink writes to the stream named after the topic.
        self.streams: dict[str, kinesis.Stream] = {
            table.name: kinesis.Stream(
                self,
                table.name.replace(".", "-").replace("_", "-"),
                stream_name=topic_name(config, table),
                stream_mode=(
                    kinesis.StreamMode.ON_DEMAND if on_demand else kinesis.StreamMode.PROVISIONED
                ),
                shard_count=None if on_demand else config.kinesis.shards,
                retention_period=cdk.Duration.hours(config.kinesis.retention_hours),
                encryption=kinesis.StreamEncryption.KMS,
                encryption_key=key,
            )
            for table in config.fanout_tables
        }
        for stream in self.streams.values():
            acknowledge(
                stream,
                {
                    "AwsSolutions-KDS3": (
                        "encrypted with this stack's customer-managed key instead of aws/kinesis"
                    )
                },
            )
