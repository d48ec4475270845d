"""``cdclake query``: SQL on the lake the way Athena reads it, through Trino on the local stack.

Athena engine version 3 is built on Trino; here one Trino node (``cdclake.local.trino``) reads
the tables by name through the stack's Hive metastore and moto S3. It starts on the first query
(or with ``cdclake local up --query``) and stops with ``cdclake local down``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cdclake.errors import LOCAL_STACK_HELP
from cdclake.local import metastore as local_metastore
from cdclake.local import processes
from cdclake.local import trino as local_trino
from cdclake.local.processes import StackError
from cdclake.local.stack import LocalStack


def engine_port(stack: LocalStack, *, progress: Callable[[str], None] = lambda _: None) -> int:
    """Trino's port on the running stack (its moto S3 and Hive metastore); started if needed."""
    state = stack.load_state()
    needed = ("moto", local_metastore.NAME)
    if state is None or not all(
        name in state.processes and processes.is_running(state.processes[name]) for name in needed
    ):
        raise StackError(LOCAL_STACK_HELP)
    return local_trino.ensure_running(
        stack, state, metastore_uri=local_metastore.uri(state), progress=progress
    )


def _json_value(value: Any) -> Any:
    """Exact text for what JSON has no type for: decimals keep their scale, times ISO 8601."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return value


def as_json(result: local_trino.Result) -> str:
    return json.dumps(
        {
            "columns": [
                {"name": n, "type": t} for n, t in zip(result.columns, result.types, strict=True)
            ],
            "rows": [[_json_value(v) for v in row] for row in result.rows],
        },
        indent=2,
    )


def render(result: local_trino.Result, console: Console) -> None:
    table = Table(caption=f"{len(result.rows)} row(s)")
    for name, kind in zip(result.columns, result.types, strict=True):
        table.add_column(f"{name}\n[dim]{kind}[/dim]")
    for row in result.rows:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    console.print(table)


def query(
    sql: Annotated[str, typer.Argument(help="one SQL statement (Trino's dialect, as Athena v3)")],
    env: Annotated[str, typer.Option("--env", help="environment: config/<env>.yaml")] = "local",
    catalog: Annotated[str, typer.Option(help="default catalog: hive or hudi")] = "hive",
    schema: Annotated[str | None, typer.Option(help="default schema (database)")] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="columns (name, type) and rows as JSON")
    ] = False,
) -> None:
    """Run SQL on the local stack's lake through Trino (Athena's engine); print the result."""
    from trino.exceptions import TrinoQueryError, TrinoUserError

    from environment.config import load_config

    err = Console(stderr=True, soft_wrap=True)
    config = load_config(env)  # an unknown environment is a config error before anything else
    if env != "local":
        err.print(
            f"[red]error:[/red] --env {env}: `cdclake query` runs on the local stack only; "
            f"on AWS query the lake with Athena: workgroup {config.resource_name('lake')}, "
            f"database {config.lake.glue_database} (docs/lake.md)",
            highlight=False,
        )
        raise typer.Exit(2)
    stack = LocalStack(env=env)
    with err.status("starting Trino") as spinner:
        port = engine_port(stack, progress=lambda step: spinner.update(step))
    try:
        result = local_trino.run_query(port, sql, catalog=catalog, schema=schema)
    except TrinoQueryError as exc:
        code = 2 if isinstance(exc, TrinoUserError) else 1
        err.print(f"[red]error:[/red] {exc.error_name}: {exc.message}", highlight=False)
        raise typer.Exit(code) from None
    if json_output:
        print(as_json(result))
    else:
        render(result, Console(soft_wrap=True))
