"""The replication bootstrap against a real PostgreSQL with wal_level=logical."""

from __future__ import annotations

import io
import json
import os
import ssl
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from pg8000.native import Connection, DatabaseError, InterfaceError

from lambdas.bootstrap import handler
from lambdas.bootstrap.sql import TableSpec
from tests.bootstrap.bootstrap_helpers import (
    CONTEXT,
    FANOUT,
    FANOUT_SIGNAL,
    LAKE,
    LAKE_SIGNAL,
    Database,
    TlsServer,
    load_handler,
)

pytestmark = pytest.mark.postgres


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


def catalog_state(db: Database) -> dict[str, Any]:
    """Everything the bootstrap touches, as the catalog shows it (password hash included)."""
    conn = db.owner
    user = db.replication_user
    return {
        "role": conn.run(
            "SELECT rolcanlogin, rolreplication, rolpassword FROM pg_authid WHERE rolname = :u",
            u=user,
        ),
        "acl": conn.run(
            "SELECT n.nspname, c.relname, c.relacl::text, c.relreplident, c.oid "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname IN ('public', 'cdclake') ORDER BY 1, 2"
        ),
        "schema_acl": conn.run("SELECT nspname, nspacl::text FROM pg_namespace ORDER BY 1"),
        "publication": conn.run(
            "SELECT p.oid, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate, "
            "pt.schemaname, pt.tablename FROM pg_publication p "
            "JOIN pg_publication_tables pt ON pt.pubname = p.pubname ORDER BY 6, 7"
        ),
        "publication_rel_xmin": conn.run(
            "SELECT prrelid::regclass::text, xmin::text FROM pg_publication_rel ORDER BY 1"
        ),
    }


AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def test_bootstrap_fresh_database_creates_role_tables_and_publication(database: Database) -> None:
    response = handler.create(database.props(database.spec()))

    assert response["Data"]["MissingTables"] == ""
    published = set(response["Data"]["PublishedTables"].split(","))
    assert published == {
        "public.customers",
        "public.orders",
        "public.order_lines",
        "cdclake.heartbeat",
        "cdclake.debezium_signal",
        "cdclake.debezium_signal_fanout",
    }
    rows = database.owner.run(
        "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = :p",
        p=database.publication,
    )
    assert {r[0] for r in rows} == published
    # The role logs in with the secret's password (SCRAM) and has REPLICATION.
    repl = database.connect_as(
        database.replication_user, database.secrets["replication"]["password"]
    )
    assert repl.run("SELECT rolreplication FROM pg_roles WHERE rolname = current_user") == [[True]]
    assert repl.run("SELECT count(*) FROM public.orders") == [[0]]
    repl.run("INSERT INTO cdclake.heartbeat (source) VALUES ('msk')")
    repl.run("INSERT INTO cdclake.debezium_signal (id, type) VALUES ('1', 'log')")
    repl.run("INSERT INTO cdclake.debezium_signal_fanout (id, type) VALUES ('1', 'log')")
    with pytest.raises(DatabaseError):
        repl.run("SELECT count(*) FROM public.audit_log")  # not configured: no SELECT
    repl.close()
    identities = dict(
        database.owner.run(
            "SELECT relname, relreplident::text FROM pg_class "
            "WHERE relname IN ('customers', 'orders', 'order_lines')"
        )
    )
    assert identities == {"customers": "f", "orders": "d", "order_lines": "d"}


