"""Replication bootstrap as plain SQL functions over a pg8000 connection.

Every function is idempotent: it reads the catalog first and only changes what differs, so
running the bootstrap on every deploy is safe and a second run changes nothing. Nothing here
logs or returns a password.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pg8000.native import Connection, identifier, literal

ReplicaIdentity = Literal["DEFAULT", "FULL"]
_IDENTITY_CODE = {"DEFAULT": "d", "FULL": "f"}

# Debezium's signal table layout (id, type, data), see its "signaling data collection" docs.
SIGNAL_TABLE_COLUMNS = "id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048)"
# One row per connector; Debezium's heartbeat.action.query upserts it so an idle database
# still produces WAL for the slot, and the slot's confirmed position keeps moving.
HEARTBEAT_TABLE_COLUMNS = "source text PRIMARY KEY, ts timestamptz NOT NULL DEFAULT now()"


@dataclass(frozen=True)
class TableSpec:
    """A replicated table: ``schema.table``, the REPLICA IDENTITY it needs, and the signal
    tables of the captures that carry it (where its incremental snapshots are asked for)."""

    name: str
    replica_identity: ReplicaIdentity = "DEFAULT"
    signal_tables: tuple[str, ...] = ()


@dataclass(frozen=True)
class BootstrapSpec:
    """What the bootstrap makes true in one database; built from the environment config.

    ``signal_tables`` holds one signal table per capture: a signal row is read by every
    capture whose ``signal.data.collection`` it is, so one table per capture keeps a lake
    snapshot from replaying into the fan-out, and the other way round.
    """

    replication_user: str
    publication: str
    heartbeat_table: str
    signal_tables: tuple[str, ...]
    tables: tuple[TableSpec, ...]
    slots: tuple[str, ...] = ()
    # Slots of a capture the config no longer has (the fan-out turned off): nothing will read
    # them again, and a slot nobody reads keeps WAL until max_slot_wal_keep_size invalidates it.
    retired_slots: tuple[str, ...] = ()
    drop_objects_on_delete: bool = False

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BootstrapSpec:
        return cls(
            replication_user=raw["replication_user"],
            publication=raw["publication"],
            heartbeat_table=raw["heartbeat_table"],
            # A rollback replays the previous deploy's properties against this code.
            signal_tables=tuple(raw.get("signal_tables") or [raw["signal_table"]]),
            tables=tuple(
                TableSpec(
                    t["name"],
                    t.get("replica_identity", "DEFAULT"),
                    tuple(t.get("signal_tables", ())),
                )
                for t in raw["tables"]
            ),
            slots=tuple(raw.get("slots", ())),
            retired_slots=tuple(raw.get("retired_slots", ())),
            drop_objects_on_delete=bool(raw.get("drop_objects_on_delete", False)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "replication_user": self.replication_user,
            "publication": self.publication,
            "heartbeat_table": self.heartbeat_table,
            "signal_tables": list(self.signal_tables),
            "tables": [
                {
                    "name": t.name,
                    "replica_identity": t.replica_identity,
                    "signal_tables": list(t.signal_tables),
                }
                for t in self.tables
            ],
            "slots": list(self.slots),
            "retired_slots": list(self.retired_slots),
            "drop_objects_on_delete": self.drop_objects_on_delete,
        }

    @property
    def published_tables(self) -> list[str]:
        """Configured tables plus the heartbeat and signal tables, which Debezium must see."""
        return [t.name for t in self.tables] + [self.heartbeat_table, *self.signal_tables]

    @property
    def cdc_tables(self) -> list[str]:
        """The tables the bootstrap itself creates: heartbeat and every signal table."""
        return [self.heartbeat_table, *self.signal_tables]


@dataclass
class BootstrapResult:
    """What a run found and did; safe to return to CloudFormation (no secrets)."""

    role_created: bool = False
    password_set: bool = False
    publication_changed: bool = False
    published_tables: list[str] = field(default_factory=list)
    # Configured tables this run put into an existing publication: their older rows were
    # never published, so they need an incremental snapshot.
    joined_tables: list[str] = field(default_factory=list)
    missing_tables: list[str] = field(default_factory=list)
    replica_identity_changed: list[str] = field(default_factory=list)


def qualified(name: str) -> str:
    """``schema.table`` as a quoted SQL identifier."""
    schema, _, table = name.partition(".")
    if not table:
        raise ValueError(f"table name {name!r} is not schema.table")
    return f"{identifier(schema)}.{identifier(table)}"


def role_exists(conn: Connection, role: str) -> bool:
    return bool(conn.run("SELECT 1 FROM pg_roles WHERE rolname = :r", r=role))


def ensure_login_role(conn: Connection, role: str) -> bool:
    """Create ``role`` as a LOGIN role if missing; True when it was created."""
    if role_exists(conn, role):
        rows = conn.run("SELECT rolcanlogin FROM pg_roles WHERE rolname = :r", r=role)
        if not rows[0][0]:
            conn.run(f"ALTER ROLE {identifier(role)} WITH LOGIN")
        return False
    conn.run(f"CREATE ROLE {identifier(role)} WITH LOGIN")
    return True


def set_password(conn: Connection, role: str, password: str) -> None:
    """Set the role's password (utility statements take no bind parameters: quote it)."""
    conn.run(f"ALTER ROLE {identifier(role)} WITH PASSWORD {literal(password)}")


