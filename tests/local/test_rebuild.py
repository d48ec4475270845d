"""A rebuild on the real capture path (issue #49): PostgreSQL -> Debezium -> Kafka -> the S3
sink -> merge -> Hudi -> the stack's Hive metastore -> Trino, on the session's local stack.

public.prices holds numeric(10,2), integer and text columns and a `label`, is merged once by
``cdclake merge --env local`` (a process: it registers the table in the stack's metastore),
then ALTERed to numeric(14,4), double precision and integer, `label` dropped and `note` added,
with DML before and after: the next merge fails needing a rebuild. ``cdclake rebuild --env
local`` is then run as an operator runs it, as a process, and killed (SIGKILL) once its
snapshot signal is in the signal table; a rebuild run in this process's shared SparkSession
(it syncs no catalog) writes the new generation and swaps nothing; then the command is run
again, as a process, with a config that makes the table MERGE_ON_READ: it continues (signalling
nothing) and is killed once its run has committed an update made for it. Run a third time, it
finishes whatever the kill cut short (the runs, the swap or the swap's catalog update: once the
snapshot's COMPLETED notification has landed and everything listed is applied) and the
metastore's entry names the new generation. Trino, Athena's engine, reads the entry by name
throughout: the whole table with the old types during the rebuild, PostgreSQL's rows and the
new types (``DESCRIBE``: decimal(14,4), double, integer) after it; ``cdclake validate``'s
comparison says equal.

public.prices keeps config's default ``drop_columns: keep``: the policy the dispatcher's own
rebuilds take unless a table says otherwise, so after the swap the dropped `label` is there,
null in every row (the snapshot reads no value for it), and the added `note` holds
PostgreSQL's values (docs/merge-job.md "Schema changes": a rename is that drop and add).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from cdclake.local.stack import LocalStack
from tests.local.local_helpers import (
    REPO_ROOT,
    kill_group,
    merge_in_session,
    missing_merge_prerequisite,
    pointed_at,
    row_ids,
    run_cdclake,
    snapshot_signals,
    spark_on_stack_s3,
    start_cdclake,
    through_trino,
    until,
    wait_for_events,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.moto, pytest.mark.spark]
TABLE = "public.prices"
TOPIC = "cdclake-local.public.prices"
NOTIFICATIONS = "cdclake-local.notifications"  # environment.names.notifications_topic
ROWS = range(1, 21)
ADDED, UPDATED_BEFORE, UPDATED_DURING, UPDATED_KILLED = 21, 1, 2, 3


def _completed(notifications: list[dict[str, Any]], snapshot_id: str | None) -> bool:
    return any(n["id"] == snapshot_id and n["type"] == "COMPLETED" for n in notifications)


def _updated(changes: list[dict[str, Any]], key: int) -> bool:
    return any(c["op"] == "u" and c["after"]["id"] == key for c in changes)


def _version(sink: Any) -> int:
    """The generation's newest version, read as its runs write it (-1 while unreadable)."""
    try:
        return int(sink.load().version)
    except (OSError, ValueError):
        return -1


