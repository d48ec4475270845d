"""Issue 30: the lake read the way Athena reads it (by name, through the catalog the merge
synced, by Trino, Athena's engine) equals PostgreSQL, on the real capture path.

On the session's stack: two lake tables of config/local.yaml that only this module writes, a
partitioned copy-on-write one (``public.invoices``) and a merge-on-read one
(``public.shipments``), created with rows before capture (they join the publication with a
snapshot), then changed while streaming: inserts, updates (one leaves an out-of-line TOAST
value unchanged, one moves a row to another partition), a delete, a key change; then, in one
batch, a column added and a truncate followed by new rows. After each phase ``cdclake dispatch
--env local`` merges what waits (the merge syncs the stack's metastore over thrift) and each
table is read back through Trino's ``hudi`` catalog and compared with PostgreSQL: row count,
each key's values, and the column types Trino reports. The registration Athena chooses its
reader by (names, input formats, partitions) is read from the metastore. Invoices keeps its
history (issue #51): read by name through Trino after each phase, it holds every change a
trigger in PostgreSQL logged, each key's in order, with versions that neither overlap nor
stay open. Then ``cdclake erase --env local`` forgets invoice 4 (deleted at the source in the
first phase): no file of the warehouse or change file of its topic holds its values any more,
and every other key's history reads through Trino as before. Last, a config asking invoices
for a larger record index (``expected_rows``) is taken by ``cdclake rebuild --env local``,
which rebuilds a table keeping its history as a copy (issues #49, #51), with changes waiting:
through Trino the table and its history still equal PostgreSQL and its trigger's log, every
partition registered points at the new generation, and the index has the new size.

Trino 476's hudi connector reads a merge-on-read table from its base files only, under either
name (``<table>`` and ``<table>_rt``): it equals the source while no change sits in a log file
(after the first load, or a compaction), and the snapshot Athena gives through ``<table>_rt``
is not Trino's (docs/lake.md); that comparison is an expected failure, strict, so the day the
connector merges log files it shows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import shutil
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdclake.local import trino as local_trino
from cdclake.local.stack import LocalStack
from cdclake.query import engine_port
from tests.query.query_helpers import (
    ROOT,
    as_utc,
    registered_formats,
    registered_partition_locations,
    registered_partitions,
    run_cli,
    stored_text,
    topic_events,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.moto, pytest.mark.postgres]

INVOICES, SHIPMENTS = "public.invoices", "public.shipments"
DATABASE = "cdclake_local"
SCHEMA = (
    "CREATE TABLE public.invoices (id bigint PRIMARY KEY, customer text NOT NULL,"
    " issued_on date NOT NULL, amount numeric(12,2), paid_at timestamptz, attrs jsonb,"
    " notes text)",
    "CREATE TABLE public.shipments (id bigint PRIMARY KEY, carrier text, shipped_on date,"
    " weight numeric(8,3), updated_at timestamptz, attrs jsonb, manifest text)",
    # Out of line and uncompressed: an update that leaves it alone sends Debezium's
    # placeholder (REPLICA IDENTITY DEFAULT), which the merge must not write.
    "ALTER TABLE public.invoices ALTER COLUMN notes SET STORAGE EXTERNAL",
    "ALTER TABLE public.shipments ALTER COLUMN manifest SET STORAGE EXTERNAL",
    # The changes PostgreSQL made to invoices, in order, as its history must hold them: a key
    # change is a delete and a create (as Debezium sends it); a truncate is no row.
    "CREATE TABLE public.invoices_audit (seq bigserial PRIMARY KEY, op text, id bigint,"
    " customer text, issued_on date, amount numeric(12,2), notes text)",
    """CREATE FUNCTION public.invoices_audited() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.id <> NEW.id) THEN
        INSERT INTO public.invoices_audit (op, id, customer, issued_on, amount, notes)
        VALUES ('d', OLD.id, OLD.customer, OLD.issued_on, OLD.amount, OLD.notes);
      END IF;
      IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND OLD.id <> NEW.id) THEN
        INSERT INTO public.invoices_audit (op, id, customer, issued_on, amount, notes)
        VALUES ('c', NEW.id, NEW.customer, NEW.issued_on, NEW.amount, NEW.notes);
      ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO public.invoices_audit (op, id, customer, issued_on, amount, notes)
        VALUES ('u', NEW.id, NEW.customer, NEW.issued_on, NEW.amount, NEW.notes);
      END IF;
      RETURN NULL;
    END $$""",
    "CREATE TRIGGER invoices_audited AFTER INSERT OR UPDATE OR DELETE ON public.invoices"
    " FOR EACH ROW EXECUTE FUNCTION public.invoices_audited()",
)
HISTORY = (
    "id, _cdc_op, customer, issued_on, amount, notes, _cdc_valid_from, _cdc_valid_to, _cdc_current"
)
COLUMNS = {
    INVOICES: ["id", "customer", "issued_on", "amount", "paid_at", "attrs", "notes"],
    SHIPMENTS: ["id", "carrier", "shipped_on", "weight", "updated_at", "attrs", "manifest"],
}
ADDED = {INVOICES: "due_on", SHIPMENTS: "signed_by"}
# What Trino's hudi catalog reads of the types the sync registered (Hive's: bigint, string,
# date, decimal(p,s), timestamp). Its Hive timestamp is timestamp(9), where Athena shows
# `timestamp` (milliseconds); the values compared below are the same instants.
TYPES = {
    INVOICES: {
        "id": "bigint",
        "customer": "varchar",
        "issued_on": "date",
        "amount": "decimal(12,2)",
        "paid_at": "timestamp(9)",
        "attrs": "varchar",
        "notes": "varchar",
    },
    SHIPMENTS: {
        "id": "bigint",
        "carrier": "varchar",
        "shipped_on": "date",
        "weight": "decimal(8,3)",
        "updated_at": "timestamp(9)",
        "attrs": "varchar",
        "manifest": "varchar",
    },
}
TOAST = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(100))  # 6,400 chars
# Key 2 becomes 200 with its TOAST value unchanged: Debezium's create of 200 carries the
# placeholder, which the merge fills from key 2's value (the delete at the same position).
KEY_CHANGED = 200
ERASED = 4  # deleted in the first phase; its values are in older file versions until erased


Phase = dict[str, dict[str, Any]]


def _lake_name(table: str) -> str:
    return table.replace(".", "_")


@pytest.fixture(scope="module")
def port(stack: LocalStack) -> int:
    return engine_port(stack)


def _invoice(conn: Any, i: int, day: str, amount: str) -> None:
    conn.run(
        "INSERT INTO public.invoices VALUES (:i, :c, CAST(:d AS date), CAST(:a AS numeric),"
        " CAST(:t AS timestamptz), CAST(:j AS jsonb), :n)",
        i=i,
        c=f"customer {i}",
        d=day,
        a=amount,
        t=f"2026-03-0{i % 9 + 1} 10:11:12.345+02",
        j=json.dumps({"lines": i, "tags": ["a", "b"]}),
        n=f"{i}:{TOAST}",
    )


def _shipment(conn: Any, i: int) -> None:
    conn.run(
        "INSERT INTO public.shipments VALUES (:i, :c, CAST(:d AS date), CAST(:w AS numeric),"
        " CAST(:t AS timestamptz), CAST(:j AS jsonb), :m)",
        i=i,
        c=["dhl", "ups", "fedex"][i % 3],
        d=f"2026-04-{i % 28 + 1:02d}",
        w=f"{i}.125",
        t=f"2026-04-0{i % 9 + 1} 23:59:58.999Z",
        j=json.dumps({"boxes": i}),
        m=f"{i}:{TOAST}",
    )


def _marked(stack: LocalStack, marker: str) -> None:
    """Write ``marker`` into both tables last; wait until both topics' change files hold it,
    so every change before it is in S3."""
    with stack.connect() as conn:
        conn.run("UPDATE public.invoices SET customer = :m WHERE id = 5", m=marker)
        conn.run("UPDATE public.shipments SET carrier = :m WHERE id = 5", m=marker)
    for table, column in ((INVOICES, "customer"), (SHIPMENTS, "carrier")):
        topic = f"{stack.config.prefix}.{table}"
        wait_until(
            lambda topic=topic, column=column: any(
                (e.get("after") or {}).get(column) == marker for e in topic_events(stack, topic)
            ),
            f"{marker} in the change files of {topic}",
        )


def _merge(stack: LocalStack) -> dict[str, Any]:
    """What waits merged, as an operator does it: `cdclake dispatch --env local` (it also merges
    other tables of the session's stack; only this module's are looked at)."""
    ran = run_cli(stack.root, "dispatch", "--env", "local", "--json", timeout=600)
    try:
        tables = {t["table"]: t for t in json.loads(ran.stdout)["tables"]}
    except (ValueError, KeyError):
        raise AssertionError(f"dispatch printed no decisions: {ran.stderr}") from None
    runs = {}
    for table in (INVOICES, SHIPMENTS):
        run = tables[table].get("run")
        assert run is not None and "error" not in run, (tables[table], ran.stderr[-2000:])
        runs[table] = run
    return runs


def _read(stack: LocalStack, port: int, table: str, columns: list[str]) -> dict[str, Any]:
    """The table in PostgreSQL and through Trino's hudi catalog, now."""
    with stack.connect() as conn:
        selected = ", ".join(f"{c}::text" if c == "attrs" else c for c in columns)
        source = conn.run(f"SELECT {selected} FROM {table} ORDER BY id")
    expected = [[as_utc(v) if isinstance(v, dt.datetime) else v for v in row] for row in source]
    name = f"hudi.{DATABASE}.{_lake_name(table)}"
    lake = local_trino.run_query(port, f"SELECT {', '.join(columns)} FROM {name} ORDER BY id")
    described = local_trino.run_query(port, f"DESCRIBE {name}")
    return {
        "postgres": expected,
        "trino": lake.rows,
        "types": {row[0]: row[1] for row in described.rows},
    }


