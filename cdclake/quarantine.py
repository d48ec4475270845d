"""``cdclake quarantine list | replay``: the lines a merge could not apply, and applying them later.

What a quarantined line is, what a replay does and the ledger it keeps are the merge library's
(:mod:`cdclake_merge.replay`): the same code runs here for the local stack and in the table's
Glue merge job on AWS. This module is the command line and the wiring:

* ``list`` reads the quarantine wherever it is (S3 through boto3, no JVM);
* ``replay --env local`` opens the table's sink on the local stack and replays in this process
  (its own Spark session, with the spec from config or ``--config FILE``);
* ``replay --env dev|prod`` starts a run of the table's Glue job with ``--mode replay``: the job
  replays with its deployed arguments, Hudi bundle, catalog sync and role. ``--wait`` polls the
  run to its end, then prints the replay's ledger, read from the quarantine bucket.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cdclake.errors import fail, one_line
from cdclake.lake_reader import local_spark
from cdclake.ops import AnyFileSystem, LakePlace, local_path
from cdclake_merge.replay import ReplayResult, ledgers, listing, quarantined

# Glue's final job run states (JobRunState); any other is still going.
FINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "STOPPED", "TIMEOUT", "ERROR", "EXPIRED"})
POLL_SECONDS = 15.0
REPLAY_ARGUMENTS = {"--mode": "replay"}  # glue_jobs/merge_job.py


# --- local: this process --------------------------------------------------------------------


def open_table(place: LakePlace, spark_factory: Callable[[], Any]) -> Any:
    from cdclake_merge.sink import open_sink
    from cdclake_merge.storage import LocalFileSystem

    return open_sink(
        warehouse=place.warehouse,
        table=place.lake_table,
        key=place.key,
        fs=LocalFileSystem(),
        spark_factory=spark_factory,
        partition_fields=place.partition,
        table_type=place.table_type,
        quarantine_root=place.quarantine_root,
    )


def replay(place: LakePlace, *, spark_factory: Callable[[], Any] | None = None) -> ReplayResult:
    """Replay a local table's quarantined lines in this process (:func:`cdclake_merge.replay`).

    On AWS the same replay runs in the table's Glue job: :func:`start_replay`.
    """
    from cdclake_merge.replay import replay as replay_lines
    from cdclake_merge.storage import LocalFileSystem

    if not place.local:
        raise ValueError(
            f"{place.source_table} of {place.env} replays in its Glue job ({place.job_name}): "
            "cdclake quarantine replay starts it"
        )
    factory = spark_factory or local_spark(local_path(place.warehouse))
    options = place.merge_options(changes="")  # a replay reads quarantined lines only
    return replay_lines(factory, LocalFileSystem(), open_table(place, factory), options)


# --- AWS: a run of the table's Glue job -----------------------------------------------------


def start_mode_run(glue: Any, place: LakePlace, arguments: dict[str, str]) -> str:
    """Start a run of the table's Glue job with ``arguments`` (``--mode`` and its own); the run
    id. RuntimeError with a one-line reason: the job is running (one run at a time), refused,
    or Glue not reached at all.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    mode = arguments.get("--mode", "merge")
    try:
        started = glue.start_job_run(JobName=place.job_name, Arguments=arguments)
    except glue.exceptions.ConcurrentRunsExceededException:
        raise RuntimeError(
            f"Glue job {place.job_name} is running (one run at a time): {mode} when it has ended"
        ) from None
    except (ClientError, BotoCoreError) as exc:
        raise RuntimeError(f"Glue job {place.job_name} did not start: {exc}") from None
    return str(started["JobRunId"])


def start_replay(glue: Any, place: LakePlace) -> str:
    """Start the table's Glue job in replay mode; the run id."""
    return start_mode_run(glue, place, dict(REPLAY_ARGUMENTS))


