"""``cdclake erase --env ENV --table SCHEMA.TABLE --key COL=VALUE [--key …]``: forget a key.

For a key already deleted at the source (issue #51 item 2). The erase itself is the merge
library's (:func:`cdclake_merge.erase.erase_key`): the lake table's older file versions, its
history, the change files and the quarantine lose the key. This command checks first that
every key column is given once and that the source no longer holds the row, then:

* locally runs the erase in this process, on the local stack's warehouse and change bucket;
* on AWS writes the key to a request object in the lake bucket and starts a run of the
  table's Glue job with ``--mode erase --erase_request ID`` (the job's role, Hudi bundle and
  one-run-at-a-time concurrency: no merge writes while it erases). The key is not a job
  argument, so Glue's run history never holds it; the run removes the request once it erased
  (:mod:`cdclake_merge.erase_request`). ``--wait`` follows the run to its end.

Either way it prints the places an erase cannot reach and the date the key's last copy there
ages out (:func:`environment.retention.erase_deadlines`): a Rich table on stderr and one JSON
line on stdout. The key's values appear only there, as the operator typed them, and in the
request object until its run erased; the Glue run's arguments hold the request's id and its
output counts only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cdclake.errors import fail, one_line
from cdclake.quarantine import ConfigDirOption, EnvOption, TableOption
from cdclake.snapshot import DsnOption, NoSslOption, SecretIdOption, database_errors

if TYPE_CHECKING:
    from pg8000.native import Connection

    from cdclake.ops import LakePlace
    from environment.config import EnvironmentConfig

console = Console(stderr=True, soft_wrap=True)
ERASE_MODE = "erase"  # glue_jobs/merge_job.py --mode
REQUEST_ARGUMENT = "--erase_request"  # the id of the request object holding the key


def parse_key(table: str, key_columns: Sequence[str], given: Sequence[str]) -> dict[str, str]:
    """``COLUMN=VALUE`` options as ``{column: value}``: every key column of ``table`` once, no
    other column. ValueError with a one-line reason naming the column, never a value."""
    key: dict[str, str] = {}
    for item in given:
        column, equals, value = item.partition("=")
        column = column.strip()
        if not equals or not column:
            raise ValueError("--key takes COLUMN=VALUE, one per key column")
        if column not in key_columns:
            raise ValueError(
                f"--key {column}: not a key column of {table} (its key: {', '.join(key_columns)})"
            )
        if column in key:
            raise ValueError(f"--key {column} given twice: give each key column of {table} once")
        key[column] = value
    missing = [c for c in key_columns if c not in key]
    if missing:
        raise ValueError(
            f"--key {', '.join(missing)} missing: give every key column of {table} "
            f"({', '.join(key_columns)})"
        )
    return key


def source_holds(conn: Connection, table: str, key: Mapping[str, str]) -> bool:
    """True where the source table still has the key's row. The values go as parameters,
    untyped, so PostgreSQL reads each as its column's type (and the primary key's index
    serves the lookup)."""
    from lambdas.bootstrap.sql import identifier, qualified

    names = list(key)
    condition = " AND ".join(f"{identifier(c)} = :k{i}" for i, c in enumerate(names))
    parameters = {f"k{i}": key[c] for i, c in enumerate(names)}
    rows = conn.run(f"SELECT 1 FROM {qualified(table)} WHERE {condition} LIMIT 1", **parameters)
    return bool(rows)


def still_at_source(table: str, key: Mapping[str, str]) -> str:
    """The refusal of a key the source still holds (its columns named, not its values)."""
    return (
        f"{table} still has a row of that key ({', '.join(key)}) at the source: delete it "
        "there and let the merge apply the delete before erasing"
    )


def deadlines_of(config: EnvironmentConfig, table: str, at: datetime) -> list[dict[str, str]]:
    from environment.retention import erase_deadlines

    return [
        {"place": d.place, "until": d.until.isoformat(timespec="seconds"), "why": d.why}
        for d in erase_deadlines(config, config.lake_table(table), at)
    ]


# --- local: this process --------------------------------------------------------------------


def erase_locally(
    config: EnvironmentConfig,
    place: LakePlace,
    key: Mapping[str, str],
    *,
    spark_factory: Callable[[], Any] | None = None,
) -> dict[str, int]:
    """Erase the key from the local table's live generation, history, change files and
    quarantine in this process; the counts. A generation erase would not reach (a rebuild in
    progress, a replaced one not removed yet: exit 2) and a key the table still holds (exit 1)
    end in one line."""
    from cdclake.lake_reader import local_spark
    from cdclake.ops import AnyFileSystem, local_path
    from cdclake.rebuild import config_generation_sink
    from cdclake_merge.erase import KeyStillPresent, erase_key, refuse_unreachable_generations
    from cdclake_merge.hudi import CatalogSyncError
    from cdclake_merge.rebuild import follow_live

    factory = spark_factory or local_spark(local_path(place.warehouse))
    fs = AnyFileSystem()
    generation_sink = config_generation_sink(config, place, factory, fs)
    try:
        state = follow_live(factory, generation_sink)
        refuse_unreachable_generations(state, place.source_table)
        erased = erase_key(
            factory(),
            generation_sink(state.live, True),
            fs,
            changes=place.changes,
            quarantine_root=place.quarantine_root,
            key=key,
        )
    except (KeyStillPresent, CatalogSyncError) as exc:  # KeyStillPresent is a ValueError
        fail(str(exc))
    except ValueError as exc:
        fail(str(exc), 2)
    return erased.as_dict()


# --- output ---------------------------------------------------------------------------------


def show(
    shown: Mapping[str, Any], counts: Mapping[str, int], deadlines: list[dict[str, str]]
) -> None:
    """What was done (counts) and what ages out when, on stderr; the JSON line on stdout."""
    if counts:
        done = Table(title=f"{shown['table']}: erased")
        done.add_column("what")
        done.add_column("count", justify="right")
        for name, count in counts.items():
            done.add_row(name.replace("_", " "), str(count))
        console.print(done)
    later = Table(title="not reached by the erase: the key's last copy there is gone by")
    for column in ("place", "until (UTC)", "why"):
        later.add_column(column, overflow="fold")
    for deadline in deadlines:
        later.add_row(deadline["place"], deadline["until"], deadline["why"])
    console.print(later)
    print(json.dumps({**shown, **counts, "deadlines": deadlines}))


# --- AWS: a run of the table's Glue job -------------------------------------------------------


def start_erase(glue: Any, place: LakePlace, key: Mapping[str, str]) -> str:
    """Write the key's request and start the table's Glue job in erase mode on it; the run id.
    RuntimeError: one-line reason (the request is removed again: no run will read it)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from cdclake.ops import AnyFileSystem
    from cdclake.quarantine import start_mode_run
    from cdclake_merge.erase_request import remove_request, request_folder, write_request

    fs = AnyFileSystem()
    try:
        request = write_request(fs, place.warehouse, place.lake_table, key)
    except (BotoCoreError, ClientError) as exc:
        folder = request_folder(place.warehouse, place.lake_table)
        raise RuntimeError(f"the erase request could not be written to {folder}: {exc}") from None
    try:
        return start_mode_run(glue, place, {"--mode": ERASE_MODE, REQUEST_ARGUMENT: request})
    except RuntimeError:
        remove_request(fs, place.warehouse, place.lake_table, request)
        raise


