"""``cdclake dispatch --env ENV``: the dispatcher's decision from a terminal.

Per lake table: whether its merge starts now, why, and the change files that wait — the same
decision the environment's dispatcher Lambda makes on its schedule
(:mod:`cdclake_merge.dispatch`). On AWS it starts the Glue jobs it decides on (``--dry-run``:
it only says); on the local stack, where there is no Glue, it runs those merges here, one
after the other.

Each table's ``lag_seconds`` is the lag the dispatcher publishes (0: nothing waits; else the
age of the oldest waiting change file). On AWS the dispatcher Lambda publishes it every turn;
on ``--env local``, which has no Lambda, this command publishes it (``Environment=local``)
where boto3 finds a region, as ``cdclake merge --env local`` publishes a run's metrics.

A table whose waiting changes are not due yet says when they will be (``waiting: due at …
(objective N min)``: the table's freshness objective, less one turn of the schedule and an
expected run; :mod:`cdclake_merge.dispatch`); on ``--env local``, whose turn is this command,
what waits starts at once. A table whose runs fail is parked or backs off (``reason`` says
which and until when; :mod:`cdclake_merge.failures`). ``--resume TABLE`` lets a parked table
start again: it writes the resume in the table's sidecar, where the dispatcher reads it, then
decides as usual. On
``--env local`` each run this command makes is kept in the table's sidecar as Glue keeps a
job's runs, so the local stack parks and backs off alike.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cdclake_merge.dispatch import Decision, Target
from cdclake_merge.storage import FileSystem
from environment.config import EnvironmentConfig


def aws_targets(config: EnvironmentConfig, glue: Any) -> tuple[list[Target], list[Decision]]:
    """Each lake table as its Glue job merges it; a table whose job is missing says so."""
    from cdclake_merge.dispatch import target_from_job

    targets: list[Target] = []
    missing: list[Decision] = []
    for table in config.lake_tables:
        job = table.merge_job_name(config.prefix)
        try:
            targets.append(target_from_job(glue, job))
        except LookupError as exc:
            reason = f"not read: {exc}: is {config.env} deployed?"
            missing.append(Decision(table.name, False, reason, job=job, failed=True))
    return targets, missing


def local_targets(config: EnvironmentConfig) -> list[Target]:
    """Each lake table on the running local stack (StackNotRunning: one line)."""
    from cdclake.local.lake import running_status
    from cdclake.ops import local_place

    running_status(config.env)
    targets = []
    for table in config.lake_tables:
        place = local_place(config, table.name)
        targets.append(
            Target(
                table.name,
                place.lake_table,
                place.warehouse,
                place.changes,
                schema_changes=table.schema_changes,
                history=table.history,
                signals=True,  # the local stack's database: its rebuild runs signal themselves
            )
        )
    return targets


def merge_locally(
    config: EnvironmentConfig, decisions: list[Decision], targets: list[Target], fs: FileSystem
) -> dict[str, Any]:
    """Run the merges decided on, here, as ``cdclake merge --env local`` runs one; per table
    the run's counts, or its error in one line. Each run is kept where the next decision reads
    it (:func:`cdclake_merge.failures.record_local_run`), with the failure line the Glue
    entry prints, so a failure parks or backs off as on AWS."""
    from cdclake.lake_reader import local_spark
    from cdclake.ops import AnyFileSystem, local_path, local_place
    from cdclake.rebuild import config_generation_sink, lake_signal
    from cdclake_merge.dispatch import one_line
    from cdclake_merge.failures import Run, record_local_run
    from cdclake_merge.generations import notifications_beside
    from cdclake_merge.rebuild import merge_table, rebuild_step

    runs: dict[str, Any] = {}
    by_table = {t.table: t for t in targets}
    factory = None
    for decision in decisions:
        if not decision.start:
            continue
        place = local_place(config, decision.table)
        job = config.lake.glue_job_of(config.lake_table(decision.table))
        factory = factory or local_spark(local_path(place.warehouse))
        options = place.merge_options(
            tombstone_retention_days=config.lake.tombstone_retention_days,
            max_files=job.files_per_run(),
            max_bytes=job.bytes_per_run(),
        )
        started = time.time()
        table = config.lake_table(decision.table)
        fs_any = AnyFileSystem()
        sink = config_generation_sink(config, place, factory, fs_any)
        notifications = notifications_beside(place.changes, place.source_table)
        keep = table.drop_columns == "keep"
        try:
            if decision.mode == "rebuild":  # begun here if the table needs one, and signalled
                signal = lake_signal(config, table.name, dsn=None, secret_id=None, no_ssl=False)
                step = rebuild_step(
                    factory,
                    fs_any,
                    sink,
                    options,
                    notifications=notifications,
                    keep_columns=keep,
                    signal=signal,
                )
            else:  # the live generation's merge, or a rebuild's step while one is in progress
                step = merge_table(
                    factory, fs_any, sink, options, notifications=notifications, keep_columns=keep
                )
            result = step.result
        except Exception as exc:  # one table's failed merge stops no other
            runs[decision.table] = {"error": one_line(exc)}
            failed = Run("FAILED", started, time.time(), f"cdclake merge failed: {exc}")
            record_local_run(fs, by_table[decision.table], failed)
            continue
        runs[decision.table] = result.as_dict()
        record_local_run(fs, by_table[decision.table], Run("SUCCEEDED", started, time.time()))
    return runs


def publish_local_lag(environment: str, decisions: list[Decision], now: float) -> None:
    """The dispatcher's lag of each read table, where a region is configured (``AWS_REGION``,
    a profile; ``AWS_ENDPOINT_URL`` points boto3 at a local stand-in); a failure is one
    logged line."""
    import boto3

    from cdclake_merge.metrics import publish_lags

    if boto3.session.Session().region_name is None:
        return
    lags = {d.table: d.lag_seconds(now) for d in decisions}
    publish_lags(environment, lags, now=dt.datetime.fromtimestamp(now, dt.UTC))


def resume_target(fs: FileSystem, targets: list[Target], table: str | None) -> None:
    """Record that ``table`` (when given) may start again; its job must be readable."""
    from cdclake_merge.failures import resume

    if table is None:
        return
    found = [t for t in targets if t.table == table]
    if not found:
        raise typer.BadParameter(f"{table}: its merge job was not found")
    resume(fs, found[0], time.time())


def render(decisions: list[Decision], runs: dict[str, Any], console: Console) -> None:
    grid = Table(title="cdc-lake dispatch")
    for column in ("table", "start", "files waiting", "workers", "lag", "reason", "run"):
        grid.add_column(column, overflow="fold")
    now = time.time()
    for d in decisions:
        lag = d.lag_seconds(now)
        run = runs.get(d.table)
        shown = d.run_id or ""
        if run is not None:
            shown = run.get("error") or f"v{run['version']}: {run['files_applied']} files applied"
        grid.add_row(
            d.table,
            "yes" if d.start else "no",
            str(len(d.files_pending)),
            str(d.workers) if d.workers is not None else "-",
            f"{lag:,.0f} s" if lag is not None else "-",
            d.reason,
            shown,
        )
    console.print(grid)


def dispatch_command(
    env: Annotated[str, typer.Option("--env", help="environment: config/<env>.yaml")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="decide and say, start nothing")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="print the decisions as JSON")
    ] = False,
    config_dir: Annotated[
        Path | None, typer.Option("--config-dir", help="folder of the environment files")
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", help="a parked lake table (schema.table) may start again"),
    ] = None,
) -> None:
    """Start the merge of each lake table whose change files wait (the dispatcher's decision)."""
    import boto3

    from cdclake.ops import AnyFileSystem
    from cdclake_merge.dispatch import dispatch
    from environment.config import load_config

    config = load_config(env, config_dir=config_dir)  # ConfigError: one line (cdclake.errors)
    if resume is not None and dry_run:
        raise typer.BadParameter("a dry run changes nothing: --resume without --dry-run")
    if resume is not None and resume not in {t.name for t in config.lake_tables}:
        names = ", ".join(t.name for t in config.lake_tables)
        raise typer.BadParameter(f"{resume}: not a lake table of {config.env} ({names})")
    fs = AnyFileSystem()
    policy = config.lake.dispatch
    turn: dict[str, Any] = {
        "budget": policy.max_concurrent_runs,
        "retry_share": policy.retry_share,
        "turn_seconds": float(policy.turn_seconds()),
        "backoff_unit_seconds": float(policy.backoff_unit_seconds()),
        "environment": config.env,
    }
    runs: dict[str, Any] = {}
    if config.env == "local":
        targets = local_targets(config)
        resume_target(fs, targets, resume)
        decisions = dispatch(targets, fs=fs, glue=None, dry_run=True, **turn)
        if not dry_run:  # a dry run changes nothing, CloudWatch included
            publish_local_lag(config.env, decisions, time.time())
            runs = merge_locally(config, decisions, targets, fs)
    else:
        glue = boto3.client("glue", region_name=config.region)
        targets, missing = aws_targets(config, glue)
        resume_target(fs, targets, resume)
        decisions = missing + dispatch(targets, fs=fs, glue=glue, dry_run=dry_run, **turn)
        decisions.sort(key=lambda d: d.table)
    if json_output:
        now = time.time()
        shown = [
            {**d.as_json(now), **({"run": runs[d.table]} if d.table in runs else {})}
            for d in decisions
        ]
        print(json.dumps({"env": config.env, "dry_run": dry_run, "tables": shown}, indent=2))
    else:
        render(decisions, runs, Console())
    if any(d.failed for d in decisions) or any("error" in r for r in runs.values()):
        raise typer.Exit(1)