def _history(stack: LocalStack, port: int) -> dict[str, Any]:
    """Invoices' history through Trino by name, and the changes PostgreSQL's trigger logged,
    each key's in order."""
    name = f"hudi.{DATABASE}.{_lake_name(INVOICES)}_history"
    rows = local_trino.run_query(port, f"SELECT {HISTORY} FROM {name} ORDER BY id, _cdc_order")
    with stack.connect() as conn:
        audit = conn.run(
            "SELECT id, op, customer, issued_on, amount, notes FROM public.invoices_audit"
            " ORDER BY id, seq"
        )
        live = [row[0] for row in conn.run("SELECT id FROM public.invoices ORDER BY id")]
    names = HISTORY.split(", ")
    read = [dict(zip(names, row, strict=True)) for row in rows.rows]
    return {"trino": read, "audit": audit, "live": live}


def _phase(stack: LocalStack, port: int, marker: str, columns: Callable[[str], list[str]]) -> Phase:
    """Each table read after the phase's merge, and the metastore's registration then (the
    tests may run after a later phase)."""
    _marked(stack, marker)
    runs = _merge(stack)
    phase: Phase = {
        table: {**_read(stack, port, table, columns(table)), "run": runs.get(table)}
        for table in (INVOICES, SHIPMENTS)
    }
    phase["history"] = _history(stack, port)
    phase["catalog"] = {
        "formats": registered_formats(stack, DATABASE),
        "partitions": registered_partitions(stack, DATABASE, _lake_name(INVOICES)),
    }
    return phase