def test_bootstrap_pgoutput_slot_sees_configured_tables_only(database: Database) -> None:
    handler.create(database.props(database.spec()))
    repl = database.connect_as(
        database.replication_user, database.secrets["replication"]["password"]
    )
    # The replication role itself creates the slot, as Debezium does.
    repl.run("SELECT pg_create_logical_replication_slot('cdclake_msk', 'pgoutput')")

    app = database.owner
    app.run("INSERT INTO public.orders VALUES (1, 7, '2024-05-01', 10.00)")
    app.run("UPDATE public.orders SET amount = 12.50 WHERE id = 1")
    app.run("DELETE FROM public.orders WHERE id = 1")
    app.run("INSERT INTO public.customers VALUES (7, 'a@example.com', 'x')")
    app.run("UPDATE public.customers SET email = 'b@example.com' WHERE id = 7")
    app.run("INSERT INTO public.audit_log (message) VALUES ('not replicated')")
    app.run("UPDATE public.audit_log SET message = 'still not'")
    app.run("DELETE FROM public.audit_log")
    app.run("INSERT INTO cdclake.heartbeat (source) VALUES ('msk')")

    seen = changes(repl, "cdclake_msk", database.publication)
    repl.close()
    assert [c for c in seen if c[1] == "public.orders"] == [
        ("I", "public.orders"),
        ("U", "public.orders"),
        ("D", "public.orders"),
    ]
    # REPLICA IDENTITY FULL: the update carries the whole old row.
    assert [c for c in seen if c[1] == "public.customers"] == [
        ("I", "public.customers"),
        ("U", "public.customers"),
        ("old-row", "public.customers"),
    ]
    assert ("I", "cdclake.heartbeat") in seen
    assert not [c for c in seen if c[1] == "public.audit_log"]


def test_bootstrap_second_run_changes_nothing(database: Database) -> None:
    props = database.props(database.spec())
    handler.create(props)
    before = catalog_state(database)

    response = handler.update(props, props)

    assert catalog_state(database) == before
    assert response["Data"]["MissingTables"] == ""


def test_bootstrap_second_run_result_reports_no_change(database: Database) -> None:
    from lambdas.bootstrap.sql import bootstrap

    spec = database.spec()
    password = database.secrets["replication"]["password"]
    bootstrap(database.owner, spec, password=password, password_works=False)
    again = bootstrap(database.owner, spec, password=password, password_works=True)

    assert not again.role_created
    assert not again.password_set
    assert not again.publication_changed
    assert again.replica_identity_changed == []


def test_bootstrap_added_table_alters_publication(database: Database) -> None:
    first = database.props(database.spec())
    handler.create(first)
    repl = database.connect_as(
        database.replication_user, database.secrets["replication"]["password"]
    )
    repl.run("SELECT pg_create_logical_replication_slot('cdclake_msk', 'pgoutput')")
    tables = [*database.spec().tables, TableSpec("public.audit_log", "FULL")]

    handler.update(database.props(database.spec(tables)), first)

    database.owner.run("INSERT INTO public.audit_log (message) VALUES ('now replicated')")
    assert ("I", "public.audit_log") in changes(repl, "cdclake_msk", database.publication)
    assert repl.run("SELECT count(*) FROM public.audit_log") == [[1]]
    repl.close()


def test_bootstrap_removed_table_leaves_publication_and_loses_select(database: Database) -> None:
    first = database.props(database.spec())
    handler.create(first)
    fewer = [t for t in database.spec().tables if t.name != "public.order_lines"]

    response = handler.update(database.props(database.spec(fewer)), first)

    assert "public.order_lines" not in response["Data"]["PublishedTables"].split(",")
    rows = database.owner.run(
        "SELECT tablename FROM pg_publication_tables WHERE pubname = :p", p=database.publication
    )
    assert "order_lines" not in {r[0] for r in rows}
    assert database.owner.run(
        "SELECT has_table_privilege(:u, 'public.order_lines', 'SELECT')",
        u=database.replication_user,
    ) == [[False]]


def test_bootstrap_rotated_secret_password_is_applied(database: Database) -> None:
    props = database.props(database.spec())
    handler.create(props)
    old_password = database.secrets["replication"]["password"]
    database.secrets["replication"]["password"] = "second-Pa55word"

    handler.update(props, props)

    database.connect_as(database.replication_user, "second-Pa55word").close()
    with pytest.raises((DatabaseError, InterfaceError)):
        database.connect_as(database.replication_user, old_password)


def test_bootstrap_missing_table_reported_and_left_out(database: Database) -> None:
    tables = [*database.spec().tables, TableSpec("public.not_migrated_yet")]

    response = handler.create(database.props(database.spec(tables)))

    assert response["Data"]["MissingTables"] == "public.not_migrated_yet"
    assert "public.orders" in response["Data"]["PublishedTables"].split(",")


