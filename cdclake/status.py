"""``cdclake status --env ENV``: how far behind each lake table is, and why, on one screen.

Per lake table: the last commit (Hudi instant and its time), the lag (now minus the newest
source commit time the table holds: CloudWatch's ``CdcLake/LagSeconds`` where it has a
datapoint, else the table's own checkpoint), the change files no commit has applied yet
(the merge's own listing), quarantined lines not replayed, and the last run's outcome (Glue
``get_job_runs`` on AWS; the last commit, or a run stopped by ``max_bad_fraction``, locally),
and a rebuild in progress (``rebuilding (generation n, since …)``, from the table's state
object; the table's figures are its live generation's).
Then the connectors: Kafka Connect's REST API on the local stack, MSK Connect on AWS.

Everything is read without a JVM (boto3 and the local disk); a part that cannot be read
is shown as such, with the reason, and the rest is still shown.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cdclake.errors import error_line
from cdclake.ops import AnyFileSystem, LakePlace, aws_place, local_place
from cdclake_merge.failures import rebuild_change, rebuilt_as_copy
from cdclake_merge.generations import live_generation, rebuilding
from cdclake_merge.pending import pending_files
from cdclake_merge.recovery import instant_time
from cdclake_merge.replay import listing
from environment.config import EnvironmentConfig

COMPLETED = (".commit", ".deltacommit")
METRIC_WINDOW = dt.timedelta(hours=3)
ERROR_CHARS = 300  # per error of a table's row: a screen shows several
# A change file that has waited this share of the bucket's expiration is warned about: what
# expires unapplied is lost from the lake.
EXPIRY_WARNING_SHARE = 0.5


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds") if moment else None


def last_instant(fs: Any, timeline: str) -> str | None:
    completed = [n for n in fs.list_dir(timeline) if n.endswith(COMPLETED)]
    return max(completed).split(".", 1)[0] if completed else None


def metric_lag(
    cloudwatch: Any, env: str, table: str, now: dt.datetime
) -> tuple[float, dt.datetime] | None:
    """The newest ``LagSeconds`` datapoint, aged to ``now``: (lag, datapoint time)."""
    from cdclake_merge.metrics import LAG, NAMESPACE, dimensions

    answer = cloudwatch.get_metric_statistics(
        Namespace=NAMESPACE,
        MetricName=LAG,
        Dimensions=dimensions(env, table),
        StartTime=now - METRIC_WINDOW,
        EndTime=now + dt.timedelta(minutes=1),
        Period=60,
        Statistics=["Maximum"],
    )
    points = answer.get("Datapoints", [])
    if not points:
        return None
    newest = max(points, key=lambda p: p["Timestamp"])
    at = newest["Timestamp"]
    return float(newest["Maximum"]) + max((now - at).total_seconds(), 0.0), at


def table_status(
    place: LakePlace,
    *,
    fs: Any,
    now: dt.datetime,
    expiration_days: int,
    cloudwatch: Any = None,
    glue: Any = None,
) -> dict[str, Any]:
    """One table's line of the screen; a part that cannot be read says why."""
    from cdclake_merge.sink import TableState, open_existing_sink

    row: dict[str, Any] = {"table": place.source_table, "lake_table": place.lake_table}
    errors: list[str] = []
    warnings: list[str] = []
    state = TableState()
    try:
        sink = open_existing_sink(
            warehouse=place.warehouse, table=place.lake_table, fs=fs, spark_factory=lambda: None
        )
        if sink is not None:
            state = sink.load()
            timeline = getattr(sink, "timeline", None)
            if timeline:
                warnings += layout_warnings(place, layout_reasons(fs, place, timeline))
            instant = last_instant(fs, timeline) if timeline and state.exists else None
            row["version"] = state.version
            row["last_commit"] = (
                {"instant": instant, "time": _iso(instant_time(instant))} if instant else None
            )
        else:
            row["version"], row["last_commit"] = 0, None
    except Exception as exc:
        errors.append(f"table: {error_line(exc, ERROR_CHARS)}")
        row["version"], row["last_commit"] = None, None

    run = state.checkpoint.get("run", {}) if state.checkpoint else {}
    newest_ms = run.get("newest_source_ts_ms")
    row["newest_source_commit"] = (
        _iso(dt.datetime.fromtimestamp(newest_ms / 1000, dt.UTC)) if newest_ms else None
    )
    row["lag_seconds"], row["lag_from"] = None, None
    if cloudwatch is not None:
        try:
            found = metric_lag(cloudwatch, place.env, place.source_table, now)
            if found is not None:
                row["lag_seconds"], row["lag_from"] = round(found[0], 1), "cloudwatch"
        except Exception as exc:
            errors.append(f"cloudwatch: {error_line(exc, ERROR_CHARS)}")
    if row["lag_seconds"] is None and newest_ms:
        row["lag_seconds"] = round(max(now.timestamp() - newest_ms / 1000, 0.0), 1)
        row["lag_from"] = "lake"

    row["oldest_waiting"] = None
    try:
        waiting = pending_files(fs, place.changes, state.positions, state.legacy_applied)
        row["pending_files"] = len(waiting)
        oldest = min((f.modified for f in waiting if f.modified), default=None)
        if oldest is not None:
            since = dt.datetime.fromtimestamp(oldest, dt.UTC)
            row["oldest_waiting"] = _iso(since)
            warning = expiry_warning(now - since, expiration_days)
            if warning:
                warnings.append(warning)
    except Exception as exc:
        errors.append(f"change files: {error_line(exc, ERROR_CHARS)}")
        row["pending_files"] = None

    try:
        found_lines = listing(fs, place.quarantine_root, state.version)
        row["quarantined_lines"] = len(found_lines.pending)
    except Exception as exc:
        errors.append(f"quarantine: {error_line(exc, ERROR_CHARS)}")
        row["quarantined_lines"] = None

    try:
        row["last_run"] = (
            glue_last_run(glue, place.job_name)
            if glue is not None and place.job_name
            else local_last_run(fs, place, state)
        )
    except Exception as exc:
        errors.append(f"last run: {error_line(exc, ERROR_CHARS)}")
        row["last_run"] = None
    row["rebuilding"] = None
    try:
        generations, _ = live_generation(fs, place.warehouse, place.lake_table)
        row["rebuilding"] = rebuilding(generations)
    except Exception as exc:
        errors.append(f"rebuild state: {error_line(exc, ERROR_CHARS)}")
    detail = str((row["last_run"] or {}).get("detail", ""))
    change = rebuild_change(detail)
    # A rebuild in progress is what the failed run asked for: the row says how far it is.
    if change is not None and row["rebuilding"] is None:
        remedy = rebuild_remedy(place, rebuilt_as_copy(detail))
        warnings.append(f"needs rebuild: {change} (its last run failed): {remedy}")
    row["errors"], row["warnings"] = errors, warnings
    return row


