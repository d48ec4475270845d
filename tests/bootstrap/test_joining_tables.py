"""Tables that join the publication after the first deploy, against a real PostgreSQL: each
capture is signalled to snapshot them incrementally, by the SnapshotSignal resource when a
deploy adds them and by the reconcile run when the application creates them later."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from lambdas.bootstrap import handler
from lambdas.bootstrap.sql import TableSpec
from tests.bootstrap.bootstrap_helpers import (
    CONTEXT,
    FANOUT,
    FANOUT_SIGNAL,
    LAKE,
    LAKE_SIGNAL,
    Database,
    changes,
)

pytestmark = pytest.mark.postgres
LAKE_CAPTURE = {"slot": "cdclake_msk", "signal_table": LAKE_SIGNAL, "connector": "cdc-source"}
FANOUT_CAPTURE = {
    "slot": "cdclake_fanout",
    "signal_table": FANOUT_SIGNAL,
    "cluster": "cdc-debezium-server",
    "service": "cdc-debezium-server",
}


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


def _published(database: Database) -> set[str]:
    rows = database.owner.run(
        "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = :p",
        p=database.publication,
    )
    return {r[0] for r in rows}


def test_reconcile_late_table_signalled_once_restarted_capture_reads_slot(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = _late_props(database, TableSpec("public.late_lake", "DEFAULT", LAKE))
    handler.create(props)
    task = database.slot_reader("cdclake_msk")
    task.start()
    old_task = task.holder()
    database.owner.run("CREATE TABLE public.late_lake (id bigint PRIMARY KEY)")
    monkeypatch.setenv("CAPTURES", json.dumps([LAKE_CAPTURE, FANOUT_CAPTURE]))
    restarted: list[dict[str, str]] = []

    def restart(captures: Sequence[dict[str, str]]) -> None:
        restarted.extend(captures)
        task.stop()
        # As RestartConnector does, return before the new task streams.
        threading.Timer(1.0, task.start).start()

    reader_at_signal: list[int | None] = []
    signal = handler.signal_joined_tables

    def spy(conn: Any, spec: Any, tables: Sequence[str]) -> dict[str, str]:
        reader_at_signal.append(task.holder())
        return signal(conn, spec, tables)

    monkeypatch.setattr(handler, "restart_captures", restart)
    monkeypatch.setattr(handler, "signal_joined_tables", spy)
    try:
        response = handler.reconcile(props)
    finally:
        task.stop()

    assert restarted == [LAKE_CAPTURE]
    # The old task, had it read the signal, would have skipped the table it has no schema for.
    assert reader_at_signal and reader_at_signal[0] not in (None, old_task)
    assert response["Data"]["SignalledTables"] == "public.late_lake"


def test_reconcile_capture_not_restarted_raises_and_joins_nothing(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = _late_props(database, TableSpec("public.late_lake", "DEFAULT", LAKE))
    handler.create(props)
    task = database.slot_reader("cdclake_msk")
    task.start()
    database.owner.run("CREATE TABLE public.late_lake (id bigint PRIMARY KEY)")
    monkeypatch.setenv("CAPTURES", json.dumps([LAKE_CAPTURE]))
    monkeypatch.setattr(handler, "restart_captures", lambda captures: None)
    monkeypatch.setattr(handler, "RESTART_WAIT_SECONDS", 0.5)
    try:
        with pytest.raises(handler.CapturesNotRestarted, match=r"public\.late_lake not joined"):
            handler.reconcile(props)
    finally:
        task.stop()

    # Still joinable: the next run (Lambda's retry, the schedule) restarts and signals it.
    assert "public.late_lake" not in _published(database)
    assert database.signals(LAKE_SIGNAL) == []


def test_update_leaves_table_created_since_last_reconcile_to_reconcile(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAPTURES", json.dumps([LAKE_CAPTURE, FANOUT_CAPTURE]))
    first = _late_props(database, TableSpec("public.late_lake", "DEFAULT", LAKE))
    handler.create(first)
    database.owner.run("CREATE TABLE public.late_lake (id bigint PRIMARY KEY)")
    second = _late_props(
        database,
        TableSpec("public.late_lake", "DEFAULT", LAKE),
        TableSpec("public.audit_log", "DEFAULT", LAKE),
    )

    handler.update(second, first)

    # audit_log is the deploy's own (Custom::SnapshotSignal signals it); late_lake, joined
    # here, would be signalled by nothing.
    published = _published(database)
    assert "public.audit_log" in published and "public.late_lake" not in published


def test_update_leaves_added_fanout_table_to_reconcile(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAPTURES", json.dumps([LAKE_CAPTURE, FANOUT_CAPTURE]))
    first = database.props(database.spec())
    handler.create(first)

    handler.update(_late_props(database, TableSpec("public.audit_log", "DEFAULT", FANOUT)), first)

    # Custom::SnapshotSignal signals the lake's capture only: joined here, the fan-out would
    # never get the table's earlier rows.
    assert "public.audit_log" not in _published(database)