@pytest.fixture(scope="module")
def changed(stack: LocalStack, port: int) -> Phase:
    """Rows before capture (snapshot), then inserts, updates, a delete, a key change."""
    with stack.connect() as conn:
        for statement in SCHEMA:
            conn.run(statement)
        for i in range(1, 5):
            _invoice(conn, i, f"2026-01-0{i}", f"{i}00.10")
            _shipment(conn, i)
    joined = stack.reconcile().joined
    assert {INVOICES, SHIPMENTS} <= set(joined), joined
    # The snapshot's reads before the changes: each key's history then starts with its read,
    # whatever the order Debezium's window would give reads and changes of the same rows.
    topic = f"{stack.config.prefix}.{INVOICES}"
    wait_until(
        lambda: (
            {(e.get("after") or {}).get("id") for e in topic_events(stack, topic)} >= {1, 2, 3, 4}
        ),
        f"the snapshot's reads in the change files of {topic}",
    )
    with stack.connect() as conn:
        for i in (5, 6):
            _invoice(conn, i, "2026-01-05", "5.55")
            _shipment(conn, i)
        # TOAST left alone: Debezium sends its placeholder for notes/manifest.
        conn.run("UPDATE public.invoices SET amount = amount + 1 WHERE id = 1")
        conn.run("UPDATE public.shipments SET weight = weight * 2 WHERE id = 1")
        # Another partition.
        conn.run("UPDATE public.invoices SET issued_on = '2026-02-01' WHERE id = 3")
        conn.run("DELETE FROM public.invoices WHERE id = 4")
        conn.run("DELETE FROM public.shipments WHERE id = 4")
        conn.run("UPDATE public.invoices SET id = 200 WHERE id = 2")
        conn.run("UPDATE public.shipments SET id = 200 WHERE id = 2")
    return _phase(stack, port, "marker-changed", lambda t: COLUMNS[t])


