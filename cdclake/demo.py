"""``make demo``: the real pipeline on this machine, then proof that the lake equals the database.

PostgreSQL → Debezium (Kafka Connect) → Kafka → S3 sink → S3 (moto) → merge → Hudi, all
started here by ``cdclake local``; a short workload of inserts, updates, deletes and a
primary-key change; merges until the lake has caught up; ``validate`` per table; a table of
what happened; the stack stopped again whatever happened.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from cdclake.local.stack import LocalStack

TABLES = ("public.customers", "public.orders")
SCHEMA = (
    "CREATE TABLE public.customers (id int PRIMARY KEY, name text, email text, "
    "password_hash text, created_at timestamptz DEFAULT now())",
    "CREATE TABLE public.orders (id int PRIMARY KEY, customer_id int, order_date date, "
    "amount numeric(10,2), status text, attrs jsonb, ref uuid, paid boolean)",
)
CATCH_UP_SECONDS = 180


def run_pipeline_demo(workdir: Path, *, seed: int, console: Console) -> bool:
    """True when every table's lake rows equal its source rows."""
    from cdclake.local.processes import terminated_as_interrupt
    from cdclake.local.stack import LocalStack

    os.environ["CDCLAKE_LOCAL_DIR"] = str(workdir / "stack")
    stack = LocalStack(env="local")
    stack.down(purge=True)  # a demo starts from an empty database and an empty lake
    with terminated_as_interrupt():
        reports = _run_on(stack, seed=seed, console=console)
    _print(console, reports)
    console.print(f"the Hudi tables stay in {stack.root / 'warehouse'}")
    return all(report.equal for report, _ in reports.values())


def _run_on(stack: LocalStack, *, seed: int, console: Console) -> dict[str, tuple[Any, list[Any]]]:
    """Starts ``stack``, captures and merges the workload, and stops it however this ends."""
    try:
        with console.status("starting PostgreSQL, Kafka, Kafka Connect and S3 (moto)") as status:
            stack.up(timeout=300, progress=lambda step: status.update(step))
        console.print(f"local stack up; logs in {stack.root / 'logs'}")
        with stack.connect() as conn:
            _workload_before_capture(conn, random.Random(seed))
        joined = stack.reconcile().joined
        console.print(f"captured: {', '.join(joined)} (incremental snapshot of existing rows)")
        with stack.connect() as conn:
            counts = _workload(conn, random.Random(seed + 1))
        console.print(
            "workload: " + ", ".join(f"{n} {what}" for what, n in counts.items()), highlight=False
        )
        return _merge_until_equal(console)
    finally:
        with console.status("stopping the local stack"):
            stack.down()


def _workload_before_capture(conn: Any, rng: random.Random) -> None:
    for statement in SCHEMA:
        conn.run(statement)
    for i in range(1, 41):
        conn.run(
            "INSERT INTO public.customers (id, name, email, password_hash) "
            "VALUES (:i, :n, :e, 'x')",
            i=i,
            n=f"customer {i}",
            e=f"c{i}@example.com",
        )
    for i in range(1, 121):
        _insert_order(conn, rng, i)


def _insert_order(conn: Any, rng: random.Random, i: int) -> None:
    conn.run(
        "INSERT INTO public.orders VALUES (:i, :c, current_date - CAST(:d AS integer), "
        "CAST(:a AS numeric), :s, CAST(:j AS jsonb), gen_random_uuid(), :p)",
        i=i,
        c=rng.randint(1, 40),
        d=rng.randint(0, 30),
        a=f"{rng.uniform(1, 500):.2f}",
        s=rng.choice(["new", "paid", "shipped"]),
        j='{"gift": true}' if rng.random() < 0.2 else "{}",
        p=rng.random() < 0.5,
    )


