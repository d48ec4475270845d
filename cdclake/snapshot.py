"""``cdclake snapshot --env ENV --table SCHEMA.TABLE``: re-read a table through Debezium.

Inserts an ``execute-snapshot`` signal (``type: incremental``) into the signal table of each
capture that carries the table (``lake``: the MSK Connect source,
``database.replication.signal_table``; ``fanout``: Debezium Server,
``database.replication.fanout_signal_table``), or only of the one ``--capture`` names. That
capture then reads the table in chunks while streaming continues; the rows arrive as
``op: r`` events, which the merge orders among the streamed changes (docs/merge-job.md) and
the fan-out delivers like any change. The merge is idempotent, so re-reading rows the lake
already holds changes nothing. One JSON line per signal is printed.

Locally the stack's database is used. Elsewhere a DSN reaches the database through the
operator access path (an SSM port forward, docs/database.md); the password comes from a
Secrets Manager secret or ``PGPASSWORD`` and is never printed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, get_args
from urllib.parse import unquote, urlparse

import typer
from pg8000.native import Connection
from rich.console import Console

from cdclake.errors import fail, one_line

if TYPE_CHECKING:
    from environment.config import EnvironmentConfig

console = Console(stderr=True, soft_wrap=True)


# How a command reaches the database off the local stack (cdclake snapshot, cdclake rebuild).
DsnOption = Annotated[
    str | None,
    typer.Option(help="postgresql://USER@HOST:PORT/DATABASE (not local): e.g. an SSM port forward"),
]
SecretIdOption = Annotated[
    str | None,
    typer.Option(help="Secrets Manager secret with the password (else $PGPASSWORD)"),
]
NoSslOption = Annotated[bool, typer.Option("--no-ssl", help="plain TCP (Aurora forces TLS)")]


def send_signal(
    conn: Connection,
    *,
    signal_tables: list[str],
    publication: str,
    table: str,
    signal_id: str | None = None,
) -> list[str]:
    """Signal an incremental snapshot of ``table`` in each signal table; returns the ids
    (``signal_id`` for one signal table, chosen beforehand: a rebuild records it first).

    A table outside the publication is refused, with the fix (``require_published``).
    """
    from lambdas.bootstrap.sql import require_published, signal_incremental_snapshot

    if signal_id is not None and len(signal_tables) != 1:
        raise ValueError("one signal id names one signal: give one signal table with it")
    require_published(conn, publication, table)
    return [signal_incremental_snapshot(conn, name, [table], signal_id) for name in signal_tables]


def dsn_connection(dsn: str, *, password: str | None, ssl: bool) -> Connection:
    """A connection from ``postgresql://user@host:port/database``; the password is separate."""
    parsed = urlparse(dsn)
    if parsed.scheme not in ("postgresql", "postgres") or not parsed.hostname:
        raise ValueError(f"--dsn must look like postgresql://user@host:port/database, got {dsn!r}")
    if parsed.password:
        raise ValueError("--dsn holds a password: use PGPASSWORD or --secret-id instead")
    if not parsed.username:
        raise ValueError("--dsn names no user (postgresql://USER@host:port/database)")
    return Connection(
        user=unquote(parsed.username),
        password=password,
        host=parsed.hostname,
        port=parsed.port or 5432,
        database=parsed.path.lstrip("/") or "postgres",
        ssl_context=True if ssl else None,
    )


def secret_credentials(secret_id: str, region: str) -> dict[str, Any]:
    """The JSON of an RDS-style secret (username, password, …)."""
    import boto3

    client = boto3.client("secretsmanager", region_name=region)
    value: dict[str, Any] = json.loads(client.get_secret_value(SecretId=secret_id)["SecretString"])
    if "password" not in value:
        raise ValueError(f"secret {secret_id} holds no 'password' field")
    return value


