"""Local Parquet snapshot table: the merge's sink where the Hudi bundle is not available.

Layout under ``<warehouse>/<db>.db/<table>/``::

    _cdclake/commit-00000003.json      the commit: manifest of version 3 (the source of truth)
    v00000003/state/_cdc_deleted=false/ live rows (the metastore table points here)
    v00000003/state/_cdc_deleted=true/  tombstones: key + order of deleted keys
    v00000003/applied_files.json        every change file applied up to this version

A version's files are written first; the commit file then appears atomically
(written aside, hard-linked into place, exclusive). A reader — ``export``, the next
run, the metastore repair — only follows commit files, so a run killed at any
point leaves the previous version in force and readable. The checkpoint (which
input files are applied) lives in the same commit, so it cannot disagree with
the data.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake_merge.schema import Column
from cdclake_merge.storage import FileSystem, join, local_path
from cdclake_merge.transforms import DELETED, METADATA_COLUMNS, METADATA_DDL

FORMAT = "cdclake-snapshot/1"
_COMMIT = re.compile(r"^commit-(\d{8})\.json$")
KEEP_VERSIONS = 3


@dataclass(frozen=True)
class TableState:
    """What the last commit says: schema, truncation horizon, applied input."""

    version: int = 0
    columns: tuple[Column, ...] = ()
    truncated_before: str | None = None
    applied_files: frozenset[str] = frozenset()
    state_path: str | None = None
    manifest: dict[str, Any] = field(default_factory=dict)


class SnapshotTable:
    def __init__(self, fs: FileSystem, warehouse: str, table: str) -> None:
        database, _, name = table.partition(".")
        if not database or not name:
            raise ValueError(f"table must be DATABASE.TABLE, got {table!r}")
        self.fs = fs
        self.warehouse = warehouse.rstrip("/")
        self.database, self.name, self.table = database, name, table
        self.root = join(self.warehouse, f"{database}.db", name)
        self.commits = join(self.root, "_cdclake")
        self.quarantine_root = join(self.warehouse, "_quarantine", table)

    # --- reading -----------------------------------------------------------------------------

    def _versions(self) -> list[int]:
        found = (_COMMIT.match(name) for name in self.fs.list_dir(self.commits))
        return sorted(int(m.group(1)) for m in found if m)

    def load(self) -> TableState:
        versions = self._versions()
        if not versions:
            return TableState()
        version = versions[-1]
        manifest = json.loads(self.fs.read_text(join(self.commits, f"commit-{version:08d}.json")))
        applied = json.loads(self.fs.read_text(join(self.root, manifest["applied_files"])))
        return TableState(
            version=version,
            columns=tuple((n, t) for n, t in manifest["columns"]),
            truncated_before=manifest.get("truncated_before"),
            applied_files=frozenset(applied),
            state_path=join(self.root, manifest["state"]) if manifest.get("state") else None,
            manifest=manifest,
        )

    def read_state(self, spark: SparkSession, state: TableState) -> DataFrame | None:
        """Live rows and tombstones, with ``_cdc_deleted``, as the last commit left them."""
        if state.state_path is None:
            return None
        frame = spark.read.parquet(state.state_path)
        return frame.withColumn(DELETED, F.col(DELETED).cast("boolean"))

    def read_live(self, spark: SparkSession, state: TableState) -> DataFrame | None:
        frame = self.read_state(spark, state)
        return None if frame is None else frame.where(~F.col(DELETED)).drop(DELETED)

    # --- writing -----------------------------------------------------------------------------

    def version_dir(self, version: int) -> str:
        return join(self.root, f"v{version:08d}")

    def clean_uncommitted(self, state: TableState) -> None:
        """Remove what a killed run left behind: version folders no commit points to."""
        for name in self.fs.list_dir(self.root):
            match = re.match(r"^v(\d{8})$", name)
            if match and int(match.group(1)) > state.version:
                self.fs.delete(join(self.root, name))

    def commit(
        self,
        spark: SparkSession,
        *,
        previous: TableState,
        new_state: DataFrame | None,
        columns: Sequence[Column],
        key: Sequence[str],
        truncated_before: str | None,
        applied_files: frozenset[str],
        quarantine: DataFrame | None,
        run: dict[str, Any],
        hook: Callable[[str], None] = lambda stage: None,
        changes: DataFrame | None = None,
    ) -> TableState:
        """Write version n+1 in full, then make it current with one atomic commit file.

        ``changes`` is for sinks that store changes only (Hudi); this one rewrites.
        """
        version = previous.version + 1
        quarantine_path = None
        if quarantine is not None:
            quarantine_path = join(self.quarantine_root, f"v{version:08d}")
            quarantine.coalesce(1).write.mode("overwrite").json(quarantine_path)
        state_rel = None
        if new_state is not None:
            state_rel = f"v{version:08d}/state"
            new_state.write.mode("overwrite").partitionBy(DELETED).parquet(
                join(self.root, state_rel)
            )
            self.fs.mkdirs(join(self.root, state_rel, f"{DELETED}=false"))
        hook("write")
        applied_rel = f"v{version:08d}/applied_files.json"
        self.fs.write_text(join(self.root, applied_rel), json.dumps(sorted(applied_files)))
        manifest = {
            "format": FORMAT,
            "table": self.table,
            "version": version,
            "key": list(key),
            "columns": [list(c) for c in columns],
            "metadata_columns": list(METADATA_COLUMNS),
            "state": state_rel,
            "applied_files": applied_rel,
            "truncated_before": truncated_before,
            "quarantine": quarantine_path,
            "committed_at": dt.datetime.now(dt.UTC).isoformat(),
            "run": run,
        }
        hook("commit")
        self.fs.create_exclusive(
            join(self.commits, f"commit-{version:08d}.json"), json.dumps(manifest, indent=2)
        )
        hook("committed")
        committed = self.load()
        self.register(spark, committed)
        self._expire(version)
        return committed

    def _expire(self, version: int) -> None:
        """Keep the last few versions so readers of an older one are not cut off."""
        for name in self.fs.list_dir(self.root):
            match = re.match(r"^v(\d{8})$", name)
            if match and int(match.group(1)) <= version - KEEP_VERSIONS:
                self.fs.delete(join(self.root, name))
        for old in self._versions()[:-KEEP_VERSIONS]:
            self.fs.delete(join(self.commits, f"commit-{old:08d}.json"))

    def register(self, spark: SparkSession, state: TableState) -> None:
        """Point the metastore table at the committed version (also repairs a killed run)."""
        if state.state_path is None:
            return
        location = local_path(join(state.state_path, f"{DELETED}=false"))
        if "://" not in location:
            location = "file://" + location
        ddl = ", ".join([*(f"`{n}` {t}" for n, t in state.columns), METADATA_DDL])
        qualified = f"`{self.database}`.`{self.name}`"
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")
        if spark.catalog.tableExists(f"{self.database}.{self.name}"):
            current = {f.name: f.dataType.simpleString() for f in spark.table(qualified).schema}
            wanted = dict(state.columns)
            if all(current.get(n) == t for n, t in wanted.items()) and len(current) == len(
                wanted
            ) + len(METADATA_COLUMNS):
                spark.sql(f"ALTER TABLE {qualified} SET LOCATION '{location}'")
                spark.sql(f"REFRESH TABLE {qualified}")
                return
            spark.sql(f"DROP TABLE {qualified}")
        spark.sql(f"CREATE TABLE {qualified} ({ddl}) USING parquet LOCATION '{location}'")
