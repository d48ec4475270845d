"""CDK Provider-framework handler for the replication bootstrap custom resource.

``on_event`` dispatches to plain ``create``/``update``/``delete`` functions, which reach the
database through ``read_secret`` and ``connect``. The SQL lives in :mod:`sql`.

Resource properties: ``Spec`` (JSON of :class:`sql.BootstrapSpec`), ``Database``,
``MasterSecretArn`` and ``ReplicationSecretArn``. Passwords are read from Secrets Manager at
run time and never logged or returned.

A direct invocation with ``{"RequestType": "Reconcile"}`` re-runs the bootstrap with the
properties in the ``BOOTSTRAP_PROPERTIES`` environment variable, e.g. after the application's
migrations created a table the first run reported as missing; a schedule does the same hourly.
pgoutput never publishes rows written before a table joined the publication, so a Reconcile
that adds tables also signals an incremental snapshot of them, to the signal table of each
capture that carries them (lake, fanout).
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
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pg8000.native import Connection, DatabaseError, InterfaceError

from lambdas.bootstrap.sql import (
    BootstrapSpec,
    bootstrap,
    publication_tables,
    signal_incremental_snapshot,
    signal_joined_tables,
    teardown,
)

logger = Logger()
# No service dimension: alarms match exactly {Environment}. An explicit empty service keeps
# POWERTOOLS_SERVICE_NAME (the logger's) from adding one.
metrics = Metrics(namespace="CdcLake", service="")
SNAPSHOT_SIGNAL = "Custom::SnapshotSignal"


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


def _physical_id(props: dict[str, Any]) -> str:
    return f"{props['Database']}/{json.loads(props['Spec'])['publication']}"


def _run(
    props: dict[str, Any],
    *,
    removed_tables: list[str],
    signal_joined: bool = False,
) -> dict[str, Any]:
    spec = BootstrapSpec.from_dict(json.loads(props["Spec"]))
    database = props["Database"]
    master = read_secret(props["MasterSecretArn"])
    replication = read_secret(props["ReplicationSecretArn"])
    login = {**master, "username": spec.replication_user, "password": replication["password"]}
    works = _can_login(login, database)
    conn = connect(master, database)
    try:
        result = bootstrap(
            conn,
            spec,
            password=replication["password"],
            password_works=works,
            removed_tables=removed_tables,
        )
        signals = (
            signal_joined_tables(conn, spec, result.joined_tables)
            if signal_joined and result.joined_tables
            else {}
        )
    finally:
        conn.close()
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
        },
    }


def create(props: dict[str, Any]) -> dict[str, Any]:
    return _run(props, removed_tables=[])


def reconcile(props: dict[str, Any]) -> dict[str, Any]:
    """Same as create, and tables that joined the publication are signalled for a snapshot.

    A CloudFormation create or update does not signal: on a deploy the connectors may not yet
    include a new table (the capture stack's ``Custom::SnapshotSignal`` signals after them).
    Between deploys the connectors already include every configured table.
    """
    return _run(props, removed_tables=[], signal_joined=True)


def update(props: dict[str, Any], old_props: dict[str, Any]) -> dict[str, Any]:
    """Same as create, and SELECT is revoked on tables that left the configuration."""
    new = {t["name"] for t in json.loads(props["Spec"])["tables"]}
    old = [t["name"] for t in json.loads(old_props.get("Spec", '{"tables": []}'))["tables"]]
    removed = [name for name in old if name not in new]
    return _run(props, removed_tables=removed)


def delete(props: dict[str, Any], physical_id: str) -> dict[str, Any]:
    """Keep data objects unless the spec says ``drop_objects_on_delete``."""
    spec = BootstrapSpec.from_dict(json.loads(props["Spec"]))
    if not spec.drop_objects_on_delete:
        logger.info("delete: keeping publication, CDC tables and role (drop_objects_on_delete off)")
        return {"PhysicalResourceId": physical_id}
    conn = connect(read_secret(props["MasterSecretArn"]), props["Database"])
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
        conn = connect(read_secret(props["MasterSecretArn"]), props["Database"])
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
    raise ValueError(f"unknown request type {request!r}")
