"""What the replication bootstrap makes true, from the environment config.

The Aurora custom resource (stacks/components/replication_bootstrap.py) and the local stack
(cdclake/local/stack.py) both build their spec here, without the CDK, so the local database is
prepared by exactly the spec production gets. The spec is the JSON the bootstrap Lambda
receives (``lambdas.bootstrap.sql.BootstrapSpec.from_dict`` reads it): this foundation module
imports nothing of the Lambda's, whose bundle holds only its own package.
"""

from __future__ import annotations

from typing import TypedDict

from environment.config import EnvironmentConfig

# Slots (and WAL senders) beyond the captures' own: a capture being replaced (an upgrade, a
# rebuilt connector) reads while its successor starts, and an operator's pg_recvlogical or
# `pg_logical_slot_peek_changes` session takes one more.
REPLICATION_SLOT_MARGIN = 2


def replication_slots_needed(config: EnvironmentConfig) -> int:
    """Logical replication slots, and WAL senders, the environment's captures need: one per
    capture carrying tables (the lake's, the fan-out's) plus :data:`REPLICATION_SLOT_MARGIN`."""
    captures = sum(1 for tables in (config.lake_tables, config.fanout_tables) if tables)
    return captures + REPLICATION_SLOT_MARGIN


def master_endpoint(config: EnvironmentConfig) -> dict[str, str]:
    """``Host`` and ``Port`` of the bootstrap's (and the snapshot signal's) properties: an
    existing cluster's endpoint, since its master secret may hold no host (RDS-managed ones
    hold only the username and password); none for a cluster the stack creates, whose
    generated secret has both."""
    existing = config.database.existing
    if existing is None:
        return {}
    return {"Host": existing.endpoint, "Port": str(existing.port)}


class TablePayload(TypedDict):
    name: str
    replica_identity: str
    signal_tables: list[str]


class BootstrapPayload(TypedDict):
    replication_user: str
    publication: str
    heartbeat_table: str
    signal_tables: list[str]
    tables: list[TablePayload]
    slots: list[str]
    retired_slots: list[str]
    drop_objects_on_delete: bool


def bootstrap_spec(config: EnvironmentConfig) -> BootstrapPayload:
    """All configured tables (lake and fanout), the CDC tables, both captures' slots and
    signal tables, as the bootstrap's JSON spec."""
    replication = config.database.replication
    return {
        "replication_user": replication.user,
        "publication": replication.publication,
        "heartbeat_table": replication.heartbeat_table,
        "signal_tables": [replication.signal_table, replication.fanout_signal_table],
        "tables": [
            {
                "name": t.name,
                "replica_identity": t.replica_identity,
                "signal_tables": list(replication.signal_tables_of(t).values()),
            }
            for t in config.tables
        ],
        "slots": [replication.slot, replication.fanout_slot],
        # A capture with no table left is removed by its stack; its slot would outlive it.
        "retired_slots": [
            slot
            for slot, tables in (
                (replication.slot, config.lake_tables),
                (replication.fanout_slot, config.fanout_tables),
            )
            if not tables
        ],
        "drop_objects_on_delete": replication.drop_objects_on_delete,
    }