def rebuild_remedy(place: LakePlace, copied: bool) -> str:
    """What takes a change the table needs a rebuild for: the command, or for a table that
    keeps its history where the docs say what to do, unless a rebuild by copy takes the
    change (``copied``: a change of its layout, :data:`cdclake_merge.layout.COPIED`)."""
    from cdclake_merge.failures import HISTORY_NOT_REBUILT

    if place.history and not copied:
        return HISTORY_NOT_REBUILT
    command = f"run cdclake rebuild --env {place.env} --table {place.source_table}"
    return command + (" (a copy: the table keeps its history)" if place.history else "")


def layout_reasons(fs: Any, place: LakePlace, timeline: str) -> list[str]:
    """What config asks for that only a rebuild gives the stored table (its type, key,
    partitioning or a larger record index), as the merge run would refuse it."""
    from cdclake_merge.layout import Layout, rebuild_reasons, stored_layout

    stored = stored_layout(fs, timeline)
    wanted = Layout(place.table_type, place.key, place.partition, place.record_index_file_groups)
    return rebuild_reasons(stored, wanted) if stored is not None else []


def layout_warnings(place: LakePlace, reasons: list[str]) -> list[str]:
    """A warning when config asks for what only a rebuild gives the stored table (``reasons``,
    :func:`layout_reasons`): what the merge run would refuse."""
    from cdclake_merge.layout import copy_takes

    if not reasons:
        return []
    return [
        f"needs rebuild: {'; '.join(reasons)} (config differs from the stored table; its merge "
        f"runs are refused): {rebuild_remedy(place, copy_takes(reasons))}"
    ]