@pytest.fixture(scope="module")
def altered(stack: LocalStack, port: int, changed: Phase) -> Phase:
    """In one batch: a column added at the source and set on some rows, then both tables
    truncated and new rows written, one with the new column set and one without."""
    with stack.connect() as conn:
        conn.run("ALTER TABLE public.invoices ADD COLUMN due_on date")
        conn.run("ALTER TABLE public.shipments ADD COLUMN signed_by text")
        conn.run("UPDATE public.invoices SET due_on = '2026-05-31' WHERE id IN (1, 200)")
        conn.run("UPDATE public.shipments SET signed_by = 'Ada' WHERE id = 3")
        conn.run("TRUNCATE public.invoices")
        conn.run("TRUNCATE public.shipments")
        for i in (5, 8):
            _invoice(conn, i, "2026-06-01", "8.88")
            _shipment(conn, i)
        conn.run("UPDATE public.invoices SET due_on = '2026-06-30' WHERE id = 8")
        conn.run("UPDATE public.shipments SET signed_by = 'Grace' WHERE id = 8")
    return _phase(stack, port, "marker-altered", lambda t: [*COLUMNS[t], ADDED[t]])


@pytest.mark.parametrize("table", [INVOICES, SHIPMENTS])
def test_catalog_after_changes_equals_postgres(changed: Phase, table: str) -> None:
    """Both tables' first merge: the merge-on-read one is all base files yet (its first load
    goes through bulk insert and the run's later changes into the same file groups)."""
    read = changed[table]
    assert read["trino"] == read["postgres"]


def test_catalog_key_change_keeps_unchanged_toast_value(changed: Phase, altered: Phase) -> None:
    notes = {row[0]: row[-1] for row in changed[INVOICES]["trino"]}
    manifests = {row[0]: row[-1] for row in changed[SHIPMENTS]["trino"]}
    assert (notes[KEY_CHANGED], manifests[KEY_CHANGED]) == (f"2:{TOAST}", f"2:{TOAST}")
    versions = [r for r in altered["history"]["trino"] if r["id"] == KEY_CHANGED]
    assert versions and all(v["notes"] == f"2:{TOAST}" for v in versions)


@pytest.mark.parametrize("table", [INVOICES, SHIPMENTS])
def test_catalog_types_as_athena_reads_them(changed: Phase, table: str) -> None:
    types = changed[table]["types"]
    assert {c: types.get(c) for c in COLUMNS[table]} == TYPES[table]