def grant_replication(conn: Connection, role: str) -> None:
    """On Aurora/RDS grant ``rds_replication``; elsewhere the REPLICATION attribute.

    The RDS master user is not a superuser and cannot hand out REPLICATION; membership of
    ``rds_replication`` is how RDS lets a role create and read logical slots.
    """
    if role_exists(conn, "rds_replication"):
        member = conn.run("SELECT pg_has_role(:r, 'rds_replication', 'MEMBER')", r=role)[0][0]
        if not member:
            conn.run(f"GRANT rds_replication TO {identifier(role)}")
        return
    if not conn.run("SELECT rolreplication FROM pg_roles WHERE rolname = :r", r=role)[0][0]:
        conn.run(f"ALTER ROLE {identifier(role)} WITH REPLICATION")


def ensure_cdc_tables(
    conn: Connection, *, heartbeat_table: str, signal_tables: Sequence[str]
) -> None:
    """Create the heartbeat and Debezium signal tables (and their schemas) if missing."""
    for name, columns in (
        (heartbeat_table, HEARTBEAT_TABLE_COLUMNS),
        *((signal_table, SIGNAL_TABLE_COLUMNS) for signal_table in signal_tables),
    ):
        conn.run(f"CREATE SCHEMA IF NOT EXISTS {identifier(name.split('.', 1)[0])}")
        conn.run(f"CREATE TABLE IF NOT EXISTS {qualified(name)} ({columns})")


def existing_tables(conn: Connection, names: Iterable[str]) -> list[str]:
    """The subset of ``names`` (schema.table) that exist as ordinary or partitioned tables."""
    wanted = list(names)
    rows = conn.run(
        "SELECT n.nspname || '.' || c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'p') "
        "AND n.nspname || '.' || c.relname = ANY(CAST(:names AS text[]))",
        names=wanted,
    )
    found = {r[0] for r in rows}
    return [n for n in wanted if n in found]


def grant_table_access(
    conn: Connection,
    role: str,
    *,
    tables: Sequence[str],
    heartbeat_table: str,
    signal_tables: Sequence[str],
) -> None:
    """SELECT for snapshots; heartbeat upserts and signal-table watermarks need writes."""
    privileges = {name: "SELECT" for name in tables}
    privileges[heartbeat_table] = "SELECT, INSERT, UPDATE"
    for signal_table in signal_tables:
        privileges[signal_table] = "SELECT, INSERT, UPDATE, DELETE"
    for schema in sorted({name.split(".", 1)[0] for name in privileges}):
        conn.run(f"GRANT USAGE ON SCHEMA {identifier(schema)} TO {identifier(role)}")
    for name, privilege in privileges.items():
        conn.run(f"GRANT {privilege} ON TABLE {qualified(name)} TO {identifier(role)}")


def revoke_table_access(conn: Connection, role: str, tables: Sequence[str]) -> None:
    """Take SELECT back from tables that left the configuration (if they still exist)."""
    for name in existing_tables(conn, tables):
        conn.run(f"REVOKE SELECT ON TABLE {qualified(name)} FROM {identifier(role)}")


def replica_identity(conn: Connection, table: str) -> str:
    rows = conn.run(
        "SELECT c.relreplident FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = :s AND c.relname = :t",
        s=table.split(".", 1)[0],
        t=table.split(".", 1)[1],
    )
    return str(rows[0][0])


def ensure_replica_identity(conn: Connection, table: str, wanted: ReplicaIdentity) -> bool:
    """ALTER only when different: the statement takes an ACCESS EXCLUSIVE lock."""
    if replica_identity(conn, table) == _IDENTITY_CODE[wanted]:
        return False
    conn.run(f"ALTER TABLE {qualified(table)} REPLICA IDENTITY {wanted}")
    return True


def publication_tables(conn: Connection, publication: str) -> set[str] | None:
    """Tables in the publication, or None when it does not exist."""
    if not conn.run("SELECT 1 FROM pg_publication WHERE pubname = :p", p=publication):
        return None
    rows = conn.run(
        "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = :p",
        p=publication,
    )
    return {r[0] for r in rows}


