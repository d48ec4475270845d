"""``cdclake``: run the merge job locally, export a table, generate events, demo."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from cdclake.dispatch import dispatch_command
from cdclake.doctor import doctor
from cdclake.erase import erase_command
from cdclake.errors import error_line, fail, one_line, run
from cdclake.lake_reader import local_spark, read_lake
from cdclake.local.cli import app as local_app
from cdclake.quarantine import app as quarantine_app
from cdclake.query import query
from cdclake.rebuild import rebuild
from cdclake.restore import restore_command
from cdclake.snapshot import snapshot
from cdclake.status import status
from cdclake.validate import validate

app = typer.Typer(
    help="cdc-lake: Debezium change files → lake tables, locally or on Glue. "
    "--debug (anywhere) or CDCLAKE_DEBUG=1 shows tracebacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command(name="doctor")(doctor)
app.command(name="validate")(validate)
app.command(name="status")(status)
app.command(name="dispatch")(dispatch_command)
app.command(name="snapshot")(snapshot)
app.command(name="rebuild")(rebuild)
app.command(name="query")(query)
app.add_typer(local_app, name="local")
app.add_typer(quarantine_app, name="quarantine")
app.command("restore")(restore_command)
app.command("erase")(erase_command)
console = Console(stderr=True, soft_wrap=True)
STAGE_LABELS = {
    "read": "reading and parsing change files",
    "fold": "ordering changes per key",
    "write": "writing and committing",
    "services": "keeping the day's savepoint",
}


class Shape(StrEnum):
    schema = "schema"
    envelope = "envelope"
    flat = "flat"


class TableType(StrEnum):
    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _parse_types(values: list[str]) -> dict[str, str]:
    types: dict[str, str] = {}
    for value in values:
        name, sep, spark_type = value.partition("=")
        if not sep:
            fail(f"--type expects COLUMN=TYPE, got {value!r}", 2)
        types[name.strip()] = spark_type.strip()
    return types


@app.command()
def merge(
    table: Annotated[
        str, typer.Option(help="DATABASE.TABLE to merge into (with --env: SCHEMA.TABLE in config)")
    ],
    changes: Annotated[
        str | None, typer.Option(help="Change files (S3 sink layout): a folder or s3:// URI")
    ] = None,
    warehouse: Annotated[
        Path | None, typer.Option(help="Warehouse folder (tables + metastore)")
    ] = None,
    key: Annotated[str, typer.Option(help="Primary key column(s), comma-separated")] = "",
    env: Annotated[
        str | None,
        typer.Option(help="Take everything else from config/ENV.yaml; 'local': the local stack"),
    ] = None,
    table_type: Annotated[
        TableType, typer.Option(help="Hudi table type, fixed when the table is created")
    ] = TableType.COPY_ON_WRITE,
    partition: Annotated[
        str, typer.Option(help="Partition column(s), comma-separated (Hive-style folders)")
    ] = "",
    column_type: Annotated[
        list[str] | None,
        typer.Option("--type", help="COLUMN=TYPE for change files without a schema"),
    ] = None,
    exclude: Annotated[str, typer.Option(help="Columns to drop, comma-separated")] = "",
    max_bad_fraction: Annotated[
        float, typer.Option(help="Fail without committing above this share of bad lines")
    ] = 0.01,
    tombstone_retention_days: Annotated[
        float | None,
        typer.Option(help="Days a deleted key is remembered (default: config's, else 14)"),
    ] = None,
    max_files: Annotated[
        int | None,
        typer.Option(min=1, help="Apply at most N change files; the next run takes the rest"),
    ] = None,
    max_bytes: Annotated[
        str | None,
        typer.Option(
            metavar="SIZE",
            help="Apply at most SIZE of change files (e.g. 512MB, 2GiB); the "
            "next run takes the rest",
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the counts as JSON")] = False,
) -> None:
    """Apply the not-yet-applied change files under CHANGES to the Hudi table (all of them,
    or a prefix of each partition within --max-files/--max-bytes): to its live generation, or
    while a rebuild is in progress, to the generation being built (one rebuild run)."""
    from cdclake_merge.generations import notifications_beside
    from cdclake_merge.hudi import CatalogSyncError
    from cdclake_merge.job import MergeError, MergeOptions
    from cdclake_merge.rebuild import merge_table
    from cdclake_merge.sink import Sink, open_sink
    from cdclake_merge.storage import LocalFileSystem

    if not 0 <= max_bad_fraction <= 1:
        fail("--max-bad-fraction must be between 0 and 1", 2)
    byte_cap = _byte_size("--max-bytes", max_bytes) if max_bytes is not None else None
    source_table = table
    services: dict[str, Any] = {}  # the table's services' settings, config's where --env
    keep_columns, notifications = True, None  # a rebuild's: config's where --env
    if env is not None:
        target = _env_target(env, table)
        table, changes, warehouse = target.table, target.changes, target.warehouse
        key, partition = ",".join(target.key), ",".join(target.partition)
        table_type = TableType(target.table_type)
        column_type = [f"{n}={t}" for n, t in target.column_types.items()]
        exclude = ",".join(target.exclude)
        from environment.config import load_config

        config = load_config(env)
        if tombstone_retention_days is None:
            tombstone_retention_days = config.lake.tombstone_retention_days
        services = config.lake.services_of(config.lake_table(source_table))
        keep_columns = config.lake_table(source_table).drop_columns == "keep"
        notifications = notifications_beside(changes, source_table)
    if changes is None or warehouse is None or not key:
        fail("--changes, --warehouse and --key are needed (or --env to take them from config)", 2)
    assert changes is not None and warehouse is not None
    if "://" not in changes:
        if not Path(changes).is_dir():
            fail(f"--changes {changes} is not a folder", 2)
        changes = str(Path(changes).resolve())
    # The library's default unless given.
    retention: dict[str, Any] = (
        {}
        if tombstone_retention_days is None
        else {"tombstone_retention_days": tombstone_retention_days}
    )
    options = MergeOptions(
        table=table,
        key=_split(key),
        changes=changes,
        column_types=_parse_types(column_type or []),
        exclude_columns=frozenset(_split(exclude)),
        max_bad_fraction=max_bad_fraction,
        max_files=max_files,
        max_bytes=byte_cap,
        **retention,
    )
    spark_factory = local_spark(warehouse)
    local = LocalFileSystem()
    resolved = str(warehouse.resolve())

    def generation_sink(generation: int, catalog: bool) -> Sink:
        return open_sink(
            warehouse=resolved,
            table=table,
            key=options.key,
            fs=local,
            spark_factory=spark_factory,
            partition_fields=_split(partition),
            table_type=table_type.value,
            sync_catalog=catalog,
            generation=generation,
            **services,
        )

    try:
        generation_sink(1, True)
    except ValueError as exc:
        fail(str(exc), 2)
    fs: Any = local if "://" not in changes else _LazyHadoopFileSystem(spark_factory)

    interactive = console.is_terminal and not json_output
    with Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        TimeElapsedColumn(),
        console=console,
        disable=not interactive,
        transient=True,
    ) as progress:
        task = progress.add_task("listing change files", total=len(STAGE_LABELS))

        def on_stage(stage: str) -> None:
            progress.update(task, description=STAGE_LABELS.get(stage, stage), advance=1)

        started = time.monotonic()
        try:
            run = merge_table(
                spark_factory,
                fs,
                generation_sink,
                options,
                notifications=notifications,
                keep_columns=keep_columns,
                progress=on_stage,
            )
        except (MergeError, CatalogSyncError) as exc:
            fail(str(exc))
        except ValueError as exc:  # the table exists with another key, type or partitioning
            fail(str(exc), 2)
        except RuntimeError as exc:
            fail(error_line(exc, limit=None))
    result = run.result
    if env is not None and not run.rebuilding:
        _publish_metrics(env, source_table, result, time.monotonic() - started)

    if json_output:
        print(json.dumps(run.as_dict(), indent=2))
        return
    if run.rebuilding:
        console.print(
            f"{table}: a rebuild is in progress: generation {run.state.building or run.state.live} "
            f"took this run ({result.files_applied:,} change files)"
            + ("; caught up and swapped in" if run.swapped else ""),
            highlight=False,
        )
        return
    if not result.committed:
        console.print(f"{table}: no new change files; nothing to do (version {result.version})")
        return
    _print_result(result)
    if result.files_pending:
        console.print(
            f"{table}: {result.files_pending:,} change files left for the next run (the cap)",
            highlight=False,
        )


def _byte_size(option: str, value: str) -> int:
    """``512MB``, ``2GiB``, ``1000``: pydantic's reading of sizes, as config's are read."""
    from pydantic import ByteSize, TypeAdapter, ValidationError

    try:
        size = int(TypeAdapter(ByteSize).validate_python(value))
    except ValidationError:
        fail(f"{option} expects a size such as 1000, 512MB or 2GiB, got {value!r}", 2)
    if size < 1:
        fail(f"{option} must be at least one byte, got {value!r}", 2)
    return size


def _publish_metrics(env: str, table: str, result: Any, seconds: float) -> None:
    """The run's lake metrics, as the Glue job publishes them, where a region is configured
    (``AWS_REGION``, a profile; ``AWS_ENDPOINT_URL`` points boto3 at a local stand-in)."""
    import boto3

    from cdclake_merge.metrics import TableRun, publish

    if boto3.session.Session().region_name is None:
        return
    run = TableRun.from_result(
        result.as_dict(), environment=env, table=table, duration_seconds=seconds
    )
    publish(run)  # a failure is one logged line; the merge stands


def _env_target(env: str, source_table: str) -> Any:
    """The table's lake side from config; only ``local`` (the running local stack) here.

    On AWS the table's Glue job carries the same values as its default arguments.
    """
    from environment.config import load_config

    config = load_config(env)  # a ConfigError is the error boundary's (errors.describe)
    if env != "local":
        try:
            job = config.lake_table(source_table).merge_job_name(config.prefix)
        except ValueError as exc:
            fail(str(exc), 2)
        fail(f"--env {env}: run the table's Glue job (aws glue start-job-run --job-name {job})", 2)
    from cdclake.local.lake import lake_target

    try:
        return lake_target(env, source_table)
    except ValueError as exc:
        fail(str(exc), 2)
    except LookupError as exc:
        fail(str(exc), 1)


class _LazyHadoopFileSystem:
    """Hadoop's filesystem (s3://, s3a://) once Spark is up; listing needs the JVM."""

    def __init__(self, spark_factory: Any) -> None:
        self._spark_factory = spark_factory
        self._fs: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._fs is None:
            from cdclake_merge.storage import HadoopFileSystem

            self._fs = HadoopFileSystem(self._spark_factory())
        return getattr(self._fs, name)