def test_catalog_unchanged_toast_value_kept(changed: Phase) -> None:
    notes = {row[0]: row[-1] for row in changed[INVOICES]["trino"]}
    manifests = {row[0]: row[-1] for row in changed[SHIPMENTS]["trino"]}
    assert (notes[1], manifests[1]) == (f"1:{TOAST}", f"1:{TOAST}")


def test_catalog_key_change_and_delete_leave_no_old_key(changed: Phase) -> None:
    for table in (INVOICES, SHIPMENTS):
        ids = [row[0] for row in changed[table]["trino"]]
        assert 2 not in ids and 4 not in ids and 200 in ids, (table, ids)


def test_catalog_partition_move_reads_new_partition_only(changed: Phase) -> None:
    rows = [row for row in changed[INVOICES]["trino"] if row[0] == 3]
    assert [row[2] for row in rows] == [dt.date(2026, 2, 1)]


def test_catalog_copy_on_write_added_column_and_truncate_equals_postgres(altered: Phase) -> None:
    read = altered[INVOICES]
    assert [row[0] for row in read["trino"]] == [5, 8]
    assert read["trino"] == read["postgres"]
    assert read["types"][ADDED[INVOICES]] == "date"


def test_catalog_merge_on_read_added_column_in_both_names(
    stack: LocalStack, port: int, altered: Phase
) -> None:
    for name in (_lake_name(SHIPMENTS), f"{_lake_name(SHIPMENTS)}_rt"):
        described = local_trino.run_query(port, f"DESCRIBE hudi.{DATABASE}.{name}")
        assert [ADDED[SHIPMENTS], "varchar"] in [row[:2] for row in described.rows], name


@pytest.mark.xfail(
    strict=True,
    reason="Trino 476's hudi connector reads merge-on-read tables from base files only "
    "(no log merging, also under <table>_rt); Athena's snapshot query reads them merged",
)
def test_catalog_merge_on_read_snapshot_after_log_changes_equals_postgres(
    altered: Phase,
) -> None:
    read = altered[SHIPMENTS]
    assert read["trino"] == read["postgres"]


def test_catalog_registration_names_and_input_formats_as_athena_reads_them(
    changed: Phase,
) -> None:
    ours = {_lake_name(INVOICES), _lake_name(SHIPMENTS), f"{_lake_name(SHIPMENTS)}_rt"}
    formats = {t: f for t, f in changed["catalog"]["formats"].items() if t in ours}
    assert formats == {
        _lake_name(INVOICES): "org.apache.hudi.hadoop.HoodieParquetInputFormat",
        _lake_name(SHIPMENTS): "org.apache.hudi.hadoop.HoodieParquetInputFormat",
        f"{_lake_name(SHIPMENTS)}_rt": (
            "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
        ),
    }


def test_catalog_partitions_registered_are_the_source_days(changed: Phase) -> None:
    days = sorted({row[2].isoformat() for row in changed[INVOICES]["postgres"]})
    partitions = changed["catalog"]["partitions"]
    # A partition left empty by a move or delete stays registered (as Glue's catalog keeps it).
    assert set(days) <= set(partitions) and "2026-02-01" in partitions, (days, partitions)


def test_catalog_values_decimal_and_time_exact(changed: Phase) -> None:
    """The first invoice as Trino returns it: decimal scale and UTC instant kept."""
    (row,) = [r for r in changed[INVOICES]["trino"] if r[0] == 1]
    assert row[3] == Decimal("101.10")
    assert row[4] == dt.datetime(2026, 3, 2, 8, 11, 12, 345000)