def snapshot(
    env: Annotated[str, typer.Option("--env", help="environment: config/<env>.yaml")],
    table: Annotated[str, typer.Option("--table", help="SCHEMA.TABLE as in config")],
    dsn: DsnOption = None,
    secret_id: SecretIdOption = None,
    no_ssl: NoSslOption = False,
    capture: Annotated[
        str | None,
        typer.Option(
            help="only this capture: lake (MSK Connect) or fanout (Debezium Server); "
            "default every capture that carries the table"
        ),
    ] = None,
) -> None:
    """Re-snapshot one table: Debezium's incremental snapshot, through the signal table."""
    from environment.config import load_config

    try:  # a ConfigError is the error boundary's (errors.describe)
        config = load_config(env)
        signal_tables = signal_tables_for(config, table, capture)
    except KeyError as exc:
        fail(str(exc.args[0]), 2)
    except ValueError as exc:
        fail(str(exc), 2)
    with (
        database_errors(),
        database_connection(config, dsn=dsn, secret_id=secret_id, no_ssl=no_ssl) as conn,
    ):
        signal_ids = _send(conn, config, table, signal_tables)
    for (name, signal_table), signal_id in zip(signal_tables.items(), signal_ids, strict=True):
        print(
            json.dumps(
                {
                    "table": table,
                    "capture": name,
                    "signal_id": signal_id,
                    "signal_table": signal_table,
                    "type": "incremental",
                }
            )
        )


@contextmanager
def database_connection(
    config: EnvironmentConfig, *, dsn: str | None, secret_id: str | None, no_ssl: bool
) -> Iterator[Connection]:
    """The environment's database: locally the stack's (unless ``dsn``), elsewhere ``dsn``
    with the password from ``secret_id`` or ``PGPASSWORD``. Exits 2 without a DSN off the
    local stack, 1 when the stack is not running."""
    if config.env == "local" and dsn is None:
        from cdclake.local.lake import StackNotRunning, running_status
        from cdclake.local.stack import LocalStack

        try:
            running_status(config.env)
        except StackNotRunning as exc:
            fail(str(exc))
        with LocalStack(env=config.env).connect() as conn:
            yield conn
        return
    if dsn is None:
        fail(
            f"--env {config.env}: give --dsn (see docs/operations.md, "
            "Runbook: replication slot lost or dropped)",
            2,
        )
    assert dsn is not None
    password = os.environ.get("PGPASSWORD")
    if secret_id is not None:
        password = str(secret_credentials(secret_id, config.region)["password"])
    conn = dsn_connection(dsn, password=password, ssl=not no_ssl)
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def database_errors() -> Iterator[None]:
    """Exit 1 with what went wrong reaching the database in one line, never the password: a
    refusal of ours (LookupError, ValueError), or pg8000's and boto3's errors."""
    from cdclake.errors import describe

    try:
        yield
    except typer.Exit:
        raise
    except (LookupError, ValueError) as exc:
        fail(str(exc))
    except Exception as exc:
        described = describe(exc)
        if described is None:
            fail(f"{type(exc).__name__}: {one_line(str(exc), 300)}")
        fail(*described)


def signal_tables_for(config: EnvironmentConfig, table: str, capture: str | None) -> dict[str, str]:
    """``{capture: signal table}`` to signal for ``table``: every capture that carries it, or
    the one named, which must carry it (KeyError: not configured; ValueError: bad capture)."""
    replication = config.database.replication
    carried: dict[str, str] = {
        name: signal_table
        for name, signal_table in replication.signal_tables_of(config.table(table)).items()
    }
    if capture is None:
        return carried
    from environment.fields import Capture

    captures = get_args(Capture)
    if capture not in captures:
        raise ValueError(f"--capture {capture}: choose one of {', '.join(captures)}")
    if capture not in carried:
        raise ValueError(
            f"--capture {capture}: {table} has {capture}: false in {config.env}; "
            f"it is captured for {', '.join(carried)}"
        )
    return {capture: carried[capture]}


def _send(
    conn: Connection, config: EnvironmentConfig, table: str, signal_tables: dict[str, str]
) -> list[str]:
    return send_signal(
        conn,
        signal_tables=list(signal_tables.values()),
        publication=config.database.replication.publication,
        table=table,
    )