def wait_for_run(
    glue: Any,
    job: str,
    run_id: str,
    *,
    interval: float = POLL_SECONDS,
    seen: Callable[[str], None] = lambda state: None,
) -> dict[str, Any]:
    """``get_job_run`` every ``interval`` seconds until the run is in a final state; the run."""
    while True:
        run = dict(glue.get_job_run(JobName=job, RunId=run_id)["JobRun"])
        state = str(run.get("JobRunState"))
        seen(state)
        if state in FINAL_STATES:
            return run
        time.sleep(interval)


def run_report(fs: Any, place: LakePlace, run_id: str) -> ReplayResult:
    """What the replay run ``run_id`` did, from the quarantine: its ledger.

    A run that found no readable line writes none; then the lines still quarantined are
    reported as failing, each with the reason last recorded for it.
    """
    mine = [entry for entry in ledgers(fs, place.quarantine_root) if entry.get("job_run") == run_id]
    if mine:
        return ReplayResult.from_ledger(mine[-1])
    left = listing(fs, place.quarantine_root, _current_version(place, fs))
    return ReplayResult(still_failing={q.id: left.reasons[q.id] for q in left.pending})


# --- CLI ------------------------------------------------------------------------------------

app = typer.Typer(
    help="Lines the merge could not apply: list them, re-apply them after a fix.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True, soft_wrap=True)
EnvOption = Annotated[str, typer.Option("--env", help="environment: config/<env>.yaml")]
TableOption = Annotated[str, typer.Option("--table", help="SCHEMA.TABLE as in config")]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="environment file to take the table's spec from (a fix being tried; local only)",
    ),
]
ConfigDirOption = Annotated[
    Path | None, typer.Option("--config-dir", help="folder of the environment files")
]


def glue_client(region: str) -> Any:
    import boto3

    return boto3.client("glue", region_name=region)


def resolve(
    env: str, table: str, config_file: Path | None = None, config_dir: Path | None = None
) -> tuple[LakePlace, Any]:
    """The table of ``env`` and, on AWS, a Glue client of its region (None locally)."""
    from cdclake.ops import aws_place, local_place
    from environment.config import load_config

    config = load_config(env, path=config_file, config_dir=config_dir)  # errors.describe's
    if config.env != env:
        fail(f"--config {config_file} is for environment {config.env}, not {env}", 2)
    try:
        config.lake_table(table)
        if env == "local":
            return local_place(config, table), None
        glue = glue_client(config.region)
        return aws_place(config, table, glue), glue
    except ValueError as exc:
        fail(str(exc), 2)
    except LookupError as exc:
        fail(str(exc))
    raise AssertionError("unreachable")


def _current_version(place: LakePlace, fs: Any) -> int | None:
    from cdclake_merge.sink import open_existing_sink

    sink = open_existing_sink(
        warehouse=place.warehouse, table=place.lake_table, fs=fs, spark_factory=lambda: None
    )
    return sink.load().version if sink is not None else 0


