"""``cdclake restore``: roll a lake table back to one of its daily savepoints.

The savepoints, the restore and what a run does after it are the merge library's
(:mod:`cdclake_merge.recovery`). Locally (``--env local``) the restore runs in this process
against the local stack's warehouse; on AWS it is a run of the table's Glue job with
``--mode restore`` (the job's role, Hudi bundle and catalog sync, and its one-run-at-a-time
concurrency, so no merge writes while it restores). ``--list`` shows the savepoints either way.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console

from cdclake.errors import fail, one_line
from cdclake.lake_reader import local_spark
from cdclake.ops import AnyFileSystem, LakePlace, local_path
from cdclake.quarantine import (
    ConfigDirOption,
    EnvOption,
    TableOption,
    open_table,
    resolve,
    start_mode_run,
    wait_for_run,
)
from cdclake_merge.pending import TablePaths
from cdclake_merge.recovery import (
    RestoreError,
    instant_time,
    parse_restore_target,
    restore_point,
    savepoints_in,
)

RESTORE_MODE = "restore"  # glue_jobs/merge_job.py --mode
console = Console(stderr=True, soft_wrap=True)


def savepoints(place: LakePlace) -> list[str]:
    """The table's savepoints, oldest first (its timeline's file names; S3 through boto3)."""
    timeline = TablePaths.of(place.warehouse, place.lake_table).timeline
    return savepoints_in(AnyFileSystem().list_dir(timeline))


def restore_locally(place: LakePlace, to: str) -> dict[str, Any]:
    """Restore a local table in this process; what it was restored to."""
    spark_factory = local_spark(local_path(place.warehouse))
    sink = open_table(place, spark_factory)
    state = sink.restore(spark_factory(), parse_restore_target(to))
    return {"table": place.lake_table, "version": state.version}


def start_restore(glue: Any, place: LakePlace, to: str) -> str:
    """Start the table's Glue job in restore mode; the run id. RuntimeError: one-line reason."""
    return start_mode_run(glue, place, {"--mode": RESTORE_MODE, "--restore_to": to})


def restore_command(
    env: EnvOption,
    table: TableOption,
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="latest (the newest savepoint), a date (its newest savepoint, UTC) or an ISO time",
        ),
    ] = "latest",
    list_only: Annotated[
        bool, typer.Option("--list", help="show the table's savepoints, restore nothing")
    ] = False,
    wait: Annotated[bool, typer.Option("--wait", help="AWS: wait for the Glue run to end")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    config_dir: ConfigDirOption = None,
) -> None:
    """Roll a lake table back to its newest savepoint at or before --to; the next merge run
    applies again every change file after it. docs/operations.md#restore-a-lake-table."""
    try:
        target = parse_restore_target(to)
    except ValueError as exc:
        fail(str(exc), 2)
    place, glue = resolve(env, table, config_dir=config_dir)
    kept = savepoints(place)
    if list_only:
        times = [instant_time(s).isoformat(timespec="seconds") for s in kept]
        print(json.dumps({"table": table, "savepoints": kept, "times": times}, indent=2))
        return
    try:
        chosen = restore_point(place.lake_table, kept, target)
    except RestoreError as exc:
        fail(str(exc), 2)
    when = instant_time(chosen).isoformat(timespec="seconds")
    console.print(f"{table}: restoring to savepoint {chosen} ({when})", highlight=False)
    if glue is None:
        shown = {**restore_locally(place, chosen_target(chosen)), "savepoint": chosen}
        print(
            json.dumps(shown)
            if json_output
            else f"{table}: restored to version "
            f"{shown['version']} (savepoint {chosen}); the next merge run catches up"
        )
        return
    try:
        run_id = start_restore(glue, place, chosen_target(chosen))
    except RuntimeError as exc:
        fail(str(exc))
    shown = {"table": table, "job": place.job_name, "job_run": run_id, "savepoint": chosen}
    if wait:
        run = wait_for_run(glue, str(place.job_name), run_id)
        shown["state"] = state = str(run.get("JobRunState"))
        if state != "SUCCEEDED":
            error = one_line(run.get("ErrorMessage") or "no error message", limit=None)
            fail(f"restore run {run_id} of Glue job {place.job_name} ended {state}: {error}")
    print(json.dumps(shown) if json_output else run_id)


def chosen_target(savepoint: str) -> str:
    """The savepoint chosen here as the ``--to`` the run restores to: exactly its time, so a
    savepoint made meanwhile does not change what is restored."""
    return instant_time(savepoint).isoformat()
