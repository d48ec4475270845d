"""Hudi tables written by the real merge (generated events, several runs) for a second reader.

Runs of generated events insert as well as update, and on a table this small every
file group is a "small file": Hudi 0.15 routes inserts into it and rewrites its base
file, so a MERGE_ON_READ table would never get a log file. Production tables do (a
file group past ``hoodie.parquet.small.file.limit``, or a run without inserts), so
after the generated runs come runs of updates and deletes of live keys only: Hudi
appends those to log files (data blocks and delete blocks) until compaction.
"""

from __future__ import annotations

import copy
import dataclasses
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


class _Writer:
    """A table the merge writes under ``base``: generated runs, then runs of updates and
    deletes; the results of its runs so far."""

    def __init__(
        self,
        spark: Any,
        base: Path,
        table: str,
        seed: int,
        table_type: str,
        partition_fields: tuple[str, ...],
    ) -> None:
        self.spark, self.table = spark, table
        self.table_type, self.partition_fields = table_type, partition_fields
        self.source, self.changes = base / "generated", base / "changes"
        self.warehouse = base / "warehouse"
        self.options = GeneratorOptions(events=600, seed=seed, keys=80, flush_size=60)
        self.meta = generate_files(self.source, self.options)
        self.fs = LocalFileSystem()
        self.merge = MergeOptions(
            table=table, key=KEY, changes=str(self.changes), column_types=self.meta["column_types"]
        )
        self.sim = Simulation(self.options)
        self.rng = random.Random(seed + 1000)
        self.update_runs = 0
        self.sink = self._open_sink()
        self.results: list[RunResult] = []

    def branch(self, base: Path) -> _Writer:
        """A writer continuing from here on its own: the change files, the table and the
        simulation copied under ``base``, the runs so far counted as its own."""
        other = copy.copy(self)
        other.changes, other.warehouse = base / "changes", base / "warehouse"
        shutil.copytree(self.changes, other.changes)
        shutil.copytree(self.warehouse, other.warehouse)
        other.merge = dataclasses.replace(self.merge, changes=str(other.changes))
        other.sim, other.rng = copy.deepcopy(self.sim), copy.deepcopy(self.rng)
        other.sink, other.results = other._open_sink(), list(self.results)
        return other

    def _open_sink(self) -> Any:
        return open_sink(
            warehouse=str(self.warehouse),
            table=self.table,
            key=KEY,
            fs=self.fs,
            spark_factory=lambda: self.spark,
            table_type=self.table_type,
            partition_fields=self.partition_fields,
            sync_catalog=False,  # the second reader reads files; the shared metastore stays clean
        )

    def generated(self, runs: int) -> None:
        for batch in delivery_batches(self.source, runs):
            for path in batch:
                target = self.changes / path.relative_to(self.source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)
            self.results.append(run_merge(lambda: self.spark, self.fs, self.sink, self.merge))
        self.sim.run()  # the same seed: the source table the generated files end with

    def updates(self, runs: int, *, move_partitions: bool) -> None:
        topic = self.meta["topic"]
        folder = self.changes / "topics" / topic / "partition=0"
        for _ in range(runs):
            lines = _updates_and_deletes(self.sim, self.rng, move_partitions=move_partitions)
            offset = 9_000_000 + self.update_runs * 1000
            (folder / f"{topic}+0+{offset:010d}.json").write_text(
                "".join(f"{line}\n" for line in lines)
            )
            self.update_runs += 1
            self.results.append(run_merge(lambda: self.spark, self.fs, self.sink, self.merge))

    def lake(self) -> Lake:
        state = self.sink.load()
        live = self.sink.read_live(self.spark, state)
        rows = [] if live is None else [json.loads(r) for r in rows_as_json(live, KEY)]
        return Lake(
            table=self.table,
            table_type=self.sink.table_type,
            partition_fields=tuple(self.sink.partition_fields),
            warehouse=str(self.warehouse),
            root=self.sink.root,
            key=tuple(state.checkpoint["key"]),
            columns=state.columns,
            spark_rows=rows,
            results=tuple(self.results),
        )


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
) -> Lake:
    """Generated events merged in ``generated_runs`` runs, then ``update_runs`` runs of updates
    and deletes only."""
    writer = _Writer(spark, base, f"reader.{name}", seed, table_type, partition_fields)
    writer.generated(generated_runs)
    writer.updates(update_runs, move_partitions=False)
    return writer.lake()


def build_lake_and_moved_copy(
    spark: Any,
    base: Path,
    *,
    name: str,
    table_type: str,
    seed: int,
    generated_runs: int,
    update_runs: int,
    partition_fields: tuple[str, ...],
    moved_after: int,
    moving_runs: int,
) -> tuple[Lake, Lake]:
    """:func:`build_lake`'s table, and a copy of it taken after ``moved_after`` of its update
    runs and merged ``moving_runs`` runs whose updates also flip ``active`` (rows moving
    partition): the copy shares the first table's runs instead of writing its own from the
    start."""
    writer = _Writer(spark, base, f"reader.{name}", seed, table_type, partition_fields)
    writer.generated(generated_runs)
    writer.updates(moved_after, move_partitions=False)
    moved = writer.branch(base / "moved")
    moved.updates(moving_runs, move_partitions=True)
    writer.updates(update_runs - moved_after, move_partitions=False)
    return writer.lake(), moved.lake()


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