def expiry_warning(waited: dt.timedelta, expiration_days: int) -> str | None:
    """A warning when the oldest waiting change file nears its expiration, else None."""
    limit = dt.timedelta(days=expiration_days)
    if waited < limit * EXPIRY_WARNING_SHARE:
        return None
    left = max(limit - waited, dt.timedelta(0))
    return (
        f"the oldest change file has waited {waited.days} of the {expiration_days} days the "
        f"bucket keeps it: {'it has expired' if not left else f'it expires in {left.days} days'} "
        "and its changes are lost to the lake; find why the table does not merge "
        "(cdclake dispatch --dry-run, the job's last run)"
    )


def local_last_run(fs: Any, place: LakePlace, state: Any) -> dict[str, Any] | None:
    """Locally the commits are the record: the newest one, or the failed run after it."""
    failed = f"failed-v{state.version + 1:08d}"
    if failed in fs.list_dir(place.quarantine_root):
        return {
            "outcome": "FAILED",
            "at": None,
            "detail": f"above max_bad_fraction, nothing committed; bad lines in {failed}",
        }
    if not state.version:
        return None
    run = state.checkpoint.get("run", {})
    detail = (
        f"v{state.version}: {run.get('files_applied', 0)} files, "
        f"{run.get('applied', 0)} events applied, {run.get('quarantined', 0)} quarantined"
    )
    if run.get("replay"):
        detail += f" (replay {run['replay']})"
    return {"outcome": "COMMITTED", "at": state.checkpoint.get("staged_at"), "detail": detail}


def glue_last_run(glue: Any, job: str) -> dict[str, Any] | None:
    runs = glue.get_job_runs(JobName=job, MaxResults=1).get("JobRuns", [])
    if not runs:
        return None
    newest = max(runs, key=lambda r: r["StartedOn"])
    return {
        "outcome": newest["JobRunState"],
        "at": _iso(newest.get("CompletedOn") or newest["StartedOn"]),
        "detail": " ".join(str(newest.get("ErrorMessage", "")).split())[:300] or newest["Id"],
    }


def local_connectors(env: str) -> dict[str, Any]:
    from cdclake.local.stack import LocalStack

    status = LocalStack(env=env).status()
    if not status.get("up"):
        return {"error": "the local stack is not running (cdclake local up)"}
    return dict(status.get("connectors", {}))


def msk_connectors(client: Any, prefix: str) -> dict[str, Any]:
    """MSK Connect connectors named after the environment's prefix."""
    found: dict[str, Any] = {}
    for page in client.get_paginator("list_connectors").paginate(connectorNamePrefix=prefix):
        for item in page.get("connectors", []):
            described = client.describe_connector(connectorArn=item["connectorArn"])
            found[item["connectorName"]] = {
                "state": described.get("connectorState", item.get("connectorState")),
                "detail": (described.get("stateDescription") or {}).get("message"),
            }
    return found