def _print_result(result: Any) -> None:
    grid = Table(title=f"{result.table} → version {result.version}", show_header=False)
    grid.add_column("what")
    grid.add_column("count", justify="right")
    for label, value in (
        ("files applied", result.files_applied),
        ("events read", result.events_read),
        ("upserts (keys)", result.upserts),
        ("deletes (keys)", result.deletes),
        ("truncates", result.truncates),
        ("stale skipped", result.stale_skipped),
        ("skipped lines", result.skipped),
        ("quarantined", result.quarantined),
        ("TOAST unresolved", result.toast_unresolved),
    ):
        grid.add_row(label, f"{value:,}")
    Console().print(grid)
    for reason, count in sorted(result.quarantine_reasons.items()):
        console.print(f"  quarantined: {count} x {reason}", highlight=False)


@app.command()
def export(
    warehouse: Annotated[Path, typer.Option(help="Warehouse folder")],
    table: Annotated[str, typer.Option(help="DATABASE.TABLE")],
    out: Annotated[Path, typer.Option(help="Output JSON lines file ('-' for stdout)")],
) -> None:
    """Write the table's live rows as JSON lines sorted by key (read without a JVM)."""
    lake = read_lake(warehouse, table)
    if lake is None:
        fail(f"table {table} has no commit under {warehouse}")
    assert lake is not None
    if lake.reader.startswith("spark"):
        console.print(f"{table}: read with {lake.reader}", highlight=False)
    lines = [json.dumps(row, separators=(",", ":")) for row in lake.rows]
    text = "".join(line + "\n" for line in lines)
    if str(out) == "-":
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        console.print(f"{len(lines):,} rows of {table} (version {lake.version}) → {out}")


