"""The runbooks of docs/operations.md, each on the session's local stack, with its commands.

Replication slot lost → ``cdclake snapshot`` → merge → ``cdclake validate``; quarantined lines
after a fix → ``cdclake quarantine list | replay`` → ``cdclake validate``; ``cdclake status``.
The commands run as processes, as an operator runs them (``quarantine replay`` starts its own
Spark, as it does for an operator); the merges between them run in the session's shared
SparkSession (``run_merge`` over the table's sink, what ``cdclake merge --env local`` runs).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdclake.local.stack import LocalStack
from environment.paths import CONFIG_DIR
from tests.local.local_helpers import (
    change_files,
    lose_slot,
    merge_in_session,
    missing_merge_prerequisite,
    pointed_at,
    row_ids,
    run_cdclake,
    spark_on_stack_s3,
    wait_for_events,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.moto, pytest.mark.spark]
TOPIC = "cdclake-local.public.customers"
# Rows of these tests only: test_local_stack.py uses ids below 1000 in the same table.
BEFORE, LOST_UPDATE, LOST_INSERT, AFTER = (1000, 1001, 1002), 1000, 1003, 1004
GOOD = range(2000, 2300)
HUGE_BALANCE, HUGE_FEE = 2300, 2301
SENTINEL, PENDING, DISPATCHED = 1999, 2400, 2401


@pytest.fixture(scope="module")
def stack(local_stack: LocalStack) -> Iterator[LocalStack]:
    """The session's stack, with this process pointed at it as `cdclake --env local` would be."""
    reason = missing_merge_prerequisite()
    if reason:
        pytest.skip(f"the runbooks merge: {reason}")
    with pointed_at(local_stack):
        yield local_stack


@pytest.fixture(scope="module")
def merge(stack: LocalStack, spark: Any) -> Any:
    def run(table: str) -> dict[str, Any]:
        with spark_on_stack_s3(spark, stack):
            return merge_in_session(spark, table)

    return run


def _cdclake_json(
    stack: LocalStack, *args: str, codes: tuple[int, ...] = (0,), timeout: float = 120
) -> Any:
    result = run_cdclake(stack, *args, "--json", timeout=timeout)
    assert result.returncode in codes, f"cdclake {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return json.loads(result.stdout)


# --- replication slot lost → cdclake snapshot ------------------------------------------------


@pytest.fixture(scope="module")
def customers(stack: LocalStack) -> None:
    """public.customers (as test_local_stack.py makes it) in the publication, snapshot done."""
    with stack.connect() as conn:
        conn.run(
            "CREATE TABLE IF NOT EXISTS public.customers "
            "(id int PRIMARY KEY, name text, password_hash text)"
        )
        conn.run(
            "INSERT INTO public.customers VALUES (:i, 's', 'x') ON CONFLICT DO NOTHING",
            i=SENTINEL,
        )
    joined = run_cdclake(stack, "local", "reconcile")
    assert joined.returncode == 0, joined.stderr
    _, signalled, names = joined.stderr.partition("signalled")
    if signalled and "public.customers" in names:
        # The table just joined: let that snapshot end first, so that it cannot also read the
        # rows the tests write (it reads keys up to the largest one present when it starts).
        wait_for_events(stack, TOPIC, lambda seen: SENTINEL in row_ids(seen, "r"))


@pytest.fixture(scope="module")
def lost_rows(stack: LocalStack, customers: None) -> list[dict[str, Any]]:
    """Rows captured, then changed while the slot was gone, then capture going on."""
    with stack.connect() as conn:
        for row in BEFORE:
            conn.run("INSERT INTO public.customers VALUES (:i, 'before', 'x')", i=row)
    wait_for_events(stack, TOPIC, lambda seen: set(BEFORE) <= row_ids(seen))

    def lost_changes() -> None:
        with stack.connect() as conn:
            conn.run("UPDATE public.customers SET name = 'lost' WHERE id = :i", i=LOST_UPDATE)
            conn.run("INSERT INTO public.customers VALUES (:i, 'lost', 'x')", i=LOST_INSERT)

    lose_slot(stack, lost_changes)
    with stack.connect() as conn:
        conn.run("INSERT INTO public.customers VALUES (:i, 'after', 'x')", i=AFTER)
    return wait_for_events(stack, TOPIC, lambda seen: AFTER in row_ids(seen))


def test_slot_lost_changes_made_meanwhile_never_captured(lost_rows: list[dict[str, Any]]) -> None:
    assert LOST_INSERT not in row_ids(lost_rows)
    updated = [p for p in lost_rows if (p.get("after") or {}).get("id") == LOST_UPDATE]
    assert {p["after"]["name"] for p in updated} == {"before"}


def test_snapshot_unconfigured_table_refused_in_one_line(stack: LocalStack) -> None:
    result = run_cdclake(stack, "snapshot", "--env", "local", "--table", "public.stray")
    assert result.returncode == 2
    assert "not configured" in result.stderr and "public.stray" in result.stderr


