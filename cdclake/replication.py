"""What the replication bootstrap makes true, from the environment config.

The Aurora custom resource (stacks/components/replication_bootstrap.py) and the local stack
(cdclake/local/stack.py) both build their spec here, without the CDK, so the local database is
prepared by exactly the spec production gets.
"""

from __future__ import annotations

from cdclake.config import EnvironmentConfig
from lambdas.bootstrap.sql import BootstrapSpec, TableSpec


def bootstrap_spec(config: EnvironmentConfig) -> BootstrapSpec:
    """All configured tables (lake and fanout), the CDC tables, both captures' slots."""
    replication = config.database.replication
    return BootstrapSpec(
        replication_user=replication.user,
        publication=replication.publication,
        heartbeat_table=replication.heartbeat_table,
        signal_table=replication.signal_table,
        tables=tuple(TableSpec(t.name, t.replica_identity) for t in config.tables),
        slots=(replication.slot, replication.fanout_slot),
        drop_objects_on_delete=replication.drop_objects_on_delete,
    )
