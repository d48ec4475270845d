"""Hudi tables written by the real merge (generated events, several runs) for a second reader.

Runs of generated events insert as well as update, and on a table this small every
file group is a "small file": Hudi 0.15 routes inserts into it and rewrites its base
file, so a MERGE_ON_READ table would never get a log file. Production tables do (a
file group past ``hoodie.parquet.small.file.limit``, or a run without inserts), so
after the generated runs come runs of updates and deletes of live keys only: Hudi
appends those to log files (data blocks and delete blocks) until compaction.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdclake_merge.demo import delivery_batches
from cdclake_merge.export import rows_as_json
from cdclake_merge.generator import (
    Event,
    GeneratorOptions,
    Renderer,
    Simulation,
    generate_files,
)
from cdclake_merge.job import MergeOptions, RunResult, run_merge
from cdclake_merge.sink import open_sink
from cdclake_merge.storage import LocalFileSystem

KEY = ("id",)


@dataclass(frozen=True)
class Lake:
    """One table as the merge left it, and what Spark reads from it."""

    table: str
    table_type: str
    partition_fields: tuple[str, ...]
    warehouse: str
    root: str
    key: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]
    spark_rows: list[dict[str, Any]]
    results: tuple[RunResult, ...]

    def files(self, suffix: str) -> list[Path]:
        """Data files of the table (not its .hoodie folder) whose name contains ``suffix``."""
        return [
            p
            for p in Path(self.root).rglob("*")
            if suffix in p.name and ".hoodie" not in p.parts and not p.name.endswith(".crc")
        ]

    def instants(self, suffix: str) -> list[str]:
        return sorted(p.name for p in (Path(self.root) / ".hoodie").glob(f"*{suffix}"))


def build_lake(
    spark: Any,
    base: Path,
    *,
    name: str,
    table_type: str,
    seed: int,
    generated_runs: int,
    update_runs: int,
    partition_fields: tuple[str, ...] = (),
    move_partitions: bool = False,
) -> Lake:
    """Generated events merged in ``generated_runs`` runs, then ``update_runs`` runs of updates
    and deletes only. ``move_partitions`` lets some updates flip ``active``."""
    source, changes = base / "generated", base / "changes"
    options = GeneratorOptions(events=600, seed=seed, keys=80, flush_size=60)
    meta = generate_files(source, options)
    fs = LocalFileSystem()
    table = f"reader.{name}"
    sink = open_sink(
        warehouse=str(base / "warehouse"),
        table=table,
        key=KEY,
        fs=fs,
        spark_factory=lambda: spark,
        table_type=table_type,
        partition_fields=partition_fields,
        sync_catalog=False,  # the second reader reads files; the shared metastore stays clean
    )
    merge = MergeOptions(
        table=table, key=KEY, changes=str(changes), column_types=meta["column_types"]
    )
    results = []
    for batch in delivery_batches(source, generated_runs):
        for path in batch:
            target = changes / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
        results.append(run_merge(lambda: spark, fs, sink, merge))
    sim = Simulation(options)
    sim.run()  # the same seed: the source table the generated files end with
    rng = random.Random(seed + 1000)
    for run in range(update_runs):
        lines = _updates_and_deletes(sim, rng, move_partitions=move_partitions)
        folder = changes / "topics" / meta["topic"] / "partition=0"
        (folder / f"{meta['topic']}+0+{9_000_000 + run * 1000:010d}.json").write_text(
            "".join(f"{line}\n" for line in lines)
        )
        results.append(run_merge(lambda: spark, fs, sink, merge))
    state = sink.load()
    live = sink.read_live(spark, state)
    rows = [] if live is None else [json.loads(r) for r in rows_as_json(live, KEY)]
    return Lake(
        table=table,
        table_type=table_type,
        partition_fields=partition_fields,
        warehouse=str(base / "warehouse"),
        root=sink.root,  # type: ignore[attr-defined]
        key=tuple(state.checkpoint["key"]),
        columns=state.columns,
        spark_rows=rows,
        results=tuple(results),
    )


def _updates_and_deletes(
    sim: Simulation, rng: random.Random, *, move_partitions: bool
) -> list[str]:
    """Change files' lines that update about half the live keys and delete a tenth of them,
    one transaction each, continuing the simulation's LSNs and clock."""
    renderer = Renderer(sim.o)
    lines: list[str] = []
    for key in sorted(sim.rows):
        roll = rng.random()
        if roll < 0.1:
            del sim.rows[key]
            lines += [_render(sim, renderer, Event("d", {"id": key}, None, *_next(sim))), "null"]
        elif roll < 0.6:
            row = dict(sim.rows[key])
            row["quantity"] = rng.randrange(-5, 1000)
            # Trailing zeros and negatives: the export keeps a decimal's scale exactly.
            row["amount"] = rng.choice(
                [None, Decimal("12.50"), Decimal("-0.05"), Decimal(rng.randrange(10**6)) / 100]
            )
            row["price"] = rng.choice([0.1, -3.5, 1e-7, 123456.789])
            row["updated_at"] = rng.choice([-1, 1]) * rng.randrange(10**14, 2 * 10**15)
            row["shipped_at"] = rng.choice([None, 0, -1, 1_700_000_000_123_456])
            row["note"] = rng.choice([None, "", "updated ünïcode", "tab\tline\nbreak"])
            if move_partitions and rng.random() < 0.2:
                row["active"] = rng.choice([True, False, None])
            sim.rows[key] = row
            lines.append(_render(sim, renderer, Event("u", None, dict(row), *_next(sim))))
    return lines


def _next(sim: Simulation) -> tuple[int | None, int, int, int, str]:
    """``Event``'s ordering fields for the next single-change transaction."""
    sim.lsn += sim.rng.randrange(8, 400)
    fields = (sim.commit_lsn, sim.lsn, sim.clock_ms, sim.tx, "false")
    sim.lsn += 16
    sim.commit_lsn = sim.lsn
    sim.tx += 1
    sim.clock_ms += 1
    return fields


def _render(sim: Simulation, renderer: Renderer, event: Event) -> str:
    return renderer.render(event, sim.clock_ms + 5)