def _versions(history: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    by_key: dict[int, list[dict[str, Any]]] = {}
    for row in history:
        by_key.setdefault(row["id"], []).append(row)
    return by_key


@pytest.mark.parametrize("phase", ["changed", "altered"])
def test_history_through_trino_is_every_change_postgres_made(
    phase: str, request: pytest.FixtureRequest
) -> None:
    """One row per change, each key's in order, with the row's values (the unchanged TOAST
    value filled, a delete's last image; the snapshot's reads are its first rows)."""
    history = request.getfixturevalue(phase)["history"]
    columns = ("customer", "issued_on", "amount", "notes")
    op = {"r": "c"}  # a snapshot read is the row's creation
    seen = [
        [r["id"], op.get(r["_cdc_op"], r["_cdc_op"]), *(r[c] for c in columns)]
        for r in history["trino"]
    ]
    expected = [list(row) for row in history["audit"]]
    assert seen == expected


def test_history_through_trino_versions_neither_overlap_nor_stay_open(altered: Phase) -> None:
    """Each key's versions follow each other (a version closes when the next begins, a delete
    is a row of empty validity); the only gaps are the truncate's; the keys PostgreSQL holds
    now have one current row each, their last, and no other key has one."""
    history = altered["history"]
    gaps = set()
    for key, versions in _versions(history["trino"]).items():
        for before, after in itertools.pairwise(versions):
            assert before["_cdc_valid_to"] is not None, (key, before)
            assert before["_cdc_valid_to"] <= after["_cdc_valid_from"], (key, before, after)
            if before["_cdc_op"] != "d" and before["_cdc_valid_to"] < after["_cdc_valid_from"]:
                gaps.add(before["_cdc_valid_to"])
        deletes = [v for v in versions if v["_cdc_op"] == "d"]
        assert all(v["_cdc_valid_to"] == v["_cdc_valid_from"] for v in deletes), (key, deletes)
    assert len(gaps) <= 1, gaps  # versions closed at the truncate, before their key came back
    current = sorted(r["id"] for r in history["trino"] if r["_cdc_current"])
    assert current == history["live"] == [5, 8]
    last = {
        key: versions[-1]["_cdc_current"] for key, versions in _versions(history["trino"]).items()
    }
    assert [key for key, is_current in last.items() if is_current] == current


@pytest.fixture(scope="module")
def erased(stack: LocalStack, port: int, altered: Phase) -> dict[str, Any]:
    """``cdclake erase`` of invoice 4 as an operator runs it, with what the stack stored of its
    values before and after, and the history through Trino after."""
    topic = f"{stack.config.prefix}.{INVOICES}"
    before = stored_text(stack, topic)
    ran = run_cli(
        stack.root, "erase", "--env", "local", "--table", INVOICES, "--key", f"id={ERASED}"
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    return {
        "before": before,
        "after": stored_text(stack, topic),
        "history": _history(stack, port),
        "printed": json.loads(ran.stdout.strip().splitlines()[-1]),
    }


def test_erase_capture_path_key_values_in_no_stored_file(erased: dict[str, Any]) -> None:
    value = f"customer {ERASED}"
    assert (value in erased["before"], value in erased["after"]) == (True, False)


def test_erase_capture_path_other_keys_history_unchanged(
    altered: Phase, erased: dict[str, Any]
) -> None:
    kept = [r for r in altered["history"]["trino"] if r["id"] != ERASED]
    assert len(kept) < len(altered["history"]["trino"])  # the key had versions
    assert erased["history"]["trino"] == kept


def test_erase_capture_path_prints_the_table_and_key(erased: dict[str, Any]) -> None:
    printed = erased["printed"]
    assert (printed["table"], printed["key"]) == (INVOICES, {"id": str(ERASED)})


# --- a config change rebuilt as a copy (the table keeps its history) ---------------------------

REBUILT_ROWS = 200_000_000  # expected_rows: a record index of 17 file groups, not 10


@pytest.fixture(scope="module")
def copied(
    stack: LocalStack, port: int, erased: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Invoices' record index sized up by config (a copy of config/ here), with an insert and
    an update waiting, rebuilt by `cdclake rebuild --env local` as an operator runs it; what
    readers see after. A larger index than config asks is kept, so every later run of the
    session's stack, under config/local.yaml, takes the rebuilt table as it is."""
    from cdclake_merge.layout import stored_layout
    from cdclake_merge.storage import LocalFileSystem
    from environment.capacity import record_index_file_groups

    config_dir = tmp_path_factory.mktemp("config")
    shutil.copytree(ROOT / "config", config_dir, dirs_exist_ok=True)
    local, entry = config_dir / "local.yaml", f"  - name: {INVOICES}\n"
    assert entry in local.read_text()
    local.write_text(
        local.read_text().replace(entry, f"{entry}    expected_rows: {REBUILT_ROWS}\n")
    )
    # A merge first: the erase deleted the metadata table, whose record index the next commit
    # builds again (until then no stored index size differs from config's).
    with stack.connect() as conn:
        conn.run("UPDATE public.invoices SET amount = 9.99 WHERE id = 5")
    _marked(stack, "marker-indexed")
    _merge(stack)
    with stack.connect() as conn:
        _invoice(conn, 9, "2026-06-02", "9.00")
        conn.run("UPDATE public.invoices SET amount = 8.80 WHERE id = 8")
    _marked(stack, "marker-copied")
    ran = run_cli(
        stack.root,
        *("rebuild", "--env", "local", "--table", INVOICES, "--config-dir", str(config_dir)),
        *("--timeout", "300"),
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    root = Path(stack.status()["warehouse"]) / f"{DATABASE}.db" / f"{_lake_name(INVOICES)}__g2"
    locations = registered_partition_locations(stack, DATABASE, _lake_name(INVOICES))
    try:
        read = _read(stack, port, INVOICES, [*COLUMNS[INVOICES], ADDED[INVOICES]])
    except Exception as exc:  # what Trino and the metastore said, for the reader of a CI log
        log = (stack.root / "logs" / "trino.log").read_text()[-6000:]
        raise AssertionError(f"{exc}\nlocations {locations}\n{log}") from None
    stored = stored_layout(LocalFileSystem(), str(root / ".hoodie"))
    return {
        "printed": ran.stderr,
        "read": read,
        "history": _history(stack, port),
        "locations": locations,
        "partitions": registered_partitions(stack, DATABASE, _lake_name(INVOICES)),
        "groups": stored.record_index_file_groups if stored else None,
        "wanted": record_index_file_groups(REBUILT_ROWS),
    }


def test_rebuild_copy_capture_path_begun_as_a_copy_and_swapped(copied: dict[str, Any]) -> None:
    assert "rebuild of generation 2 begun (a copy of generation 1)" in copied["printed"]
    assert "caught up and swapped in" in copied["printed"]


def test_rebuild_copy_capture_path_table_through_trino_equals_postgres(
    copied: dict[str, Any],
) -> None:
    assert copied["read"]["trino"] == copied["read"]["postgres"]
    assert [
        float(next(r[3] for r in copied["read"]["trino"] if r[0] == 5)),
        max(r[0] for r in copied["read"]["trino"]),
    ] == [9.99, 9]


def test_rebuild_copy_capture_path_history_is_every_change_but_the_erased_key(
    copied: dict[str, Any],
) -> None:
    history = copied["history"]
    columns = ("customer", "issued_on", "amount", "notes")
    op = {"r": "c"}
    seen = [
        [r["id"], op.get(r["_cdc_op"], r["_cdc_op"]), *(r[c] for c in columns)]
        for r in history["trino"]
    ]
    assert seen == [list(row) for row in history["audit"] if row[0] != ERASED]
    current = sorted(r["id"] for r in history["trino"] if r["_cdc_current"])
    assert current == history["live"] == [5, 8, 9]


def test_rebuild_copy_capture_path_partitions_point_at_the_new_generation(
    copied: dict[str, Any],
) -> None:
    assert copied["partitions"] and len(copied["locations"]) == len(copied["partitions"])
    generation = f"/{_lake_name(INVOICES)}__g2/"
    assert all(generation in location for location in copied["locations"]), copied["locations"]


def test_rebuild_copy_capture_path_record_index_takes_the_new_size(copied: dict[str, Any]) -> None:
    assert copied["groups"] == copied["wanted"] == 17