@pytest.fixture(scope="module")
def rebuilt(
    local_stack: LocalStack, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The table through its life: what readers saw during and after the rebuild."""
    reason = missing_merge_prerequisite()
    if reason:
        pytest.skip(f"the rebuild merges: {reason}")
    from cdclake.ops import AnyFileSystem, local_place
    from cdclake.rebuild import config_generation_sink, sidecar_of
    from cdclake.validate import local_target, validate_once
    from cdclake_merge.generations import read_generations
    from cdclake_merge.rebuild import merge_table, rebuild_step
    from environment.config import load_config

    seen: dict[str, Any] = {}
    with pointed_at(local_stack), spark_on_stack_s3(spark, local_stack):
        with local_stack.connect() as conn:
            conn.run(
                "CREATE TABLE public.prices (id int PRIMARY KEY, amount numeric(10,2), qty int, "
                "code text, label text)"
            )
            conn.run(
                "INSERT INTO public.prices "
                "SELECT g, g * 1.25, g, g::text, 'l' || g FROM generate_series(1, 20) g"
            )
        assert local_stack.reconcile().joined == [TABLE]
        wait_for_events(local_stack, TOPIC, lambda seen: row_ids(seen, "r") >= set(ROWS))
        first = run_cdclake(local_stack, "merge", "--env", "local", "--table", TABLE, timeout=300)
        assert first.returncode == 0, first.stderr[-2000:]
        config = load_config("local")
        place = local_place(config, TABLE)
        seen["before"] = through_trino(local_stack, place.lake_table)

        with local_stack.connect() as conn:
            conn.run(f"UPDATE public.prices SET amount = 7.77 WHERE id = {UPDATED_BEFORE}")
            conn.run(
                "ALTER TABLE public.prices ALTER amount TYPE numeric(14,4), "
                "ALTER qty TYPE double precision, ALTER code TYPE integer USING code::integer, "
                "DROP COLUMN label, ADD COLUMN note text"
            )
            conn.run(f"INSERT INTO public.prices VALUES ({ADDED}, 1.2345, 0.5, 21, 'added')")
        wait_for_events(local_stack, TOPIC, lambda seen: ADDED in row_ids(seen, "c"))
        with pytest.raises(Exception, match="needs a rebuild") as refused:
            merge_in_session(spark, TABLE)
        seen["refused"] = str(refused.value)
        # The rebuild also takes a config change: public.prices becomes MERGE_ON_READ in a
        # copy of config/, which the live COPY_ON_WRITE table refuses until it is rebuilt.
        mor_dir = tmp_path_factory.mktemp("config")
        shutil.copytree(REPO_ROOT / "config", mor_dir, dirs_exist_ok=True)
        entry = f"  - name: {TABLE}\n"
        local_yaml = mor_dir / "local.yaml"
        local_yaml.write_text(
            local_yaml.read_text().replace(entry, f"{entry}    hudi_table_type: MERGE_ON_READ\n")
        )
        with pytest.raises(Exception, match="needs a rebuild") as retyped:
            merge_in_session(spark, TABLE, config_dir=mor_dir)
        seen["retyped"] = str(retyped.value)
        mor = load_config("local", config_dir=mor_dir)
        mor_place = local_place(mor, TABLE)
        mor_sink = config_generation_sink(mor, mor_place, lambda: spark, AnyFileSystem())

        fs = AnyFileSystem()
        signalled_before = snapshot_signals(local_stack, TABLE)
        # The command as an operator runs it, killed once its snapshot signal is in the
        # signal table, before its JVM has started: what the restart must continue.
        killed = start_cdclake(local_stack, "rebuild", "--env", "local", "--table", TABLE)
        try:
            until(
                lambda: bool(snapshot_signals(local_stack, TABLE) - signalled_before),
                "cdclake rebuild to send its snapshot signal",
                timeout=60,
            )
        finally:
            kill_group(killed)
        seen["killed"] = killed.returncode
        seen["state"] = state = read_generations(fs, sidecar_of(place))
        with local_stack.connect() as conn:
            conn.run(
                f"UPDATE public.prices SET amount = 8.8888, note = 'during' "
                f"WHERE id = {UPDATED_DURING}"
            )
        seen["notifications"] = wait_for_events(
            local_stack, NOTIFICATIONS, lambda seen: _completed(seen, state.snapshot_id)
        )
        wait_for_events(local_stack, TOPIC, lambda seen: _updated(seen, UPDATED_DURING))
        # A rebuild run that does not know the snapshot finished: it writes generation 2 and
        # swaps nothing, so readers keep generation 1 while the new one holds every row.
        step = rebuild_step(lambda: spark, fs, mor_sink, mor_place.merge_options())
        seen["during"] = step.result.committed and not step.swapped
        seen["read_during"] = through_trino(local_stack, place.lake_table)

        # The command killed again, once its run has committed to generation 2 a change made
        # for it (the run above applied the rest): the kill lands before the swap, in its
        # state or catalog step or in a table service after the commit, and the command run
        # again below finishes whichever it was.
        with local_stack.connect() as conn:
            # Its amount only: a MERGE_ON_READ delta commit lands in a log file, which the
            # read-optimized `<table>` Trino reads shows only after a compaction.
            conn.run(f"UPDATE public.prices SET amount = 3.3333 WHERE id = {UPDATED_KILLED}")
        wait_for_events(local_stack, TOPIC, lambda seen: _updated(seen, UPDATED_KILLED))
        built = mor_sink(2, False)
        committed = _version(built)
        cut = start_cdclake(
            local_stack,
            *("rebuild", "--env", "local", "--table", TABLE, "--config-dir", str(mor_dir)),
        )
        try:
            until(
                lambda: _version(built) > committed,
                "cdclake rebuild to commit to generation 2",
                timeout=240,
            )
        finally:
            seen["cut_said"] = " ".join(kill_group(cut)[1].split())  # lines joined again
        seen["killed_after_commit"] = cut.returncode
        seen["state_after_kill"] = read_generations(fs, sidecar_of(place))

        # The command run again as an operator runs it, with the config that retypes the
        # table: it continues the rebuild, signalling nothing, and swaps the metastore's entry.
        again = run_cdclake(
            local_stack,
            *("rebuild", "--env", "local", "--table", TABLE, "--config-dir", str(mor_dir)),
            *("--timeout", "90"),
            timeout=300,
        )
        seen["again"] = again
        seen["after"] = through_trino(local_stack, place.lake_table)
        with local_stack.connect() as conn:
            seen["source_notes"] = dict(conn.run("SELECT id, note FROM public.prices"))
        seen["validated"] = validate_once(local_target("local", TABLE))
        seen["signals"] = snapshot_signals(local_stack, TABLE) - signalled_before
        properties = fs.read_text(f"{mor_sink(2, False).root}/.hoodie/hoodie.properties")
        seen["table_type"] = dict(
            line.split("=", 1) for line in properties.splitlines() if "=" in line
        )["hoodie.table.type"]
        try:  # as `cdclake merge --env local` runs it: into the live generation
            seen["merged_after"] = merge_table(
                lambda: spark, fs, mor_sink, mor_place.merge_options()
            ).as_dict()
        except Exception as exc:  # the test on it says why
            seen["merged_after"] = {"error": str(exc)}
    yield seen


def _done(again: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """What the rerun command printed last (its JSON line), or its failure."""
    assert again.returncode == 0, again.stderr[-2000:]
    return dict(json.loads(again.stdout.strip().splitlines()[-1]))


def test_rebuild_local_merge_after_alter_refused_needing_a_rebuild(rebuilt: dict[str, Any]) -> None:
    assert "column 'amount' changed type from decimal(10,2) to decimal(14,4)" in rebuilt["refused"]


def test_rebuild_local_trino_before_rebuild_reads_source_types(rebuilt: dict[str, Any]) -> None:
    before = rebuilt["before"]["types"]
    assert (before["amount"], before["qty"], before["code"]) == (
        "decimal(10,2)",
        "integer",
        "varchar",
    )


def test_rebuild_local_trino_during_rebuild_reads_whole_table_with_old_types(
    rebuilt: dict[str, Any],
) -> None:
    assert rebuilt["during"]  # generation 2 took a commit before the swap
    during = rebuilt["read_during"]
    assert {row["id"] for row in during["rows"]} == set(ROWS)
    types = during["types"]
    assert (types["amount"], types["qty"], types["code"]) == ("decimal(10,2)", "integer", "varchar")


def test_rebuild_local_trino_after_swap_describes_new_types(rebuilt: dict[str, Any]) -> None:
    after = rebuilt["after"]["types"]
    assert (after["amount"], after["qty"], after["code"]) == ("decimal(14,4)", "double", "integer")


def test_rebuild_local_trino_after_swap_reads_changes_before_and_during(
    rebuilt: dict[str, Any],
) -> None:
    amounts = {row["id"]: row["amount"] for row in rebuilt["after"]["rows"]}
    assert len(amounts) == len(ROWS) + 1
    assert (amounts[UPDATED_BEFORE], amounts[UPDATED_DURING], amounts[ADDED]) == (
        Decimal("7.7700"),
        Decimal("8.8888"),
        Decimal("1.2345"),
    )


def test_rebuild_local_command_again_prints_generation_rows_and_seconds(
    rebuilt: dict[str, Any],
) -> None:
    done = _done(rebuilt["again"])
    assert (done["table"], done["generation"], done["rows"]) == (TABLE, 2, len(ROWS) + 1)
    assert done["seconds"] >= 0


def test_rebuild_local_validate_says_equal(rebuilt: dict[str, Any]) -> None:
    assert rebuilt["validated"].equal, rebuilt["validated"]


def test_rebuild_local_snapshot_completed_notification_lands_with_the_signal_id(
    rebuilt: dict[str, Any],
) -> None:
    snapshot_id = rebuilt["state"].snapshot_id
    assert snapshot_id is not None
    assert {
        (n["aggregate_type"], n["type"]) for n in rebuilt["notifications"] if n["id"] == snapshot_id
    } >= {("Incremental Snapshot", "STARTED"), ("Incremental Snapshot", "COMPLETED")}


def test_rebuild_local_killed_command_had_begun_and_signalled(rebuilt: dict[str, Any]) -> None:
    assert rebuilt["killed"] == -signal.SIGKILL
    assert (rebuilt["state"].building, rebuilt["state"].snapshot_id) == (2, *rebuilt["signals"])


def test_rebuild_local_command_killed_after_a_commit_run_again_finishes(
    rebuilt: dict[str, Any],
) -> None:
    assert rebuilt["killed_after_commit"] == -signal.SIGKILL, rebuilt["state_after_kill"]
    done = _done(rebuilt["again"])
    assert (done["generation"], done["rows"]) == (2, len(ROWS) + 1)
    # The killed run's update included: every column of every row equals PostgreSQL's.
    assert rebuilt["validated"].equal, rebuilt["validated"]


def test_rebuild_local_command_run_again_continues_without_a_second_signal(
    rebuilt: dict[str, Any],
) -> None:
    _done(rebuilt["again"])
    snapshot_id = rebuilt["state"].snapshot_id
    assert f"rebuild of generation 2 continued (snapshot {snapshot_id})" in rebuilt["cut_said"]
    assert len(rebuilt["signals"]) == 1


def test_rebuild_local_added_column_after_swap_holds_source_values(
    rebuilt: dict[str, Any],
) -> None:
    assert rebuilt["after"]["types"]["note"] == "varchar"
    notes = {row["id"]: row["note"] for row in rebuilt["after"]["rows"]}
    assert notes == rebuilt["source_notes"]


def test_rebuild_local_dropped_column_after_swap_kept_null(rebuilt: dict[str, Any]) -> None:
    assert rebuilt["after"]["types"]["label"] == "varchar"
    assert {row["label"] for row in rebuilt["after"]["rows"]} == {None}


def test_rebuild_local_merge_with_mor_config_before_rebuild_refused(
    rebuilt: dict[str, Any],
) -> None:
    assert "created otherwise than its config says" in rebuilt["retyped"]


def test_rebuild_local_live_generation_after_swap_is_merge_on_read(
    rebuilt: dict[str, Any],
) -> None:
    assert rebuilt["table_type"] == "MERGE_ON_READ"


def test_rebuild_local_merge_with_mor_config_after_swap_runs(rebuilt: dict[str, Any]) -> None:
    assert "error" not in rebuilt["merged_after"], rebuilt["merged_after"]["error"]