def sync_publication(conn: Connection, publication: str, tables: Sequence[str]) -> bool:
    """Create the publication, or set its table list to exactly ``tables``; True if changed."""
    table_list = ", ".join(qualified(t) for t in tables)
    current = publication_tables(conn, publication)
    if current is None:
        conn.run(
            f"CREATE PUBLICATION {identifier(publication)} FOR TABLE {table_list} "
            "WITH (publish = 'insert, update, delete, truncate')"
        )
        return True
    if current == set(tables):
        return False
    conn.run(f"ALTER PUBLICATION {identifier(publication)} SET TABLE {table_list}")
    return True


def bootstrap(
    conn: Connection,
    spec: BootstrapSpec,
    *,
    password: str,
    password_works: bool,
    removed_tables: Sequence[str] = (),
    joinable: Collection[str] | None = None,
) -> BootstrapResult:
    """Make the database match ``spec`` in one transaction.

    ``password_works`` says whether the replication user can already log in with
    ``password`` (checked by the caller on its own connection); the password is only set when
    the role is new or the check failed, so a rotated password is never overwritten.

    ``joinable``, when given, bounds which tables may join an existing publication: the ones
    whose captures were restarted for them (:func:`joining_tables`). A table created since
    stays out until a later run restarts its capture first.
    """
    result = BootstrapResult()
    conn.run("BEGIN")
    try:
        # Serialize concurrent runs (two stacks, a manual reconcile) on one database.
        conn.run("SELECT pg_advisory_xact_lock(hashtext('cdclake_replication_bootstrap'))")
        result.role_created = ensure_login_role(conn, spec.replication_user)
        if result.role_created or not password_works:
            set_password(conn, spec.replication_user, password)
            result.password_set = True
        grant_replication(conn, spec.replication_user)
        ensure_cdc_tables(
            conn, heartbeat_table=spec.heartbeat_table, signal_tables=spec.signal_tables
        )
        before = publication_tables(conn, spec.publication)

        configured = [t.name for t in spec.tables]
        present = existing_tables(conn, configured)
        # Reported by the caller (the Lambda's "bootstrap done" log line and metric, the CLI).
        result.missing_tables = [n for n in configured if n not in present]

        revoke_table_access(
            conn, spec.replication_user, [t for t in removed_tables if t not in configured]
        )
        grant_table_access(
            conn,
            spec.replication_user,
            tables=present,
            heartbeat_table=spec.heartbeat_table,
            signal_tables=spec.signal_tables,
        )
        for table in spec.tables:
            if table.name in present and ensure_replica_identity(
                conn, table.name, table.replica_identity
            ):
                result.replica_identity_changed.append(table.name)

        if before is not None and joinable is not None:
            present = [t for t in present if t in before or t in joinable]
        result.published_tables = [*present, *spec.cdc_tables]
        result.publication_changed = sync_publication(
            conn, spec.publication, result.published_tables
        )
        # A new publication comes before any slot: the connectors' initial snapshot reads
        # those tables. Only a table joining an existing publication has unpublished rows.
        if before is not None:
            result.joined_tables = [t for t in present if t not in before]
        conn.run("COMMIT")
    except Exception:
        conn.run("ROLLBACK")
        raise
    return result


def require_published(conn: Connection, publication: str, table: str) -> None:
    """LookupError naming the fix unless ``table`` is in ``publication``: a table outside it is
    never streamed, and Debezium ignores a snapshot signal for a table it does not capture."""
    published = publication_tables(conn, publication)
    if published is None:
        raise LookupError(f"publication {publication} does not exist: run the bootstrap first")
    if table not in published:
        raise LookupError(
            f"{table} is not in publication {publication}: deploy it in tables: first "
            "(locally: cdclake local reconcile)"
        )


def signal_incremental_snapshot(
    conn: Connection, signal_table: str, tables: Sequence[str], signal_id: str | None = None
) -> str:
    """Ask Debezium for an incremental snapshot of ``tables`` (a row in a capture's signal
    table, read from the WAL by the capture whose ``signal.data.collection`` it is); returns
    the signal id: ``signal_id``, or a new one. Debezium's notifications of the snapshot carry
    that id (a rebuild records it before sending, to find the snapshot's end). An id already in
    the signal table is not inserted again: a rebuild killed after its signal, before marking it
    sent, sends the same id again, and Debezium must see one signal, one snapshot."""
    signal_id = signal_id or str(uuid.uuid4())
    data = json.dumps({"data-collections": list(tables), "type": "incremental"})
    # NOT EXISTS rather than ON CONFLICT: a signal table a user created (bring your own
    # database) need not have Debezium's documented primary key.
    table = qualified(signal_table)
    conn.run(
        f"INSERT INTO {table} (id, type, data) "
        "SELECT CAST(:id AS varchar), 'execute-snapshot', :data "
        f"WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE id = CAST(:id AS varchar))",
        id=signal_id,
        data=data,
    )
    return signal_id


