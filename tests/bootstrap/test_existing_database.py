"""The bootstrap against a PostgreSQL the stack did not create (issue #50): the local stack's
server, given as ``database.existing``, reached at the configured endpoint with a master
secret that holds only a username and password (as one RDS manages does)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pg8000.native import Connection, identifier

from cdclake.local.postgres import SUPERUSER
from cdclake.local.stack import LocalStack
from environment.config import EnvironmentConfig
from environment.replication import bootstrap_spec, master_endpoint
from tests.bootstrap.bootstrap_helpers import CONTEXT

pytestmark = pytest.mark.postgres

MASTER_SECRET = "arn:aws:secretsmanager:us-east-1:000000000000:secret:shop-master-AbC123"
REPLICATION_PASSWORD = "existing-Pa55word"


@dataclass(frozen=True)
class Attached:
    """The environment attached to the local server, after the bootstrap's Create."""

    config: EnvironmentConfig
    port: int
    result: dict[str, Any]

    def connect(self, user: str, password: str | None = None) -> Connection:
        return Connection(
            user=user,
            password=password,
            host="127.0.0.1",
            port=self.port,
            database=self.config.database.name,
        )


def _config(port: int, suffix: str) -> EnvironmentConfig:
    """An environment of its own names (roles and slots are the server's, shared with the
    local stack's capture) on the local server as its existing cluster."""
    return EnvironmentConfig.model_validate(
        {
            "env": "existing",
            "account": "000000000000",
            "region": "us-east-1",
            "prefix": "cdclake-existing",
            "network": {
                "existing": {
                    "vpc_id": "vpc-0a1b2c3d",
                    "availability_zones": ["us-east-1a", "us-east-1b"],
                    "private_subnet_ids": ["subnet-0a1b2c3d", "subnet-0a1b2c3e"],
                }
            },
            "database": {
                "name": f"shop_{suffix}",
                "tls_verify": False,
                "replication": {
                    "user": f"repl_{suffix}",
                    "slot": f"msk_{suffix}",
                    "fanout_slot": f"fanout_{suffix}",
                },
                "existing": {
                    "cluster_identifier": "local-postgres",
                    "endpoint": "127.0.0.1",
                    "port": port,
                    "security_group_id": "sg-0a1b2c3d",
                    "master_secret_arn": MASTER_SECRET,
                },
            },
            "tables": [{"name": "public.orders", "primary_key": ["id"]}],
        }
    )


@pytest.fixture(scope="module")
def attached(local_stack: LocalStack) -> Iterator[Attached]:
    from lambdas.bootstrap import handler

    state = local_stack.load_state()
    assert state is not None
    port = state.ports["postgres"]
    suffix = uuid.uuid4().hex[:8]
    config = _config(port, suffix)
    name, user = config.database.name, config.database.replication.user
    admin = Connection(user=SUPERUSER, host="127.0.0.1", port=port, database="postgres")
    admin.run(f"CREATE DATABASE {identifier(name)}")
    owner = Connection(user=SUPERUSER, host="127.0.0.1", port=port, database=name)
    owner.run("CREATE TABLE public.orders (id bigint PRIMARY KEY, total numeric)")
    owner.close()
    # Neither secret names a host: the endpoint comes from the config alone.
    secrets = {
        MASTER_SECRET: {"username": SUPERUSER, "password": ""},
        "replication": {"username": user, "password": REPLICATION_PASSWORD},
    }

    def plain_connect(secret: dict[str, Any], database: str) -> Connection:
        # The handler's own connect, less TLS: the local server speaks none.
        return Connection(
            user=secret["username"],
            password=secret["password"] or None,
            host=secret["host"],
            port=int(secret["port"]),
            database=database,
        )

    # The properties ReplicationBootstrap gives the custom resource, secret ARNs aside.
    props = {
        "Spec": json.dumps(bootstrap_spec(config), sort_keys=True),
        "Database": name,
        "MasterSecretArn": MASTER_SECRET,
        "ReplicationSecretArn": "replication",
        **master_endpoint(config),
    }
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("METRICS_ENVIRONMENT", "test")
            patch.setattr(handler, "read_secret", lambda arn: dict(secrets[arn]))
            patch.setattr(handler, "connect", plain_connect)
            result = handler.on_event(
                {"RequestType": "Create", "ResourceProperties": props}, CONTEXT
            )
        yield Attached(config=config, port=port, result=result)
    finally:
        admin.run(f"DROP DATABASE IF EXISTS {identifier(name)} WITH (FORCE)")
        if admin.run("SELECT 1 FROM pg_roles WHERE rolname = :r", r=user):
            admin.run(f"DROP ROLE {identifier(user)}")
        admin.close()


def test_existing_bootstrap_replication_role_logs_in_at_the_given_endpoint(
    attached: Attached,
) -> None:
    user = attached.config.database.replication.user
    conn = attached.connect(user, REPLICATION_PASSWORD)
    try:
        assert conn.run("SELECT rolreplication FROM pg_roles WHERE rolname = current_user") == [
            [True]
        ]
    finally:
        conn.close()


def test_existing_bootstrap_publication_lists_the_configured_table(attached: Attached) -> None:
    conn = attached.connect(SUPERUSER)
    try:
        rows = conn.run(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = :p",
            p=attached.config.database.replication.publication,
        )
    finally:
        conn.close()
    assert "public.orders" in {row[0] for row in rows}