@app.command("list")
def list_command(
    env: EnvOption,
    table: TableOption,
    show_all: Annotated[bool, typer.Option("--all", help="also lines already replayed")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    config_dir: ConfigDirOption = None,
) -> None:
    """The table's quarantined lines: where each came from (file, line) and why."""
    place, _ = resolve(env, table, config_dir=config_dir)
    fs = AnyFileSystem()
    found = listing(fs, place.quarantine_root, _current_version(place, fs))
    lines = quarantined(fs, place.quarantine_root) if show_all else found.pending
    rows = [
        {
            **q.as_dict(),
            "reason": found.reasons.get(q.id, q.reason),
            "replayed_by": found.replayed.get(q.id),
        }
        for q in lines
        if show_all or q.id not in found.replayed
    ]
    if json_output:
        print(json.dumps({"table": table, "quarantine": place.quarantine_root, "lines": rows}))
        return
    grid = Table(title=f"{table}: {len(found.pending)} quarantined line(s) not replayed")
    for column in ("by", "source file", "line", "reason", *(["replayed by"] if show_all else [])):
        grid.add_column(column, overflow="fold")
    for row in rows:
        cells = [row["quarantined_by"], row["source_file"], str(row["line"]), row["reason"]]
        grid.add_row(*cells, *([row["replayed_by"] or "-"] if show_all else []))
    Console().print(grid)


def _print_result(table: str, result: ReplayResult) -> None:
    out = Console(soft_wrap=True)
    if result.replay is None:
        out.print(f"{table}: nothing to replay", highlight=False)
    else:
        merge = result.merge
        out.print(
            f"{table}: replayed {len(result.applied)} line(s) as version {result.version} "
            f"({merge.get('upserts', 0)} upserts, {merge.get('deletes', 0)} deletes, "
            f"{merge.get('stale_skipped', 0)} older than the table, skipped)",
            highlight=False,
        )
    for line_id, reason in sorted(result.still_failing.items()):
        out.print(f"  still quarantined: {line_id}: {reason}", highlight=False)


def _replay_locally(table: str, place: LakePlace, json_output: bool) -> None:
    from cdclake_merge.hudi import CatalogSyncError
    from cdclake_merge.job import MergeError

    try:
        result = replay(place)
    except (MergeError, CatalogSyncError) as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(str(exc), 2)
    if json_output:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        _print_result(table, result)


def _replay_on_glue(
    table: str, place: LakePlace, glue: Any, run_id: str | None, wait: bool, json_output: bool
) -> None:
    job = str(place.job_name)
    reporting = run_id is not None
    if run_id is None:
        try:
            run_id = start_replay(glue, place)
        except RuntimeError as exc:
            fail(str(exc))
        console.print(f"{table}: replay started as run {run_id} of Glue job {job}", highlight=False)
    else:
        try:
            arguments = glue.get_job_run(JobName=job, RunId=run_id)["JobRun"].get("Arguments", {})
        except glue.exceptions.EntityNotFoundException:
            fail(f"Glue job {job} has no run {run_id}", 2)
        if arguments.get("--mode") != REPLAY_ARGUMENTS["--mode"]:
            fail(f"run {run_id} of Glue job {job} is not a replay (no --mode replay)", 2)
    shown: dict[str, Any] = {"table": table, "job": job, "job_run": run_id}
    if not wait and not reporting:
        if json_output:
            print(json.dumps(shown))
        else:
            print(run_id)
        return
    states: list[str] = []

    def seen(state: str) -> None:
        if state not in states[-1:]:
            console.print(f"{run_id}: {state}", highlight=False)
        states.append(state)

    run = wait_for_run(glue, job, str(run_id), seen=seen)
    shown["state"] = state = str(run.get("JobRunState"))
    if state != "SUCCEEDED":
        shown["error"] = error = one_line(run.get("ErrorMessage") or "no error message", limit=None)
        if json_output:
            print(json.dumps(shown))
        fail(f"replay run {run_id} of Glue job {job} ended {state}: {error}")
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        result = run_report(AnyFileSystem(), place, str(run_id))
    except (BotoCoreError, ClientError) as exc:
        fail(f"replay run {run_id} SUCCEEDED; its ledger in {place.quarantine_root}: {exc}")
    if json_output:
        print(json.dumps({**shown, **result.as_dict()}, indent=2))
    else:
        _print_result(table, result)


@app.command("replay")
def replay_command(
    env: EnvOption,
    table: TableOption,
    config_file: ConfigOption = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="AWS: wait for the Glue run, then print what it did")
    ] = False,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id", help="AWS: wait for this replay run and report it, instead of starting one"
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    config_dir: ConfigDirOption = None,
) -> None:
    """Re-apply the quarantined lines the merge can read now, as one commit; once each.

    Locally in this process; on AWS in a run of the table's Glue job (``--mode replay``).
    """
    if env == "local":
        if run_id is not None:
            fail("--run-id names a Glue job run: AWS environments only", 2)
        place, _ = resolve(env, table, config_file, config_dir)
        _replay_locally(table, place, json_output)
        return
    if config_file is not None:
        fail(
            f"--config on {env}: the Glue job replays with its deployed arguments; deploy the "
            "fix first (cdk deploy), then replay without --config",
            2,
        )
    place, glue = resolve(env, table, config_dir=config_dir)
    _replay_on_glue(table, place, glue, run_id, wait, json_output)
