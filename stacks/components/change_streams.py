"""One Kinesis stream per fan-out table, named from config (:func:`stream_name`).

The streams are deleted with their stack, and a table's stream when the table leaves the
fan-out: a stream holds changes in transit for ``kinesis.retention_hours``, which the fan-out
function has already put on the bus (and its archive) or in its failed-records queue, both kept
where the environment keeps its data; a retained stream bills by the hour for nothing. The name
is fixed by config so the operations stack draws a stream without importing it: an import would
block the deploy that removes its table ("Export ... cannot be updated as it is in use"), and
a stream that is not retained frees its name when it goes. Debezium Server learns each name
through its topic routing (see ``DebeziumServer``).
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from environment.config import KinesisConfig
from environment.names import resource_name
from environment.tables import TableConfig
from stacks.components.nag import acknowledge


def stream_name(prefix: str, table: str) -> str:
    """The stream of the fan-out table ``table`` (``schema.table``)."""
    return resource_name(prefix, table)


class ChangeStreams(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: KinesisConfig,
        prefix: str,
        tables: Sequence[TableConfig],
        encryption_key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        on_demand = config.mode == "ON_DEMAND"
        #: Stream of each fan-out table, by table name (``schema.table``).
        self.streams: dict[str, kinesis.Stream] = {
            table.name: kinesis.Stream(
                self,
                table.name.replace(".", "-").replace("_", "-"),
                stream_name=stream_name(prefix, table.name),
                stream_mode=(
                    kinesis.StreamMode.ON_DEMAND if on_demand else kinesis.StreamMode.PROVISIONED
                ),
                shard_count=None if on_demand else config.shards,
                retention_period=cdk.Duration.hours(config.retention_hours),
                encryption=kinesis.StreamEncryption.KMS,
                encryption_key=encryption_key,
                removal_policy=cdk.RemovalPolicy.DESTROY,
            )
            for table in tables
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