def signal_joined_tables(
    conn: Connection, spec: BootstrapSpec, tables: Sequence[str]
) -> dict[str, str]:
    """One incremental-snapshot signal per capture for the ``tables`` it carries.

    Returns ``{signal table: signal id}``; tables no capture carries are left alone.
    """
    by_signal: dict[str, list[str]] = {}
    for table in spec.tables:
        if table.name in tables:
            for signal_table in table.signal_tables:
                by_signal.setdefault(signal_table, []).append(table.name)
    return {
        signal_table: signal_incremental_snapshot(conn, signal_table, names)
        for signal_table, names in by_signal.items()
    }


def joining_tables(conn: Connection, spec: BootstrapSpec) -> list[str]:
    """Configured tables that exist and would join the existing publication now (none when
    there is no publication yet: the connectors' initial snapshot reads every table)."""
    before = publication_tables(conn, spec.publication)
    if before is None:
        return []
    present = existing_tables(conn, [t.name for t in spec.tables])
    return [t for t in present if t not in before]


def slot_holders(conn: Connection, slots: Sequence[str]) -> dict[str, int | None]:
    """The backend PID reading each of ``slots`` that exists (None: nobody reads it now).

    A slot not created yet is left out: its capture has never streamed, and loads every
    included table's schema when it first does."""
    rows = conn.run(
        "SELECT slot_name, active_pid FROM pg_replication_slots "
        "WHERE slot_name = ANY(CAST(:s AS text[]))",
        s=list(slots),
    )
    return {r[0]: r[1] for r in rows}


def await_new_slot_holders(
    conn: Connection,
    before: Mapping[str, int | None],
    *,
    timeout: float,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Wait until another backend than in ``before`` reads each slot; the slots that were not
    taken over within ``timeout`` seconds (empty when all were).

    A capture restarted for a table is only known to hold the table's schema once a task
    started after the restart reads its slot: Debezium 2.7 loads the included tables' schemas
    when it starts streaming, right after it takes the slot and before it reads a change, and
    skips an incremental snapshot of a table it holds no schema for. The old task, until then,
    still streams and could read a signal, skip the snapshot and commit past it.
    """
    deadline = time.monotonic() + timeout
    while True:
        now = slot_holders(conn, list(before))
        waiting = [s for s, pid in now.items() if pid is None or pid == before[s]]
        if not waiting or time.monotonic() >= deadline:
            return waiting
        sleep(1.0)


def inactive_slots(conn: Connection, slots: Sequence[str]) -> list[str]:
    rows = conn.run(
        "SELECT slot_name FROM pg_replication_slots "
        "WHERE NOT active AND slot_name = ANY(CAST(:s AS text[]))",
        s=list(slots),
    )
    return sorted(r[0] for r in rows)


def drop_retired_slots(conn: Connection, spec: BootstrapSpec) -> list[str]:
    """Drop each of ``spec.retired_slots`` nobody reads; the ones dropped.

    A slot still read is left: its capture has not been removed yet (a deploy updates the
    database stack before the one that removes the capture), and the next run drops it.
    """
    dropped = inactive_slots(conn, spec.retired_slots)
    for slot in dropped:
        conn.run("SELECT pg_drop_replication_slot(:s)", s=slot)
    return dropped


def teardown(conn: Connection, spec: BootstrapSpec) -> list[str]:
    """On stack delete: drop what the bootstrap made, only when the config asks for it.

    Returns the objects dropped. By default nothing is dropped: the publication, tables and
    role outlive the stack so a redeploy resumes from the connectors' slots.
    """
    if not spec.drop_objects_on_delete:
        return []
    dropped: list[str] = []
    # Inactive slots first: a slot nobody reads retains WAL until the disk is full.
    for slot in inactive_slots(conn, spec.slots):
        conn.run("SELECT pg_drop_replication_slot(:s)", s=slot)
        dropped.append(f"slot {slot}")
    conn.run(f"DROP PUBLICATION IF EXISTS {identifier(spec.publication)}")
    dropped.append(f"publication {spec.publication}")
    for name in spec.cdc_tables:
        conn.run(f"DROP TABLE IF EXISTS {qualified(name)}")
        dropped.append(f"table {name}")
    if role_exists(conn, spec.replication_user):
        # DROP OWNED removes its grants in this database; the role itself is cluster-wide.
        conn.run(f"DROP OWNED BY {identifier(spec.replication_user)}")
        conn.run(f"DROP ROLE {identifier(spec.replication_user)}")
        dropped.append(f"role {spec.replication_user}")
    return dropped
