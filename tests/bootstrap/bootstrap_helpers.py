"""Helpers of the replication bootstrap tests: the server settings Aurora's logical replication
turns on, the application's schema, and one scratch database per test."""

from __future__ import annotations

import uuid
from typing import Any

from pg8000.native import Connection, identifier

from lambdas.bootstrap.sql import BootstrapSpec, TableSpec

SERVER_SETTINGS = """
# cdc-lake bootstrap tests: what Aurora's rds.logical_replication=1 turns on.
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
"""
HBA = "local all postgres trust\nlocal all all scram-sha-256\n"
LAKE_SIGNAL = "cdclake.debezium_signal"
FANOUT_SIGNAL = "cdclake.debezium_signal_fanout"
LAKE = (LAKE_SIGNAL,)
FANOUT = (FANOUT_SIGNAL,)


APP_SCHEMA = """
CREATE TABLE public.customers (id bigint PRIMARY KEY, email text NOT NULL, password_hash text);
CREATE TABLE public.orders (id bigint PRIMARY KEY, customer_id bigint, order_date date,
                            amount numeric(10, 2));
CREATE TABLE public.order_lines (order_id bigint, line_no int, sku text,
                                 PRIMARY KEY (order_id, line_no));
CREATE TABLE public.audit_log (id bigserial PRIMARY KEY, message text);
"""


class Database:
    """One scratch database with the application's tables, and a role name of its own."""

    def __init__(self, socket_path: str, admin: Connection) -> None:
        self.socket_path = socket_path
        self.admin = admin
        suffix = uuid.uuid4().hex[:8]
        self.name = f"app_{suffix}"
        self.replication_user = f"repl_{suffix}"
        self.publication = "cdclake_publication"
        admin.run(f"CREATE DATABASE {identifier(self.name)}")
        self.owner = self.connect_as("postgres")
        for statement in APP_SCHEMA.strip().split(";\n"):
            self.owner.run(statement)
        self.secrets: dict[str, dict[str, Any]] = {
            "master": {"username": "postgres", "password": "", "host": "localhost"},
            "replication": {
                "username": self.replication_user,
                "password": "first-Pa55word'with\"quotes",
                "host": "localhost",
            },
        }

    def connect_as(self, user: str, password: str | None = None) -> Connection:
        return Connection(
            user=user, password=password, unix_sock=self.socket_path, database=self.name
        )

    def read_secret(self, arn: str) -> dict[str, Any]:
        return dict(self.secrets[arn])

    def connect(self, secret: dict[str, Any], database: str) -> Connection:
        assert database == self.name
        return self.connect_as(secret["username"], secret["password"] or None)

    def spec(self, tables: list[TableSpec] | None = None, **overrides: Any) -> BootstrapSpec:
        values: dict[str, Any] = {
            "replication_user": self.replication_user,
            "publication": self.publication,
            "heartbeat_table": "cdclake.heartbeat",
            "signal_tables": (LAKE_SIGNAL, FANOUT_SIGNAL),
            "tables": tuple(
                tables
                if tables is not None
                else [
                    TableSpec("public.customers", "FULL", LAKE),
                    TableSpec("public.orders", "DEFAULT", (LAKE_SIGNAL, FANOUT_SIGNAL)),
                    TableSpec("public.order_lines", "DEFAULT", LAKE),
                ]
            ),
            "slots": ("cdclake_msk", "cdclake_fanout"),
        }
        values.update(overrides)
        return BootstrapSpec(**values)

    def props(self, spec: BootstrapSpec) -> dict[str, Any]:
        import json

        return {
            "Spec": json.dumps(spec.to_dict()),
            "Database": self.name,
            "MasterSecretArn": "master",
            "ReplicationSecretArn": "replication",
        }

    def signals(self, signal_table: str) -> list[tuple[str, Any]]:
        """The (type, data) rows of a signal table, oldest first."""
        import json

        rows = self.owner.run(f"SELECT type, data FROM {signal_table} ORDER BY ctid")
        return [(kind, json.loads(data)) for kind, data in rows]

    def close(self) -> None:
        self.owner.close()
        # Slots pin the database; drop them before the database goes.
        self.admin.run(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE database = :d",
            d=self.name,
        )
        self.admin.run(f"DROP DATABASE {identifier(self.name)} WITH (FORCE)")
        if self.admin.run("SELECT 1 FROM pg_roles WHERE rolname = :r", r=self.replication_user):
            self.admin.run(f"DROP ROLE {identifier(self.replication_user)}")