# --- CLI ---------------------------------------------------------------------------------------


def erase_command(
    env: EnvOption,
    table: TableOption,
    key_options: Annotated[
        list[str] | None,
        typer.Option("--key", help="COLUMN=VALUE of the key to erase; once per key column"),
    ] = None,
    dsn: DsnOption = None,
    secret_id: SecretIdOption = None,
    no_ssl: NoSslOption = False,
    wait: Annotated[bool, typer.Option("--wait", help="AWS: follow the Glue run to its end")] = (
        False
    ),
    config_dir: ConfigDirOption = None,
) -> None:
    """Erase a key the source has deleted from the lake table's files, its history, the change
    files and the quarantine, and say when the copies an erase cannot reach age out.

    Locally in this process; on AWS in a run of the table's Glue job (``--mode erase``).
    docs/lake.md#erasing-a-key.
    """
    from cdclake.quarantine import resolve, wait_for_run
    from cdclake.snapshot import database_connection
    from environment.config import load_config

    config = load_config(env, config_dir=config_dir)  # errors.describe's
    try:
        key = parse_key(table, config.lake_table(table).primary_key, key_options or [])
    except ValueError as exc:
        fail(str(exc), 2)
    place, glue = resolve(env, table, config_dir=config_dir)
    if not place.local and dsn is None:
        fail(
            f"--env {env}: checking the source no longer holds the key needs the database: "
            "give --dsn (an SSM port forward, docs/database.md)",
            2,
        )
    with (
        database_errors(),
        database_connection(config, dsn=dsn, secret_id=secret_id, no_ssl=no_ssl) as conn,
    ):
        held = source_holds(conn, table, key)
    if held:
        fail(still_at_source(table, key))
    at = datetime.now(UTC)
    deadlines = deadlines_of(config, table, at)
    if place.local:
        counts = erase_locally(config, place, key)
        show({"table": table, "key": key}, counts, deadlines)
        return
    try:
        run_id = start_erase(glue, place, key)
    except RuntimeError as exc:
        fail(str(exc))
    console.print(f"{table}: erase run {run_id} of Glue job {place.job_name}", highlight=False)
    shown: dict[str, Any] = {"table": table, "key": key, "job": place.job_name, "job_run": run_id}
    if wait:
        started = time.monotonic()
        run = wait_for_run(glue, str(place.job_name), run_id)
        shown["state"] = state = str(run.get("JobRunState"))
        if state != "SUCCEEDED":
            error = one_line(run.get("ErrorMessage") or "no error message", limit=None)
            fail(f"erase run {run_id} of Glue job {place.job_name} ended {state}: {error}")
        shown["seconds"] = round(time.monotonic() - started, 1)
    show(shown, {}, deadlines)
