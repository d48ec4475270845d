"""The change-event bus: KMS-encrypted, with an archive of every change for replay."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from constructs import Construct

from cdclake.config import EnvironmentConfig


class ChangeEventBus(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, key: kms.IKey
    ) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(
            self, "Bus", event_bus_name=config.resource_name("changes"), kms_key=key
        )
        # Everything the fan-out publishes, kept for replay into the same bus.
        sources = sorted({t.event_source for t in config.fanout_tables})
        self.archive = self.bus.archive(
            "Archive",
            archive_name=config.resource_name("changes"),
            description="every change event, for replay",
            event_pattern=events.EventPattern(source=sources or ["cdc"]),
            retention=cdk.Duration.days(config.fanout.archive_retention_days),
            kms_key=key,
        )
