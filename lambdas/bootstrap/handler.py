"""CDK Provider-framework handler for the replication bootstrap custom resource.

``on_event`` dispatches to plain ``create``/``update``/``delete`` functions, which reach the
database through ``read_secret`` and ``connect``. The SQL lives in :mod:`sql`.

Resource properties: ``Spec`` (JSON of :class:`sql.BootstrapSpec`), ``Database``,
``MasterSecretArn`` and ``ReplicationSecretArn``, and for a cluster the stack did not create
``Host`` and ``Port`` (its master secret, one RDS manages for instance, may hold only the
username and password). Passwords are read from Secrets Manager at run time and never logged
or returned.

A direct invocation with ``{"RequestType": "Signal", "Table": …, "SignalId": …}`` signals a
rebuild's incremental snapshot of one lake table (:func:`signal_rebuild`): the table's Glue
run in rebuild mode asks for it, having no route to the database.

A direct invocation with ``{"RequestType": "Reconcile"}`` re-runs the bootstrap with the
properties in the ``BOOTSTRAP_PROPERTIES`` environment variable, e.g. after the application's
migrations created a table the first run reported as missing; a schedule does the same hourly.
pgoutput never publishes rows written before a table joined the publication, so a Reconcile
that adds tables also signals an incremental snapshot of them, to the signal table of each
capture that carries them (lake, fanout). Debezium 2.7 skips a snapshot of a table it holds no
schema for, and a running task learns a table created after it started only from the table's
first streamed change: so the Reconcile first restarts each capture carrying a joining table
(``CAPTURES``: the MSK Connect connector by its fixed name, RestartConnector; Debezium Server's
ECS service, a new deployment), waits until a task started since reads the capture's slot (it
loaded the tables' schemas on the way), and only then lets the tables join and signals them.
A capture not restarted in time fails the run before anything joined: Lambda retries it, then
keeps it in the dead-letter queue, whose alarm pages, and the next run tries again.
Every run publishes ``MissingTables`` (namespace ``CdcLake``, dimension ``Environment`` =
``METRICS_ENVIRONMENT``, as the dispatcher's): the configured tables the database does not have
yet, which therefore are not captured.

Logs are Powertools JSON lines (service ``POWERTOOLS_SERVICE_NAME``, set by the stack), with
what a run found and did as fields; never the event, a password or a connection string.

TLS to Aurora is verified against the RDS CA bundle the stack ships in a layer
(``RDS_CA_BUNDLE``); only an environment that opts out (``database.tls_verify: false``)
connects without verifying the server.

The same function serves ``Custom::SnapshotSignal`` in the capture stack. It is updated after
the connectors, so when a deploy adds lake tables, Debezium has restarted with them in its
include list (and loaded their schemas) before the signal asks it to snapshot their rows.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Callable, Sequence
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pg8000.native import Connection, DatabaseError, InterfaceError

from lambdas.bootstrap.sql import (
    BootstrapSpec,
    await_new_slot_holders,
    bootstrap,
    drop_retired_slots,
    joining_tables,
    publication_tables,
    require_published,
    signal_incremental_snapshot,
    signal_joined_tables,
    slot_holders,
    teardown,
)

logger = Logger()
# No service dimension: alarms match exactly {Environment}. An explicit empty service keeps
# POWERTOOLS_SERVICE_NAME (the logger's) from adding one.
metrics = Metrics(namespace="CdcLake", service="")
SNAPSHOT_SIGNAL = "Custom::SnapshotSignal"
# How long a Reconcile waits for restarted captures to read their slots again: MSK Connect's
# restart and a new ECS task each take minutes; the function's timeout leaves room after it.
RESTART_WAIT_SECONDS = 600.0


def read_secret(arn: str) -> dict[str, Any]:
    """The AWSCURRENT JSON of a Secrets Manager secret."""
    import boto3  # in the Lambda runtime; imported lazily so tests need no AWS config

    value = boto3.client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"]
    return dict(json.loads(value))


def tls_context() -> ssl.SSLContext:
    """TLS to Aurora, verified against the RDS CA bundle (``RDS_CA_BUNDLE``; the RDS CAs are
    not in the public trust store), the host name checked against the certificate.

    Without a bundle only an explicit opt-out (``DATABASE_TLS_VERIFY=false``, from
    ``database.tls_verify: false``) encrypts without verifying the server.
    """
    bundle = os.environ.get("RDS_CA_BUNDLE")
    if bundle:
        return ssl.create_default_context(cafile=bundle)
    if os.environ.get("DATABASE_TLS_VERIFY") == "false":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    raise RuntimeError("RDS_CA_BUNDLE is not set and database.tls_verify is not false")


def master_secret(props: dict[str, Any]) -> dict[str, Any]:
    """The master user's credentials, at ``Host``:``Port`` where the properties give them
    (an existing cluster's endpoint), else at the secret's own ``host`` and ``port``."""
    secret = read_secret(props["MasterSecretArn"])
    if "Host" in props:
        secret = {**secret, "host": props["Host"], "port": props["Port"]}
    return secret


def connect(secret: dict[str, Any], database: str) -> Connection:
    """Open a TLS connection with the credentials and endpoint of a secret."""
    return Connection(
        user=secret["username"],
        password=secret["password"],
        host=secret["host"],
        port=int(secret.get("port", 5432)),
        database=database,
        ssl_context=tls_context(),
        timeout=30,
    )


def _can_login(secret: dict[str, Any], database: str) -> bool:
    try:
        connect(secret, database).close()
    except (InterfaceError, DatabaseError) as exc:
        # The type only: the driver's message is not vetted for what it quotes.
        logger.info(
            "replication user cannot log in with its secret yet",
            extra={"error": type(exc).__name__},
        )
        return False
    return True


class CapturesNotRestarted(RuntimeError):
    """A capture carrying joining tables was not restarted; nothing joined the publication."""


def captures_of(spec: BootstrapSpec, tables: Sequence[str]) -> list[dict[str, str]]:
    """The captures (``CAPTURES``) whose signal tables carry any of ``tables``."""
    carried = {s for t in spec.tables if t.name in tables for s in t.signal_tables}
    captures: list[dict[str, str]] = json.loads(os.environ.get("CAPTURES", "[]"))
    return [c for c in captures if c["signal_table"] in carried]


def restart_captures(captures: Sequence[dict[str, str]]) -> None:
    """Restart each MSK Connect connector (found by its fixed name: its ARN changes when it is
    replaced) with its tasks, and give each ECS service a new deployment."""
    import boto3  # in the Lambda runtime; imported lazily so tests need no AWS config

    for capture in captures:
        if "connector" in capture:
            client = boto3.client("kafkaconnect")
            name = capture["connector"]
            arns = [
                c["connectorArn"]
                for page in client.get_paginator("list_connectors").paginate(
                    connectorNamePrefix=name
                )
                for c in page["connectors"]
                if c["connectorName"] == name and c["connectorState"] != "DELETING"
            ]
            if not arns:
                raise CapturesNotRestarted(f"connector {name} not found")
            client.restart_connector(connectorArn=arns[0])
        else:
            boto3.client("ecs").update_service(
                cluster=capture["cluster"], service=capture["service"], forceNewDeployment=True
            )
        logger.info("capture restarted for joining tables", extra={"slot": capture["slot"]})


def _restart_for_joining(
    conn: Connection, spec: BootstrapSpec, restart: Callable[[Sequence[dict[str, str]]], None]
) -> list[str]:
    """Restart the captures of the tables that would join now and wait until a new task reads
    each one's slot; the tables, which may then join. Raises when a capture was not restarted.

    The order matters: the old task streams until the new one takes the slot, and a signal it
    read would be skipped (no schema) and committed past. So the signal comes after the new task
    holds the slot, and the tables join after it loaded their schemas (it reads them from the
    catalog, publication or not), so their first change already finds one.
    """
    joining = joining_tables(conn, spec)
    captures = captures_of(spec, joining)
    if not captures:
        return joining
    holders = slot_holders(conn, [c["slot"] for c in captures])
    restart(captures)
    stale = await_new_slot_holders(conn, holders, timeout=RESTART_WAIT_SECONDS)
    if stale:
        raise CapturesNotRestarted(
            f"no restarted task reads slot {', '.join(stale)} after {RESTART_WAIT_SECONDS:.0f}s;"
            f" {', '.join(joining)} not joined, the next run tries again"
        )
    return joining


def _physical_id(props: dict[str, Any]) -> str:
    return f"{props['Database']}/{json.loads(props['Spec'])['publication']}"


def _run(
    props: dict[str, Any],
    *,
    removed_tables: list[str],
    signal_joined: bool = False,
    joinable: list[str] | None = None,
) -> dict[str, Any]:
    """The bootstrap; with ``signal_joined`` (a Reconcile), captures restarted first."""
    spec = BootstrapSpec.from_dict(json.loads(props["Spec"]))
    database = props["Database"]
    master = master_secret(props)
    replication = read_secret(props["ReplicationSecretArn"])
    login = {**master, "username": spec.replication_user, "password": replication["password"]}
    works = _can_login(login, database)
    conn = connect(master, database)
    try:
        if signal_joined:
            joinable = _restart_for_joining(conn, spec, restart_captures)
        result = bootstrap(
            conn,
            spec,
            password=replication["password"],
            password_works=works,
            removed_tables=removed_tables,
            joinable=joinable,
        )
        signals = (
            signal_joined_tables(conn, spec, result.joined_tables)
            if signal_joined and result.joined_tables
            else {}
        )
        retired = drop_retired_slots(conn, spec)
    finally:
        conn.close()
    if retired:
        logger.info("slots of removed captures dropped", extra={"slots": retired})
    if signals:
        logger.info(
            "incremental snapshot signalled",
            extra={"tables": result.joined_tables, "signals": signals},
        )
    logger.info(
        "bootstrap done",
        extra={
            "role_created": result.role_created,
            "password_set": result.password_set,
            "publication_changed": result.publication_changed,
            "published": result.published_tables,
            "missing": result.missing_tables,
            "replica_identity_changed": result.replica_identity_changed,
        },
    )
    metrics.add_dimension(name="Environment", value=os.environ["METRICS_ENVIRONMENT"])
    metrics.add_metric(
        name="MissingTables", unit=MetricUnit.Count, value=len(result.missing_tables)
    )
    metrics.flush_metrics()
    return {
        "PhysicalResourceId": _physical_id(props),
        "Data": {
            "Publication": spec.publication,
            "PublishedTables": ",".join(result.published_tables),
            "MissingTables": ",".join(result.missing_tables),
            "SignalledTables": ",".join(result.joined_tables) if signals else "",
            "DroppedSlots": ",".join(retired),
        },
    }


def create(props: dict[str, Any]) -> dict[str, Any]:
    return _run(props, removed_tables=[])


def reconcile(props: dict[str, Any]) -> dict[str, Any]:
    """Same as create, and tables that joined the publication are signalled for a snapshot,
    once the captures carrying them were restarted (the module's docstring says why).

    A CloudFormation create or update does not signal: on a deploy the connectors may not yet
    include a new table (the capture stack's ``Custom::SnapshotSignal`` signals after them).
    Between deploys the connectors already include every configured table.
    """
    return _run(props, removed_tables=[], signal_joined=True)


def update(props: dict[str, Any], old_props: dict[str, Any]) -> dict[str, Any]:
    """Same as create, and SELECT is revoked on tables that left the configuration.

    Only tables this update adds, and only MSK Connect carries, may join an existing
    publication: the capture stack's ``Custom::SnapshotSignal`` signals those after the
    connectors restarted with them, and nothing signals the fan-out's capture on a deploy. The
    others (a configured table created since the last Reconcile, a fan-out table) wait for the
    next Reconcile, which restarts their captures before signalling them; joined here, nothing
    would signal them.
    """
    new = [t["name"] for t in json.loads(props["Spec"])["tables"]]
    old = [t["name"] for t in json.loads(old_props.get("Spec", '{"tables": []}'))["tables"]]
    removed = [name for name in old if name not in new]
    spec = BootstrapSpec.from_dict(json.loads(props["Spec"]))
    captures: list[dict[str, str]] = json.loads(os.environ.get("CAPTURES", "[]"))
    deploy_signalled = {c["signal_table"] for c in captures if "connector" in c}
    added = [
        t.name
        for t in spec.tables
        if t.name not in old and set(t.signal_tables) <= deploy_signalled
    ]
    return _run(props, removed_tables=removed, joinable=added)


def delete(props: dict[str, Any], physical_id: str) -> dict[str, Any]:
    """Keep data objects unless the spec says ``drop_objects_on_delete``."""
    spec = BootstrapSpec.from_dict(json.loads(props["Spec"]))
    if not spec.drop_objects_on_delete:
        logger.info("delete: keeping publication, CDC tables and role (drop_objects_on_delete off)")
        return {"PhysicalResourceId": physical_id}
    conn = connect(master_secret(props), props["Database"])
    try:
        dropped = teardown(conn, spec)
    finally:
        conn.close()
    logger.info("delete: dropped", extra={"dropped": dropped})
    return {"PhysicalResourceId": physical_id}


def signal_new_tables(props: dict[str, Any], old_props: dict[str, Any]) -> dict[str, Any]:
    """Signal an incremental snapshot of the lake tables this update added and the publication
    holds: rows written before they joined were never streamed. Tables still missing from the
    database are left to the MissingTables alarm and the runbook (docs/operations.md)."""
    added = [t for t in json.loads(props["Tables"]) if t not in json.loads(old_props["Tables"])]
    joined: list[str] = []
    if added:
        conn = connect(master_secret(props), props["Database"])
        try:
            published = publication_tables(conn, props["Publication"]) or set()
            joined = [t for t in added if t in published]
            if joined:
                signal_id = signal_incremental_snapshot(conn, props["SignalTable"], joined)
                logger.info(
                    "incremental snapshot signalled",
                    extra={"signal_id": signal_id, "tables": joined},
                )
        finally:
            conn.close()
    not_published = [t for t in added if t not in joined]
    if not_published:
        logger.warning(
            "not in the publication yet, so not snapshotted", extra={"tables": not_published}
        )
    return {
        "PhysicalResourceId": f"{props['Database']}/snapshot-signal",
        "Data": {"SignalledTables": ",".join(joined)},
    }


def signal_rebuild(props: dict[str, Any], table: str, signal_id: str) -> dict[str, Any]:
    """A rebuild's incremental snapshot of one lake table, asked for by the table's Glue run
    (``{"RequestType": "Signal", "Table": …, "SignalId": …}``; it recorded the id first, and
    looks for that id's COMPLETED notification): one signal row with that id in the lake
    capture's signal table only (the fan-out has nothing to rebuild). The lake capture is the
    MSK Connect one (``CAPTURES``' entry with a connector)."""
    spec = BootstrapSpec.from_dict(json.loads(props["Spec"]))
    captures: list[dict[str, str]] = json.loads(os.environ.get("CAPTURES", "[]"))
    lake = next((c["signal_table"] for c in captures if "connector" in c), None)
    carried = next((t.signal_tables for t in spec.tables if t.name == table), ())
    if lake is None or lake not in carried:
        raise ValueError(f"{table} is not a table the lake captures: no snapshot signalled")
    conn = connect(master_secret(props), props["Database"])
    try:
        require_published(conn, spec.publication, table)
        signal_incremental_snapshot(conn, lake, [table], signal_id)
    finally:
        conn.close()
    logger.info("rebuild snapshot signalled", extra={"table": table, "signal_id": signal_id})
    return {"Table": table, "SignalId": signal_id}


@logger.inject_lambda_context
def on_event(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Provider-framework entry point (the framework talks to CloudFormation)."""
    request = event["RequestType"]
    # Never the event: it carries secret ARNs only, but be terse.
    logger.info("request", extra={"request_type": request})
    if event.get("ResourceType") == SNAPSHOT_SIGNAL:
        # A first deploy's initial snapshot reads every table: only updates add tables.
        if request == "Update":
            return signal_new_tables(
                event["ResourceProperties"], event.get("OldResourceProperties", {"Tables": "[]"})
            )
        physical_id = event.get("PhysicalResourceId")
        return {"PhysicalResourceId": physical_id or "snapshot-signal"}
    if request == "Create":
        return create(event["ResourceProperties"])
    if request == "Update":
        return update(event["ResourceProperties"], event.get("OldResourceProperties", {}))
    if request == "Delete":
        return delete(event["ResourceProperties"], event["PhysicalResourceId"])
    if request == "Reconcile":
        return reconcile(json.loads(os.environ["BOOTSTRAP_PROPERTIES"]))
    if request == "Signal":
        properties = json.loads(os.environ["BOOTSTRAP_PROPERTIES"])
        return signal_rebuild(properties, str(event["Table"]), str(event["SignalId"]))
    raise ValueError(f"unknown request type {request!r}")