@app.command()
def generate(
    out: Annotated[Path, typer.Option(help="Output folder (S3 sink layout + expected.jsonl)")],
    table: Annotated[str, typer.Option(help="Source table name, e.g. public.orders")] = (
        "public.orders"
    ),
    events: Annotated[int, typer.Option(help="Number of change events")] = 1000,
    seed: Annotated[int, typer.Option(help="Random seed")] = 1,
    shape: Annotated[Shape, typer.Option(help="Event shape")] = Shape.schema,
    keys: Annotated[int, typer.Option(help="Distinct keys (default: events / 10)")] = 0,
    partitions: Annotated[int, typer.Option(help="Kafka partitions")] = 3,
    flush_size: Annotated[int, typer.Option(help="Events per change file")] = 200,
) -> None:
    """Generate realistic Debezium events and the table state they describe."""
    from cdclake_merge.generator import GeneratorOptions, generate_files

    summary = generate_files(
        out,
        GeneratorOptions(
            table=table,
            events=events,
            seed=seed,
            shape=shape.value,
            keys=keys or max(events // 10, 1),
            partitions=partitions,
            flush_size=flush_size,
        ),
    )
    console.print(
        f"{summary['events']:,} events in {summary['files']:,} files "
        f"({summary['live_rows']:,} live rows expected) → {out}"
    )


@app.command()
def demo(
    synthetic: Annotated[
        bool,
        typer.Option(help="Generated Debezium events instead of the real pipeline (no stack)"),
    ] = False,
    workdir: Annotated[
        Path | None, typer.Option(help="Folder for the demo (default: a temporary one)")
    ] = None,
    events: Annotated[int, typer.Option(help="--synthetic: events to generate")] = 5000,
    batches: Annotated[int, typer.Option(help="--synthetic: merge runs")] = 3,
    seed: Annotated[int, typer.Option(help="Random seed")] = 7,
) -> None:
    """The real pipeline on this machine: workload → Debezium → Kafka → S3 → Hudi → validate."""
    base = workdir or Path(tempfile.mkdtemp(prefix="cdclake-demo-"))
    if workdir is None:
        # mkdtemp's folder is private; as root the stack runs PostgreSQL as `postgres`,
        # which must be able to enter it.
        base.chmod(0o755)
    if synthetic:
        from cdclake_merge.demo import run_demo

        ok = run_demo(base, events=events, batches=batches, seed=seed, console=Console())
    else:
        from cdclake.demo import run_pipeline_demo
        from cdclake.local.processes import StackError

        try:
            ok = run_pipeline_demo(base, seed=seed, console=Console())
        except StackError as exc:
            fail(one_line(str(exc), limit=None))
        except subprocess.CalledProcessError as exc:
            fail(f"{' '.join(exc.cmd)} failed with exit status {exc.returncode}; see {base}")
    if not ok:
        raise typer.Exit(1)


@app.command()
def cost(
    env: Annotated[str, typer.Option("--env", help="environment: config/<env>.yaml")],
    tables: Annotated[int, typer.Option(help="Tables of the profile beside the configured")] = 100,
    active_share: Annotated[
        float, typer.Option(help="Share of the tables with changes in a cycle (0 to 1)")
    ] = 0.1,
    events_per_run: Annotated[
        int, typer.Option(help="Events a table with changes has in a cycle")
    ] = 10_000,
    events_per_hour: Annotated[
        int, typer.Option(help="Events an hour of a table that never stops changing")
    ] = 40_000,
    json_output: Annotated[bool, typer.Option("--json", help="print the figures as JSON")] = False,
    config_dir: Annotated[
        Path | None, typer.Option("--config-dir", help="folder of the environment files")
    ] = None,
) -> None:
    """Merge runs' DPU-hours and USD a month: the dispatcher beside a bare schedule, each lake
    table's freshness objective, and the dispatcher's own turns."""
    from cdclake import cost as model
    from environment.config import load_config

    config = load_config(env, config_dir=config_dir)  # ConfigError: one line (cdclake.errors)
    try:
        figures = model.report(
            config,
            tables=tables,
            active_share=active_share,
            events_per_run=events_per_run,
            events_per_hour=events_per_hour,
        )
    except model.CostError as exc:
        fail(str(exc), 2)
    if json_output:
        print(json.dumps(figures.as_dict(), indent=2))
        return
    out = Console()
    out.print(
        f"{figures.env}: merge runs a month; a cycle every {figures.cycle_minutes} min, "
        f"{figures.profile.active_share:.0%} of the tables have changes in a cycle, "
        f"{figures.profile.events_per_run:,} events each",
        highlight=False,
    )
    table = Table()
    for column in ("tables", "design", "runs", "DPU-hours", "USD", "of bare"):
        table.add_column(column, justify="left" if column == "design" else "right")
    for scope in (figures.configured, figures.profile):
        label = f"{scope.tables} ({scope.scope})"
        for name, design in (
            ("dispatcher", scope.dispatcher),
            ("bare schedule", scope.bare_schedule),
        ):
            share = f"{scope.share_of_bare:.1%}" if design is scope.dispatcher else ""
            table.add_row(
                label, name, f"{design.runs:,.0f}", f"{design.dpu_hours:,.1f}",
                f"{design.usd:,.0f}", share,
            )  # fmt: skip
    out.print(table)
    met = {True: "met", False: "NOT met"}
    out.print(
        f"idle table (dispatcher): {figures.idle_table_dpu_hours:g} DPU-hours "
        f"(target 0: {met[figures.idle_target_met]}); "
        f"{figures.profile.tables}-table profile: {figures.profile.share_of_bare:.1%} of bare "
        f"(target ≤ {model.TARGET_PROFILE_SHARE:.0%}: {met[figures.profile_target_met]})",
        highlight=False,
    )
    out.print(
        f"each lake table's objective, changing {figures.events_per_hour:,} events an hour "
        "all month (* its own):",
        highlight=False,
    )
    priced = Table()
    for column in ("table", "objective", "run every", "workers", "runs", "DPU-hours", "USD"):
        priced.add_column(column, justify="left" if column == "table" else "right")
    for table_objectives in figures.objectives:
        for price in table_objectives.prices:
            own = "*" if price.freshness_minutes == table_objectives.freshness_minutes else ""
            priced.add_row(
                table_objectives.table, f"{price.freshness_minutes} min{own}",
                f"{price.minutes_between_runs:.1f} min", str(price.workers),
                f"{price.month.runs:,.0f}", f"{price.month.dpu_hours:,.1f}",
                f"{price.month.usd:,.2f}",
            )  # fmt: skip
    out.print(priced)
    for turns in (figures.turns, figures.profile_turns):
        out.print(
            f"dispatcher turns over {turns.tables} tables, each starting nothing: "
            f"{turns.turns:,.0f} a month, {turns.usd:,.2f} USD (Lambda {turns.lambda_usd:,.2f}, "
            f"S3 {turns.s3_usd:,.2f}, CloudWatch {turns.cloudwatch_usd:,.2f})",
            highlight=False,
        )


def main() -> None:
    """The ``cdclake`` console script: the app inside the error boundary (cdclake/errors.py)."""
    sys.exit(run(app, sys.argv[1:]))


if __name__ == "__main__":  # pragma: no cover
    main()
