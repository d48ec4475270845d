"""Helpers of the replication bootstrap tests: the server settings Aurora's logical replication
turns on, the application's schema, one scratch database per test, Lambda's context, and
what a pgoutput slot reads."""

from __future__ import annotations

import importlib.util
import struct
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pg8000.native import Connection, identifier

from lambdas.bootstrap import handler
from lambdas.bootstrap.sql import BootstrapSpec, TableSpec

SERVER_SETTINGS = """
# cdc-lake bootstrap tests: what Aurora's rds.logical_replication=1 turns on.
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
"""
# Replication connections match no database "all": pg_recvlogical stands in for a capture's task.
HBA = "local all postgres trust\nlocal replication postgres trust\nlocal all all scram-sha-256\n"
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


@dataclass(frozen=True)
class FakeContext:
    """What Powertools' ``inject_lambda_context`` reads of Lambda's context object."""

    function_name: str = "bootstrap"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:bootstrap"
    aws_request_id: str = "req-1"


CONTEXT = FakeContext()


def load_handler(name: str) -> ModuleType:
    """A fresh copy of the handler module, reading the environment as a new Lambda does."""
    spec = importlib.util.spec_from_file_location(name, handler.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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

    def slot_reader(self, slot: str) -> SlotReader:
        return SlotReader(self.owner, self.socket_path, self.name, self.publication, slot)

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


@dataclass(frozen=True)
class TlsServer:
    """A PostgreSQL server on 127.0.0.1 that speaks TLS only, with a certificate of its own CA."""

    port: int
    socket: str  # its unix socket, where the superuser is trusted (to set databases up)
    ca_bundle: str  # the CA that signed the server's certificate, as RDS_CA_BUNDLE
    password: str  # the superuser's (every login over TCP asks for a password)
    proc: Any  # cdclake.local.processes.Tracked


def self_signed_ca(common_name: str) -> tuple[Any, Any]:
    """A self-made CA valid for a day: (certificate, private key), cryptography's objects."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def tls_files(folder: Path) -> tuple[Path, Path, Path]:
    """A CA certificate and a server certificate (127.0.0.1, localhost) it signed, and the
    server's key: (ca, certificate, key)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca, ca_key = self_signed_ca("cdc-lake test TLS CA")
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = (folder / "ca.pem", folder / "server.crt", folder / "server.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def start_tls_server(folder: Path) -> TlsServer:
    """Debian's PostgreSQL in ``folder`` (world-traversable: it runs as ``postgres`` under
    root), TLS-only over TCP, as Aurora with ``rds.force_ssl``; stop ``proc`` when done."""
    import os
    import shutil
    import subprocess

    from cdclake.local import processes
    from cdclake.local.postgres import postgres_bin_dir

    bindir = postgres_bin_dir()
    user = "postgres" if os.geteuid() == 0 else None
    data, sockets = folder / "data", folder / "run"
    sockets.mkdir(parents=True)
    ca, cert, key = tls_files(folder)
    key.chmod(0o600)
    password = uuid.uuid4().hex
    (folder / "pw").write_text(password)
    if user is not None:
        for path in (folder, sockets, cert, key, folder / "pw"):
            shutil.chown(path, user=user, group=user)
    made = subprocess.run(
        [
            *(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-E", "UTF8"),
            *("--auth-local=trust", "--auth-host=scram-sha-256", "--no-instructions"),
            f"--pwfile={folder / 'pw'}",
        ],
        user=user,
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    # Over TCP, TLS or nothing: a client that does not ask for TLS is refused.
    (data / "pg_hba.conf").write_text(
        "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n"
    )
    port = processes.free_port()
    settings = {
        "listen_addresses": "127.0.0.1",
        "port": str(port),
        "unix_socket_directories": str(sockets),
        "ssl": "on",
        "wal_level": "logical",
        "ssl_cert_file": str(cert),
        "ssl_key_file": str(key),
        "fsync": "off",
    }
    argv = [str(bindir / "postgres"), "-D", str(data)]
    for name, value in settings.items():
        argv += ["-c", f"{name}={value}"]
    proc = processes.spawn("tls-postgres", argv, log=folder / "postgres.log", user=user)
    socket = str(sockets / f".s.PGSQL.{port}")

    def accepts_connections() -> bool:  # a refusal raises: wait_for tries again
        Connection(user="postgres", unix_sock=socket, database="postgres").close()
        return True

    processes.wait_for("PostgreSQL with TLS", accepts_connections, timeout=60, proc=proc)
    return TlsServer(port=port, socket=socket, ca_bundle=str(ca), password=password, proc=proc)


def changes(conn: Connection, slot: str, publication: str) -> list[tuple[str, str]]:
    """Consume a pgoutput slot: (operation, schema.table) for each I/U/D/T message."""
    rows = conn.run(
        "SELECT data FROM pg_logical_slot_get_binary_changes("
        ":slot, NULL, NULL, 'proto_version', '1', 'publication_names', :pub)",
        slot=slot,
        pub=publication,
    )
    relations: dict[int, str] = {}
    seen: list[tuple[str, str]] = []
    for (data,) in rows:
        kind = chr(data[0])
        if kind == "R":
            (oid,) = struct.unpack_from(">I", data, 1)
            namespace, relname = data[5:].split(b"\0")[:2]
            relations[oid] = f"{namespace.decode()}.{relname.decode()}"
        elif kind in "IUD":
            (oid,) = struct.unpack_from(">I", data, 1)
            seen.append((kind, relations[oid]))
            if kind == "U" and chr(data[5]) == "O":
                seen.append(("old-row", relations[oid]))
        elif kind == "T":
            (count,) = struct.unpack_from(">I", data, 1)
            for i in range(count):
                (oid,) = struct.unpack_from(">I", data, 6 + 4 * i)
                seen.append(("T", relations[oid]))
    return seen


class SlotReader:
    """A capture's task as PostgreSQL sees it: ``pg_recvlogical`` streaming a pgoutput slot
    of ``database`` over the server's unix socket (the slot is created if missing);
    ``start``/``stop`` are a restart. ``owner``: a superuser's connection to ``database``."""

    def __init__(
        self, owner: Connection, socket_path: str, database: str, publication: str, slot: str
    ) -> None:
        self.owner, self.socket_path, self.database = owner, socket_path, database
        self.publication, self.slot = publication, slot
        self.proc: subprocess.Popen[bytes] | None = None
        if not owner.run("SELECT 1 FROM pg_replication_slots WHERE slot_name = :s", s=slot):
            owner.run("SELECT pg_create_logical_replication_slot(:s, 'pgoutput')", s=slot)

    def holder(self) -> int | None:
        rows = self.owner.run(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = :s", s=self.slot
        )
        return rows[0][0] if rows else None

    def start(self) -> None:
        """Start streaming; returns once the slot is read (by a backend of this reader)."""
        folder, port = self.socket_path.rsplit("/.s.PGSQL.", 1)
        dsn = f"host={folder} port={port} user=postgres dbname={self.database}"
        stream = ["--slot", self.slot, "--start", "-f", "/dev/null", "-o", "proto_version=1"]
        self.proc = subprocess.Popen(
            ["pg_recvlogical", "-d", dsn, *stream, "-o", f"publication_names={self.publication}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            if self.holder() is not None:
                return
            assert self.proc.poll() is None, "pg_recvlogical exited"
            time.sleep(0.05)
        raise AssertionError(f"pg_recvlogical never took slot {self.slot}")

    def stop(self) -> None:
        """Stop streaming; returns once the slot is free."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None
        for _ in range(200):
            if self.holder() is None:
                return
            time.sleep(0.05)
        raise AssertionError(f"slot {self.slot} still read after pg_recvlogical stopped")