def test_bootstrap_missing_tables_published_as_metric(
    database: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METRICS_ENVIRONMENT", "dev")
    tables = [*database.spec().tables, TableSpec("public.not_migrated_yet")]
    capsys.readouterr()

    handler.create(database.props(database.spec(tables)))

    # Embedded metric format on stdout: Lambda's log group turns it into the metric.
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    assert [(m["MissingTables"], m["Environment"]) for m in emf] == [([1.0], "dev")]
    directive = emf[0]["_aws"]["CloudWatchMetrics"][0]
    assert (directive["Namespace"], directive["Dimensions"]) == ("CdcLake", [["Environment"]])


def test_bootstrap_missing_tables_metric_under_service_name_keeps_environment_dimension_only(
    database: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stack names the logger's service (POWERTOOLS_SERVICE_NAME); Powertools' metrics
    # would add it as a dimension, and the MissingTables alarm matches {Environment} exactly.
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "replication-bootstrap")
    monkeypatch.setenv("METRICS_ENVIRONMENT", "dev")
    with capsys.disabled():  # its logger writes where the session's output goes, as handler's
        deployed = load_handler("_bootstrap_handler_with_service_name")
    monkeypatch.setattr(deployed, "read_secret", database.read_secret)
    monkeypatch.setattr(deployed, "connect", database.connect)
    tables = [*database.spec().tables, TableSpec("public.not_migrated_yet")]
    capsys.readouterr()

    deployed.create(database.props(database.spec(tables)))

    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    assert [(m["MissingTables"], m["Environment"]) for m in emf] == [([1.0], "dev")]
    assert "service" not in emf[0]
    assert emf[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Environment"]]


@pytest.fixture
def handler_log() -> Iterator[io.StringIO]:
    """What the handler's Powertools logger writes from now on (one JSON object a line)."""
    stream = io.StringIO()
    previous = handler.logger.logger_handler.setStream(stream)
    try:
        yield stream
    finally:
        handler.logger.logger_handler.setStream(previous)


def rotated_password_update(database: Database, log: io.StringIO) -> tuple[str, list[str]]:
    """An Update after the replication password was rotated: what the handler logged during
    it, and the old and new passwords."""
    tables = [*database.spec().tables, TableSpec("public.not_migrated_yet")]
    props = database.props(database.spec(tables))
    handler.create(props)
    old_password = database.secrets["replication"]["password"]
    database.secrets["replication"]["password"] = "second-Pa55word'with\"quotes"
    log.truncate(0)
    log.seek(0)
    handler.on_event(
        {"RequestType": "Update", "ResourceProperties": props, "OldResourceProperties": props},
        CONTEXT,
    )
    return log.getvalue(), [old_password, database.secrets["replication"]["password"]]


def test_on_event_update_logs_json_lines_with_fields_and_request_id(
    database: Database, handler_log: io.StringIO
) -> None:
    text, _ = rotated_password_update(database, handler_log)

    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["message"] for line in lines] == [
        "request",
        "replication user cannot log in with its secret yet",
        "bootstrap done",
    ]
    assert {line["function_request_id"] for line in lines} == {CONTEXT.aws_request_id}
    request, cannot_log_in, done = lines
    assert request["request_type"] == "Update"
    assert cannot_log_in["error"] in {"DatabaseError", "InterfaceError"}
    assert (done["password_set"], done["missing"]) == (True, ["public.not_migrated_yet"])
    assert "public.orders" in done["published"]


def test_on_event_update_after_rotation_logs_neither_password(
    database: Database, handler_log: io.StringIO
) -> None:
    text, passwords = rotated_password_update(database, handler_log)

    leaked = [p for p in passwords if p in text or json.dumps(p)[1:-1] in text]
    assert text and leaked == []


def _signal_props(database: Database, tables: list[str]) -> dict[str, Any]:
    return {
        "Tables": json.dumps(tables),
        "Database": database.name,
        "MasterSecretArn": "master",
        "Publication": database.publication,
        "SignalTable": "cdclake.debezium_signal",
    }


def _signals(database: Database) -> list[Any]:
    return database.signals(LAKE_SIGNAL)


def test_snapshot_signal_update_signals_added_published_tables(database: Database) -> None:
    tables = [*database.spec().tables, TableSpec("public.not_migrated_yet")]
    handler.create(database.props(database.spec(tables)))
    old = _signal_props(database, ["public.customers"])
    new = _signal_props(database, ["public.customers", "public.orders", "public.not_migrated_yet"])

    response = handler.signal_new_tables(new, old)

    assert response["Data"]["SignalledTables"] == "public.orders"
    assert _signals(database) == [
        ("execute-snapshot", {"data-collections": ["public.orders"], "type": "incremental"})
    ]


def test_snapshot_signal_update_without_added_tables_signals_nothing(database: Database) -> None:
    handler.create(database.props(database.spec()))
    props = _signal_props(database, ["public.customers", "public.orders"])

    handler.signal_new_tables(props, props)

    assert _signals(database) == []


def test_snapshot_signal_create_touches_no_database() -> None:
    # The first deploy's initial snapshot reads every table; no credentials are even read.
    event = {
        "RequestType": "Create",
        "ResourceType": handler.SNAPSHOT_SIGNAL,
        "ResourceProperties": {"Tables": "[]"},
    }
    assert handler.on_event(event, CONTEXT) == {"PhysicalResourceId": "snapshot-signal"}


def test_bootstrap_rds_replication_role_granted_when_present(database: Database) -> None:
    # Aurora has a NOLOGIN role rds_replication and no REPLICATION attribute for its master user.
    database.admin.run("CREATE ROLE rds_replication NOLOGIN")
    try:
        handler.create(database.props(database.spec()))
        member = database.owner.run(
            "SELECT pg_has_role(:u, 'rds_replication', 'MEMBER'), rolreplication "
            "FROM pg_roles WHERE rolname = :u",
            u=database.replication_user,
        )
        assert member == [[True, False]]
    finally:
        database.admin.run(f'REVOKE rds_replication FROM "{database.replication_user}"')
        database.admin.run("DROP ROLE rds_replication")


def test_delete_default_keeps_publication_tables_and_role(database: Database) -> None:
    props = database.props(database.spec())
    handler.create(props)

    handler.delete(props, "x")

    assert database.owner.run(
        "SELECT count(*) FROM pg_publication WHERE pubname = :p", p=database.publication
    ) == [[1]]
    assert database.owner.run("SELECT to_regclass('cdclake.heartbeat') IS NOT NULL") == [[True]]
    assert database.owner.run(
        "SELECT count(*) FROM pg_roles WHERE rolname = :u", u=database.replication_user
    ) == [[1]]


def test_delete_drop_objects_removes_publication_role_and_inactive_slots(
    database: Database,
) -> None:
    spec = database.spec(drop_objects_on_delete=True)
    props = database.props(spec)
    handler.create(props)
    database.owner.run("SELECT pg_create_logical_replication_slot('cdclake_msk', 'pgoutput')")

    handler.delete(props, "x")

    owner = database.owner
    assert owner.run("SELECT count(*) FROM pg_publication") == [[0]]
    assert owner.run("SELECT to_regclass('cdclake.heartbeat') IS NULL") == [[True]]
    assert owner.run(
        "SELECT count(*) FROM pg_roles WHERE rolname = :u", u=database.replication_user
    ) == [[0]]
    assert owner.run(
        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cdclake_msk'"
    ) == [[0]]


def test_on_event_unknown_request_type_raises() -> None:
    with pytest.raises(ValueError, match="unknown request type"):
        handler.on_event({"RequestType": "Upsert", "ResourceProperties": {}}, CONTEXT)


def test_on_event_physical_id_names_database_and_publication(database: Database) -> None:
    props = database.props(database.spec())
    response = handler.create(props)
    assert response["PhysicalResourceId"] == f"{database.name}/{database.publication}"
    assert json.loads(props["Spec"])["publication"] == database.publication


def _late_props(database: Database, *late: TableSpec) -> dict[str, Any]:
    """Props whose spec adds ``late`` tables the application has not created yet."""
    return database.props(database.spec([*database.spec().tables, *late]))


def test_reconcile_table_created_after_deploy_signalled_to_each_capture(
    database: Database,
) -> None:
    props = _late_props(
        database,
        TableSpec("public.late_both", "DEFAULT", (LAKE_SIGNAL, FANOUT_SIGNAL)),
        TableSpec("public.late_lake", "DEFAULT", LAKE),
        TableSpec("public.late_fanout", "DEFAULT", FANOUT),
    )
    handler.create(props)
    for name in ("late_both", "late_lake", "late_fanout"):
        # The application's migration, and rows pgoutput never published.
        database.owner.run(f"CREATE TABLE public.{name} (id bigint PRIMARY KEY)")
        database.owner.run(f"INSERT INTO public.{name} VALUES (1)")

    response = handler.reconcile(props)

    assert response["Data"]["SignalledTables"] == (
        "public.late_both,public.late_lake,public.late_fanout"
    )
    assert database.signals(LAKE_SIGNAL) == [
        (
            "execute-snapshot",
            {
                "data-collections": ["public.late_both", "public.late_lake"],
                "type": "incremental",
            },
        )
    ]
    assert database.signals(FANOUT_SIGNAL) == [
        (
            "execute-snapshot",
            {
                "data-collections": ["public.late_both", "public.late_fanout"],
                "type": "incremental",
            },
        )
    ]


def test_reconcile_signal_follows_publication_change_on_the_slot(database: Database) -> None:
    # What a capture reads from its slot: the table joins, then the signal row arrives.
    props = _late_props(database, TableSpec("public.shipments", "DEFAULT", LAKE))
    handler.create(props)
    repl = database.connect_as(
        database.replication_user, database.secrets["replication"]["password"]
    )
    repl.run("SELECT pg_create_logical_replication_slot('cdclake_msk', 'pgoutput')")
    database.owner.run("CREATE TABLE public.shipments (id bigint PRIMARY KEY)")
    database.owner.run("INSERT INTO public.shipments VALUES (1)")

    handler.reconcile(props)

    seen = changes(repl, "cdclake_msk", database.publication)
    repl.close()
    assert ("I", LAKE_SIGNAL) in seen
    assert ("I", FANOUT_SIGNAL) not in seen
    assert ("I", "public.shipments") not in seen  # the row before joining: only a snapshot reads it


def test_reconcile_without_joined_tables_signals_nothing(database: Database) -> None:
    props = database.props(database.spec())
    handler.create(props)

    response = handler.reconcile(props)

    assert response["Data"]["SignalledTables"] == ""
    assert database.signals(LAKE_SIGNAL) == [] and database.signals(FANOUT_SIGNAL) == []


def test_reconcile_first_run_signals_nothing(database: Database) -> None:
    # A new publication comes before any slot: the connectors' initial snapshot reads it all.
    props = database.props(database.spec())

    response = handler.reconcile(props)

    assert response["Data"]["SignalledTables"] == ""
    assert database.signals(LAKE_SIGNAL) == [] and database.signals(FANOUT_SIGNAL) == []


def test_update_adding_table_leaves_signal_to_snapshot_signal_resource(database: Database) -> None:
    # On a deploy the connectors may not include the table yet: Custom::SnapshotSignal signals.
    first = database.props(database.spec())
    handler.create(first)

    handler.update(_late_props(database, TableSpec("public.shipments", "DEFAULT", LAKE)), first)

    assert database.signals(LAKE_SIGNAL) == []


def test_on_event_reconcile_runs_bootstrap_properties_from_environment(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = _late_props(database, TableSpec("public.late_table", "DEFAULT", LAKE))
    handler.create(props)
    database.owner.run("CREATE TABLE public.late_table (id bigint PRIMARY KEY)")
    monkeypatch.setenv("BOOTSTRAP_PROPERTIES", json.dumps(props))

    response = handler.on_event({"RequestType": "Reconcile"}, CONTEXT)

    assert response["Data"]["SignalledTables"] == "public.late_table"


def test_spec_previous_deploy_single_signal_table_still_read() -> None:
    # A rollback replays the previous deploy's properties against the new code.
    from lambdas.bootstrap.sql import BootstrapSpec

    spec = BootstrapSpec.from_dict(
        {
            "replication_user": "r",
            "publication": "p",
            "heartbeat_table": "cdclake.heartbeat",
            "signal_table": LAKE_SIGNAL,
            "tables": [{"name": "public.orders"}],
        }
    )

    assert spec.signal_tables == (LAKE_SIGNAL,)
    assert spec.tables[0].signal_tables == ()


def test_tls_context_bundle_verifies_certificate_and_host_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # tests/conftest.py writes a self-made CA standing in for the RDS bundle.
    monkeypatch.setenv("RDS_CA_BUNDLE", os.environ["CDCLAKE_RDS_CA_BUNDLE"])
    monkeypatch.delenv("DATABASE_TLS_VERIFY", raising=False)

    context = handler.tls_context()

    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    subjects = [cert["subject"] for cert in context.get_ca_certs()]
    assert subjects == [((("commonName", "cdc-lake test RDS CA"),),)]


def test_handler_create_over_tls_with_secrets_manager_bootstraps(
    tls_server: TlsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The handler's own read_secret and connect: secrets from (moto's) Secrets Manager, the
    # database over TCP with TLS, its certificate verified against the bundle.
    import boto3
    import moto

    monkeypatch.setenv("RDS_CA_BUNDLE", tls_server.ca_bundle)
    monkeypatch.setenv("METRICS_ENVIRONMENT", "test")
    for name, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    admin = Connection(user="postgres", unix_sock=tls_server.socket, database="postgres")
    database = Database(tls_server.socket, admin)
    endpoint = {"host": "127.0.0.1", "port": tls_server.port}
    master = {**database.secrets["master"], **endpoint, "password": tls_server.password}
    replication = {**database.secrets["replication"], **endpoint}
    try:
        with moto.mock_aws():
            secrets = boto3.client("secretsmanager")
            arns = {
                name: secrets.create_secret(
                    Name=f"{database.name}-{name}", SecretString=json.dumps(value)
                )["ARN"]
                for name, value in (("master", master), ("replication", replication))
            }
            props = {
                **database.props(database.spec()),
                "MasterSecretArn": arns["master"],
                "ReplicationSecretArn": arns["replication"],
            }
            result = handler.create(props)
        in_database = database.owner.run(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = :p",
            p=database.publication,
        )
        published = set(result["Data"]["PublishedTables"].split(","))
        assert published == {name for (name,) in in_database}
        assert {t.name for t in database.spec().tables} <= published
        # The role it made logs in over TLS with the replication secret's password.
        conn = handler.connect(replication, database.name)
        try:
            assert conn.run("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == [[True]]
        finally:
            conn.close()
    finally:
        database.close()
        admin.close()


def test_connect_certificate_of_another_ca_refused(
    tls_server: TlsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tests/conftest.py's stand-in RDS bundle did not sign this server's certificate.
    monkeypatch.setenv("RDS_CA_BUNDLE", os.environ["CDCLAKE_RDS_CA_BUNDLE"])
    secret = {
        "username": "postgres",
        "password": tls_server.password,
        "host": "127.0.0.1",
        "port": tls_server.port,
    }

    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        handler.connect(secret, "postgres")


def test_tls_context_without_bundle_or_opt_out_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RDS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("DATABASE_TLS_VERIFY", raising=False)

    with pytest.raises(RuntimeError, match="RDS_CA_BUNDLE"):
        handler.tls_context()


def test_tls_context_explicit_opt_out_encrypts_unverified(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RDS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("DATABASE_TLS_VERIFY", "false")

    context = handler.tls_context()

    assert context.verify_mode == ssl.CERT_NONE


def test_on_event_reconcile_publishes_late_table_and_restores_replica_identity(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = [*database.spec().tables, TableSpec("public.late_full", "FULL", LAKE)]
    props = database.props(database.spec(tables))
    handler.create(props)
    # After the deploy: the migration creates the table; another one resets an identity.
    database.owner.run("CREATE TABLE public.late_full (id bigint PRIMARY KEY, note text)")
    database.owner.run("ALTER TABLE public.customers REPLICA IDENTITY DEFAULT")
    monkeypatch.setenv("BOOTSTRAP_PROPERTIES", json.dumps(props))

    handler.on_event({"RequestType": "Reconcile"}, CONTEXT)

    published = database.owner.run(
        "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = :p",
        p=database.publication,
    )
    assert "public.late_full" in {r[0] for r in published}
    identities = dict(
        database.owner.run(
            "SELECT relname, relreplident::text FROM pg_class "
            "WHERE relname IN ('customers', 'late_full') AND relkind = 'r'"
        )
    )
    assert identities == {"customers": "f", "late_full": "f"}
    assert database.owner.run(
        "SELECT has_table_privilege(:u, 'public.late_full', 'SELECT')", u=database.replication_user
    ) == [[True]]
