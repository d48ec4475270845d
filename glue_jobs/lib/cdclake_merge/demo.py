"""``make demo``: the whole local pipeline on generated events, checked against the truth."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cdclake_merge.export import rows_as_json
from cdclake_merge.generator import GeneratorOptions, generate_files
from cdclake_merge.job import MergeOptions, RunResult, run_merge
from cdclake_merge.session import local_session
from cdclake_merge.sink import open_sink
from cdclake_merge.storage import LocalFileSystem

TABLE = "demo.public_orders"


def delivery_batches(source: Path, batches: int) -> list[list[Path]]:
    """Split files into runs the way they arrive: partitions drift apart, so some files
    of one partition land a run after newer files of another (late files)."""
    partitions = sorted(p for p in source.glob("topics/*/partition=*") if p.is_dir())
    plan: list[list[Path]] = [[] for _ in range(batches)]
    for index, folder in enumerate(partitions):
        files = sorted(folder.glob("*.json"))
        lag = index % 2  # odd partitions deliver one run late
        for i, path in enumerate(files):
            slot = min(i * batches // max(len(files), 1) + lag, batches - 1)
            plan[slot].append(path)
    return plan


def run_demo(base: Path, *, events: int, batches: int, seed: int, console: Console) -> bool:
    base.mkdir(parents=True, exist_ok=True)
    source, changes, warehouse = base / "generated", base / "changes", base / "warehouse"
    for folder in (source, changes, warehouse):
        shutil.rmtree(folder, ignore_errors=True)
    meta = generate_files(source, GeneratorOptions(events=events, seed=seed, keys=events // 10))
    console.print(
        f"generated {meta['events']:,} Debezium events ({meta['files']} files, 3 partitions, "
        f"snapshot + transactions + deletes + PK changes + TOAST + a truncate + redelivery)"
    )
    spark = local_session(warehouse, app_name="cdclake-demo")
    fs = LocalFileSystem()
    sink = open_sink(
        warehouse=str(warehouse), table=TABLE, key=meta["key"], fs=fs, spark_factory=lambda: spark
    )
    options = MergeOptions(table=TABLE, key=tuple(meta["key"]), changes=str(changes))
    summary = Table(title="cdclake demo: merge runs")
    for column in ("run", "files", "events", "upserts", "deletes", "stale", "skipped", "bad", "s"):
        summary.add_column(column, justify="right")
    results: list[RunResult] = []
    for number, files in enumerate([*delivery_batches(source, batches), []], start=1):
        for path in files:
            target = changes / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
        started = time.monotonic()
        result = run_merge(lambda: spark, fs, sink, options)
        results.append(result)
        summary.add_row(
            f"{number}{'' if files else ' (rerun)'}",
            str(result.files_applied),
            f"{result.events_read:,}",
            f"{result.upserts:,}",
            f"{result.deletes:,}",
            f"{result.stale_skipped:,}",
            f"{result.skipped:,}",
            f"{result.quarantined:,}",
            f"{time.monotonic() - started:.1f}",
        )
    console.print(summary)
    state = sink.load()
    live = sink.read_live(spark, state)
    actual = [json.loads(line) for line in rows_as_json(live, options.key)] if live else []
    expected = [json.loads(line) for line in (source / "expected.jsonl").read_text().splitlines()]
    visible = [{k: v for k, v in row.items() if not k.startswith("_")} for row in actual]
    ok = visible == expected
    _report(console, ok, visible, expected, warehouse, state.version)
    return ok


def _report(
    console: Console,
    ok: bool,
    actual: list[dict[str, Any]],
    expected: list[dict[str, Any]],
    warehouse: Path,
    version: int,
) -> None:
    if ok:
        console.print(
            f"[green]OK[/green]: {len(actual):,} live rows in {TABLE} (version {version}) equal "
            f"the state the events describe. Warehouse: {warehouse}"
        )
        return
    expected_by_id = {r["id"]: r for r in expected}
    actual_by_id = {r["id"]: r for r in actual}
    console.print(f"[red]MISMATCH[/red]: {len(actual)} rows, expected {len(expected)}")
    for key in sorted(set(expected_by_id) | set(actual_by_id))[:2000]:
        if expected_by_id.get(key) != actual_by_id.get(key):
            console.print(f"  id={key}: got {actual_by_id.get(key)}")
            console.print(f"  id={key}: want {expected_by_id.get(key)}")
            break