def collect(
    config: EnvironmentConfig,
    *,
    now: dt.datetime | None = None,
    aws_client: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """The whole screen as data: tables and connectors of ``config.env``."""
    moment = now or dt.datetime.now(dt.UTC)
    fs = AnyFileSystem()
    local = config.env == "local"
    if aws_client is None:
        import boto3

        def aws_client(service: str) -> Any:
            return boto3.client(service, region_name=config.region)

    tables: list[dict[str, Any]] = []
    glue = None if local else aws_client("glue")
    for table in config.lake_tables:
        try:
            place = (
                local_place(config, table.name) if local else aws_place(config, table.name, glue)
            )
        except (LookupError, ValueError) as exc:
            tables.append({"table": table.name, "errors": [error_line(exc, ERROR_CHARS)]})
            continue
        # The local stack's moto answers CloudWatch too: what `cdclake merge --env local`
        # publishes there is read back the same way.
        tables.append(
            table_status(
                place,
                fs=fs,
                now=moment,
                expiration_days=config.lake.change_file_expiration_days,
                cloudwatch=aws_client("cloudwatch"),
                glue=glue,
            )
        )
    try:
        connectors = (
            local_connectors(config.env)
            if local
            else msk_connectors(aws_client("kafkaconnect"), config.prefix)
        )
    except Exception as exc:
        connectors = {"error": f"not reachable: {error_line(exc, ERROR_CHARS)}"}
    return {"env": config.env, "at": _iso(moment), "tables": tables, "connectors": connectors}


def _lag_text(row: dict[str, Any]) -> str:
    lag = row.get("lag_seconds")
    if lag is None:
        return "-"
    seconds = int(lag)
    text = f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds}s"
    return f"{text} ({row['lag_from']})"


def render(screen: dict[str, Any], console: Console) -> None:
    grid = Table(title=f"cdc-lake {screen['env']} at {screen['at']}")
    grid.add_column("table", no_wrap=True)
    for column in ("last commit", "lag", "pending files", "quarantined", "last run"):
        grid.add_column(column, overflow="fold")
    for row in screen["tables"]:
        commit = row.get("last_commit")
        run = row.get("last_run")
        grid.add_row(
            row["table"],
            f"v{row['version']} {commit['instant']}" if commit else "-",
            _lag_text(row),
            "?" if row.get("pending_files") is None else str(row["pending_files"]),
            "?" if row.get("quarantined_lines") is None else str(row["quarantined_lines"]),
            f"{run['outcome']} {run['at'] or ''}".strip() if run else "-",
        )
    console.print(grid)
    for row in screen["tables"]:
        for error in row.get("errors", []):
            console.print(f"[yellow]{row['table']}[/yellow]: {error}", highlight=False)
        for warning in row.get("warnings", []):
            console.print(f"[red]{row['table']}[/red]: {warning}", highlight=False)
        if row.get("rebuilding"):
            console.print(f"[cyan]{row['table']}[/cyan]: {row['rebuilding']}", highlight=False)
    connectors = screen["connectors"]
    if "error" in connectors:
        console.print(f"connectors: {connectors['error']}", highlight=False)
        return
    for name, info in sorted(connectors.items()):
        tasks = info.get("tasks")
        shown = f" tasks {','.join(map(str, tasks))}" if tasks else ""
        detail = f" ({info['detail']})" if info.get("detail") else ""
        console.print(f"connector {name}: {info.get('state')}{shown}{detail}", highlight=False)


def status(
    env: Annotated[str, typer.Option("--env", help="environment: config/<env>.yaml")],
    json_output: Annotated[bool, typer.Option("--json", help="print the screen as JSON")] = False,
    config_dir: Annotated[
        Path | None, typer.Option("--config-dir", help="folder of the environment files")
    ] = None,
) -> None:
    """Per lake table: last commit, lag, pending change files, quarantined lines, last run."""
    from environment.config import load_config

    config = load_config(env, config_dir=config_dir)  # ConfigError: one line (cdclake.errors)
    if config.env == "local":
        from cdclake.local.lake import running_status

        running_status(config.env)  # StackNotRunning: one line (cdclake.errors)
    screen = collect(config)
    if json_output:
        print(json.dumps(screen, indent=2, default=str))
    else:
        render(screen, Console())