def test_snapshot_lost_rows_arrive_as_incremental_reads(
    stack: LocalStack, lost_rows: list[dict[str, Any]]
) -> None:
    signal = json.loads(
        run_cdclake(stack, "snapshot", "--env", "local", "--table", "public.customers").stdout
    )
    assert signal["type"] == "incremental" and signal["signal_table"] == "cdclake.debezium_signal"
    reads = wait_for_events(
        stack, TOPIC, lambda seen: {LOST_INSERT, LOST_UPDATE} <= row_ids(seen, "r")
    )
    newest = {p["after"]["id"]: p for p in reads if p["op"] == "r"}
    for row in (LOST_INSERT, LOST_UPDATE):
        assert newest[row]["after"]["name"] == "lost"
        assert newest[row]["source"]["snapshot"] == "incremental"


def test_validate_after_resnapshot_and_merge_finds_lake_equal(
    stack: LocalStack, merge: Any, lost_rows: list[dict[str, Any]]
) -> None:
    wait_for_events(stack, TOPIC, lambda seen: LOST_INSERT in row_ids(seen, "r"))
    merged = merge("public.customers")
    assert merged["committed"], merged
    report = _cdclake_json(stack, "validate", "--env", "local", "--table", "public.customers")
    assert report["equal"], report


# --- quarantined lines after a fix → cdclake quarantine list | replay --------------------------


@pytest.fixture(scope="module")
def quarantined(
    stack: LocalStack, merge: Any, customers: None, lost_rows: list[dict[str, Any]]
) -> dict[str, Any]:
    """Two rows whose numeric values fit no decimal(38,18): quarantined by the merge."""
    with stack.connect() as conn:
        conn.run(
            "INSERT INTO public.customers SELECT g, 'good', 'x' "
            "FROM generate_series(CAST(:a AS int), CAST(:b AS int)) g",
            a=GOOD[0],
            b=GOOD[-1],
        )
        # New unconstrained numeric columns: Debezium sends VariableScaleDecimal, which the
        # merge reads as decimal(38,18); 10^25 does not fit it.
        conn.run("ALTER TABLE public.customers ADD COLUMN IF NOT EXISTS balance numeric")
        conn.run("ALTER TABLE public.customers ADD COLUMN IF NOT EXISTS fee numeric")
        conn.run(
            "INSERT INTO public.customers (id, name, password_hash, balance, fee) VALUES "
            "(:a, 'huge balance', 'x', 1e25, NULL), (:b, 'huge fee', 'x', 1, 1e25)",
            a=HUGE_BALANCE,
            b=HUGE_FEE,
        )
    wait_for_events(stack, TOPIC, lambda seen: {HUGE_BALANCE, HUGE_FEE, *GOOD} <= row_ids(seen))
    merged = merge("public.customers")
    assert merged["committed"] and merged["quarantined"] == 2, merged
    return merged


@pytest.fixture(scope="module")
def fixed_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """config/local.yaml with the fix the quarantine reason suggests, for balance only."""
    raw = yaml.safe_load((CONFIG_DIR / "local.yaml").read_text())
    for table in raw["tables"]:
        if table["name"] == "public.customers":
            table["column_types"] = {"balance": "string"}
    path = tmp_path_factory.mktemp("fixed") / "local.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _listed(stack: LocalStack) -> list[dict[str, Any]]:
    listing = _cdclake_json(
        stack, "quarantine", "list", "--env", "local", "--table", "public.customers"
    )
    return list(listing["lines"])


def _line_of(stack: LocalStack, line: dict[str, Any]) -> dict[str, Any]:
    """The change file line a quarantine entry names, read from the bucket."""
    files = change_files(stack)
    key = line["source_file"].split("://", 1)[1].split("/", 1)[1]
    record = files[key].decode().split("\n")[line["line"] - 1]
    return dict(json.loads(record)["payload"])


def test_quarantine_list_names_source_line_and_reason(
    stack: LocalStack, quarantined: dict[str, Any]
) -> None:
    lines = _listed(stack)
    assert len(lines) == 2
    by_id = {_line_of(stack, line)["after"]["id"]: line for line in lines}
    assert set(by_id) == {HUGE_BALANCE, HUGE_FEE}
    assert "column 'balance'" in by_id[HUGE_BALANCE]["reason"]
    assert "column 'fee'" in by_id[HUGE_FEE]["reason"]
    # The reason names the type and the fix (column_types: string).
    assert all("decimal(38,18)" in line["reason"] for line in lines)
    assert all("column_types" in line["reason"] for line in lines)


def _replay(stack: LocalStack, config: Path) -> dict[str, Any]:
    return dict(
        _cdclake_json(
            stack,
            "quarantine",
            "replay",
            "--env",
            "local",
            "--table",
            "public.customers",
            "--config",
            str(config),
            timeout=300,
        )
    )


@pytest.fixture(scope="module")
def replayed(stack: LocalStack, quarantined: dict[str, Any], fixed_config: Path) -> dict[str, Any]:
    return _replay(stack, fixed_config)


def test_quarantine_replay_after_fix_applies_readable_line_once(
    replayed: dict[str, Any],
) -> None:
    assert replayed["applied"] == 1 and replayed["still_failing"] == 1, replayed
    assert replayed["merge"]["upserts"] == 1 and replayed["merge"]["quarantined"] == 0