def _workload(conn: Any, rng: random.Random) -> dict[str, int]:
    """Changes streamed while and after the snapshot runs, a few in multi-row transactions."""
    counts = {"inserts": 0, "updates": 0, "deletes": 0, "key changes": 0}
    next_id = 121
    for step in range(150):
        roll = rng.random()
        if roll < 0.3:
            _insert_order(conn, rng, next_id)
            next_id += 1
            counts["inserts"] += 1
        elif roll < 0.75:
            conn.run("BEGIN")
            for _ in range(rng.randint(1, 3)):
                conn.run(
                    "UPDATE public.orders SET status = :s, amount = amount + 1 WHERE id = :i",
                    s=rng.choice(["paid", "shipped", "returned"]),
                    i=rng.randint(1, next_id - 1),
                )
                counts["updates"] += 1
            conn.run("COMMIT")
        elif roll < 0.9:
            conn.run("DELETE FROM public.orders WHERE id = :i", i=rng.randint(1, next_id - 1))
            counts["deletes"] += 1
        else:
            conn.run(
                "UPDATE public.customers SET email = :e WHERE id = :i",
                e=f"new{step}@example.com",
                i=rng.randint(1, 40),
            )
            counts["updates"] += 1
    conn.run("UPDATE public.customers SET id = 1000 WHERE id = 1")  # a primary-key change
    counts["key changes"] += 1
    return counts


def _merge_until_equal(console: Console) -> dict[str, tuple[Any, list[Any]]]:
    """Merge every table until validate agrees, or the catch-up time is over."""
    from cdclake.local.lake import lake_target
    from cdclake.validate import local_target, validate_once
    from cdclake_merge.job import MergeOptions, run_merge
    from cdclake_merge.session import local_session
    from cdclake_merge.sink import open_sink
    from cdclake_merge.storage import HadoopFileSystem, LocalFileSystem

    targets = {name: lake_target("local", name) for name in TABLES}
    spark = local_session(next(iter(targets.values())).warehouse, app_name="cdclake-demo")
    runs: dict[str, list[Any]] = {name: [] for name in TABLES}
    reports: dict[str, Any] = {}
    deadline = time.monotonic() + CATCH_UP_SECONDS
    with console.status("merging change files into Hudi tables") as status:
        while True:
            for name, target in targets.items():
                status.update(f"merging {name}")
                sink = open_sink(
                    warehouse=str(target.warehouse),
                    table=target.table,
                    key=target.key,
                    fs=LocalFileSystem(),
                    spark_factory=lambda: spark,
                    partition_fields=target.partition,
                    table_type=target.table_type,
                )
                options = MergeOptions(
                    table=target.table,
                    key=target.key,
                    changes=target.changes,
                    column_types=target.column_types,
                    exclude_columns=frozenset(target.exclude),
                )
                result = run_merge(lambda: spark, HadoopFileSystem(spark), sink, options)
                if result.committed:
                    runs[name].append(result)
                status.update(f"validating {name}")
                reports[name] = validate_once(local_target("local", name))
            if all(r.equal for r in reports.values()) or time.monotonic() > deadline:
                break
            time.sleep(5)  # the sink flushes on its rotation interval
    return {name: (reports[name], runs[name]) for name in TABLES}


def summary_table(reports: dict[str, tuple[Any, list[Any]]]) -> Table:
    """Per table: rows on both sides, merge runs and what they applied, validate's verdict.

    Columns separated by spaces, not borders: it fits an 80-column terminal whole.
    """
    grid = Table(
        title="cdclake demo: PostgreSQL → Debezium → Kafka → S3 → Hudi",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    grid.add_column("table", no_wrap=True)
    for column in ("source", "lake", "runs", "events", "upserts", "deletes"):
        grid.add_column(column, justify="right")
    grid.add_column("validate", no_wrap=True)
    for name, (report, runs) in reports.items():
        grid.add_row(
            name,
            f"{report.source_rows:,}",
            f"{report.lake_rows:,}",
            str(len(runs)),
            f"{sum(r.events_read for r in runs):,}",
            f"{sum(r.upserts for r in runs):,}",
            f"{sum(r.deletes for r in runs):,}",
            "[green]equal[/green]" if report.equal else "[red]DIFFERENT[/red]",
        )
    return grid


def _print(console: Console, reports: dict[str, tuple[Any, list[Any]]]) -> None:
    console.print(summary_table(reports))
    for name, (report, _) in reports.items():
        if not report.equal:
            console.print(f"{name}: {report.as_dict()}", highlight=False)
