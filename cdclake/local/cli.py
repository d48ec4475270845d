"""``cdclake local up | status | reconcile | down``: the capture stack on this machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from cdclake.errors import fail
from cdclake.local.processes import StackError
from cdclake.local.stack import LocalStack
from cdclake.query import engine_port

app = typer.Typer(
    help="The local capture stack: PostgreSQL, Kafka, Kafka Connect, moto S3 (127.0.0.1).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True, soft_wrap=True)

EnvOption = Annotated[str, typer.Option("--env", help="config/<env>.yaml")]
StateOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="logs and state (default .local-stack/, or $CDCLAKE_LOCAL_DIR)",
        file_okay=False,
    ),
]


def _stack(env: str, state_dir: Path | None) -> LocalStack:
    return LocalStack(state_dir, env=env)


@app.command()
def up(
    env: EnvOption = "local",
    state_dir: StateOption = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for RUNNING")] = 300.0,
    fanout: Annotated[
        bool,
        typer.Option(
            "--fanout",
            help="also Debezium Server, Kinesis, the fan-out handler, EventBridge and SQS",
        ),
    ] = False,
    capture: Annotated[
        bool,
        typer.Option(
            "--capture/--no-capture",
            help="--no-capture: database, Kafka and S3 only; load data, then `up` snapshots it",
        ),
    ] = True,
    query: Annotated[
        bool,
        typer.Option("--query", help="also Trino (Athena's engine) for `cdclake query`"),
    ] = False,
) -> None:
    """Start (or resume) the stack and wait until both connectors are RUNNING."""
    stack = _stack(env, state_dir)
    try:
        with console.status("starting") as spinner:
            stack.up(
                timeout=timeout,
                progress=lambda step: spinner.update(step),
                fanout=fanout,
                capture=capture,
            )
            trino_port = engine_port(stack, progress=spinner.update) if query else None
    except StackError as exc:
        # What did start keeps running for a look at its log; `down` stops it.
        fail(f"{exc} (what started is still running: cdclake local down stops it)")
    status = stack.status()
    started = "connectors RUNNING" if capture else "no capture yet (`up` starts it)"
    console.print(f"[green]up[/green]: {started}; logs in {stack.root / 'logs'}")
    for key in ("postgres_dsn", "kafka_bootstrap", "connect_url", "s3_endpoint", "changes_uri"):
        console.print(f"  {key}: {status[key]}", highlight=False)
    if trino_port is not None:
        console.print(f"  trino: http://127.0.0.1:{trino_port} (cdclake query)", highlight=False)
    for name, consumer in status.get("consumers", {}).items():
        console.print(f"  consumer {name}: {consumer['queue_url']}", highlight=False)


@app.command()
def status(
    env: EnvOption = "local",
    state_dir: StateOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable")] = False,
) -> None:
    """Endpoints, processes and connector states; exit 1 when not everything runs."""
    result = _stack(env, state_dir).status()
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        for key, value in result.items():
            console.print(f"{key}: {value}", highlight=False)
    if not result.get("up"):
        raise typer.Exit(1)


@app.command()
def reconcile(env: EnvOption = "local", state_dir: StateOption = None) -> None:
    """Make the publication follow the configured tables; snapshot the tables that joined."""
    try:
        result = _stack(env, state_dir).reconcile()
    except StackError as exc:
        fail(str(exc))
    missing = result.bootstrap.missing_tables
    console.print(f"published: {', '.join(result.bootstrap.published_tables)}", highlight=False)
    if missing:
        console.print(f"[yellow]not created yet[/yellow]: {', '.join(missing)}", highlight=False)
    if result.joined:
        console.print(
            f"incremental snapshot signalled ({result.signal_id}) for: {', '.join(result.joined)}",
            highlight=False,
        )


@app.command()
def down(
    env: EnvOption = "local",
    state_dir: StateOption = None,
    purge: Annotated[bool, typer.Option(help="also delete the state folder")] = False,
) -> None:
    """Stop every process of the stack (by PID and process group) and verify they are gone."""
    try:
        stopped = _stack(env, state_dir).down(purge=purge)
    except StackError as exc:
        fail(str(exc))
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}", highlight=False)