def test_quarantine_replay_again_changes_nothing(
    stack: LocalStack, replayed: dict[str, Any], fixed_config: Path
) -> None:
    again = _replay(stack, fixed_config)
    assert again["replay"] is None and again["applied"] == 0 and again["still_failing"] == 1
    status = _cdclake_json(stack, "status", "--env", "local")
    customers = next(t for t in status["tables"] if t["table"] == "public.customers")
    assert customers["version"] == replayed["version"]


def test_quarantine_unfixed_line_stays_listed_with_its_reason(
    stack: LocalStack, replayed: dict[str, Any]
) -> None:
    lines = _listed(stack)
    assert len(lines) == 1
    assert _line_of(stack, lines[0])["after"]["id"] == HUGE_FEE
    assert "column 'fee'" in lines[0]["reason"]


def test_validate_after_replay_names_only_the_still_quarantined_key(
    stack: LocalStack, replayed: dict[str, Any]
) -> None:
    report = _cdclake_json(
        stack, "validate", "--env", "local", "--table", "public.customers", codes=(1,)
    )
    assert report["missing_key_examples"] == [{"id": str(HUGE_FEE)}], report
    assert report["differing_rows"] == 0 and report["extra_keys"] == 0, report


# --- cdclake status ---------------------------------------------------------------------------


def test_status_local_shows_commit_lag_pending_quarantine_and_connectors(
    stack: LocalStack, replayed: dict[str, Any]
) -> None:
    with stack.connect() as conn:
        conn.run("INSERT INTO public.customers VALUES (:i, 'pending', 'x')", i=PENDING)
    wait_for_events(stack, TOPIC, lambda seen: PENDING in row_ids(seen))
    screen = _cdclake_json(stack, "status", "--env", "local")
    customers = next(t for t in screen["tables"] if t["table"] == "public.customers")
    assert customers["last_commit"]["instant"].isdigit()
    assert customers["version"] == replayed["version"]
    assert customers["lag_seconds"] >= 0 and customers["lag_from"] in ("cloudwatch", "lake")
    assert customers["pending_files"] >= 1 and customers["quarantined_lines"] == 1
    assert "replay" in customers["last_run"]["detail"]
    assert {c["state"] for c in screen["connectors"].values()} == {"RUNNING"}
    assert all(not t["errors"] for t in screen["tables"]), screen
    table = run_cdclake(stack, "status", "--env", "local")
    assert table.returncode == 0 and "public.customers" in table.stdout


# --- cdclake dispatch: the dispatcher's decision, and its merges run here -------------------


def _customers(decided: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in decided["tables"] if t["table"] == "public.customers")


def test_dispatch_local_merges_what_waits_then_starts_nothing(
    stack: LocalStack, replayed: dict[str, Any], fixed_config: Path
) -> None:
    # The config the table is merged with since the replay (balance read as a string).
    dispatch = ("dispatch", "--env", "local", "--config-dir", str(fixed_config.parent))
    with stack.connect() as conn:
        conn.run("INSERT INTO public.customers VALUES (:i, 'dispatched', 'x')", i=DISPATCHED)
    wait_for_events(stack, TOPIC, lambda seen: DISPATCHED in row_ids(seen))
    waiting = _customers(_cdclake_json(stack, *dispatch, "--dry-run"))
    assert waiting["start"] is True and waiting["files_pending"], waiting
    ran = _customers(_cdclake_json(stack, *dispatch, timeout=600))
    assert ran["run"]["committed"] and ran["run"]["files_applied"] >= 1, ran
    after = _customers(_cdclake_json(stack, *dispatch, "--dry-run"))
    assert (after["start"], after["reason"], after["files_pending"]) == (
        False,
        "no change files wait",
        [],
    )


# --- cdclake snapshot as on AWS: through a DSN (last: it snapshots customers once more) -----


def test_snapshot_dsn_with_password_refused_without_echoing_it(stack: LocalStack) -> None:
    result = run_cdclake(
        stack,
        "snapshot",
        "--env",
        "local",
        "--table",
        "public.customers",
        "--dsn",
        "postgresql://someone:hunter2@127.0.0.1:1/app",
    )
    assert result.returncode == 1 and "holds a password" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr


def test_snapshot_through_dsn_inserts_the_signal_row(stack: LocalStack, replayed: Any) -> None:
    dsn = stack.status()["postgres_dsn"]
    sent = run_cdclake(
        stack, "snapshot", "--env", "local", "--table", "public.customers", "--dsn", dsn, "--no-ssl"
    )
    assert sent.returncode == 0, sent.stderr
    signal_id = json.loads(sent.stdout)["signal_id"]
    with stack.connect() as conn:
        rows = conn.run("SELECT type, data FROM cdclake.debezium_signal WHERE id = :i", i=signal_id)
    assert [(kind, json.loads(data)) for kind, data in rows] == [
        ("execute-snapshot", {"data-collections": ["public.customers"], "type": "incremental"})
    ]
