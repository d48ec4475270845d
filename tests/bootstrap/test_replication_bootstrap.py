"""The replication bootstrap against a real PostgreSQL with wal_level=logical: the role, the
tables' rights and replica identities, the publication, and deletion."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pg8000.native import DatabaseError, InterfaceError

from lambdas.bootstrap import handler
from lambdas.bootstrap.sql import TableSpec
from tests.bootstrap.bootstrap_helpers import CONTEXT, Database, changes, load_handler

pytestmark = pytest.mark.postgres


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


def _slots(database: Database, slot: str) -> int:
    rows = database.owner.run(
        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = :s", s=slot
    )
    return int(rows[0][0])


def test_update_retired_slot_nobody_reads_is_dropped(database: Database) -> None:
    # The fan-out turned off: its stack removed Debezium Server, its slot would keep WAL.
    slot = f"retired_{database.name}"
    database.owner.run("SELECT pg_create_logical_replication_slot(:s, 'pgoutput')", s=slot)
    props = database.props(database.spec(retired_slots=(slot,)))

    response = handler.update(props, props)

    assert response["Data"]["DroppedSlots"] == slot
    assert _slots(database, slot) == 0


def test_update_retired_slot_still_read_is_kept_for_a_later_run(database: Database) -> None:
    # A deploy updates the database stack before the one that removes the capture.
    slot = f"retired_{database.name}"
    handler.create(database.props(database.spec()))
    task = database.slot_reader(slot)
    task.start()
    props = database.props(database.spec(retired_slots=(slot,)))
    try:
        response = handler.update(props, props)
        assert response["Data"]["DroppedSlots"] == ""
        assert _slots(database, slot) == 1
    finally:
        task.stop()
    assert handler.reconcile(props)["Data"]["DroppedSlots"] == slot
    assert _slots(database, slot) == 0


def test_on_event_unknown_request_type_raises() -> None:
    with pytest.raises(ValueError, match="unknown request type"):
        handler.on_event({"RequestType": "Upsert", "ResourceProperties": {}}, CONTEXT)


def test_on_event_physical_id_names_database_and_publication(database: Database) -> None:
    props = database.props(database.spec())
    response = handler.create(props)
    assert response["PhysicalResourceId"] == f"{database.name}/{database.publication}"
    assert json.loads(props["Spec"])["publication"] == database.publication
