"""The lake table: Apache Hudi 0.15 (Glue 5.0), written by the merge as one upsert commit a run.

The merge decides what changes (:mod:`cdclake_merge.transforms`); Hudi stores it.
Every writer option comes from :func:`cdclake_merge.hudi_options.hudi_options`.

Layout under ``<warehouse>/<database>.db/`` (Hive layout)::

    <table>/                          the Hudi table: only Hudi's files (its metadata
                                      table lists this folder and takes every file in it
                                      for one of its own)
    <table>/.hoodie/                  Hudi's timeline; each of our commits carries
                                      ``_cdclake.checkpoint`` = a checkpoint file below
    _cdclake/<table>/checkpoints/v00000007.json   the run's checkpoint: schema and column
                                      layout, truncation horizon, applied input, tombstones
    _cdclake/<table>/tombstones/v00000007/        key, order and time of deleted keys (Parquet)
    _cdclake/<table>/generations.json             which generation is live (a rebuild's state)

* Ordering: ``_cdc_order`` is the precombine and payload ordering field with
  ``DefaultHoodieRecordPayload``, so a record Hudi receives out of order never
  overwrites a newer stored row. The fold also never hands Hudi an event that is
  not newer than the stored row or tombstone of its key, so Hudi's record index
  never sees a stale delete.
* Deletes ride in the same commit as upserts (``_hoodie_is_deleted``). A deleted
  key's order is kept as a tombstone so that a late, older change cannot bring
  the row back in a later run, for the retention window (``tombstone_retention_days``,
  longer than a connector can redeliver); a truncate clears every tombstone it covers.
* The checkpoint is written aside before the Hudi commit and named in that
  commit's metadata: the commit that changes the data is the commit that makes
  the checkpoint current. A checkpoint no commit names is ignored and rewritten.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdclake_merge.generations import generation_folder
from cdclake_merge.history import HISTORY_COLUMNS, HISTORY_SUFFIX, SOURCE_DATE
from cdclake_merge.hudi_options import (
    DEFAULT_RECORD_INDEX_FILE_GROUPS,
    READ_OPTIONS,
    hudi_options,
)
from cdclake_merge.layout import PROPERTIES, Layout, check_layout
from cdclake_merge.pending import (
    CATALOG_UNSYNCED,
    CHECKPOINT_KEY,
    COMPLETED,
    SIDECAR,
    TablePaths,
    newest_checkpoint,
    unsynced_version,
)
from cdclake_merge.positions import positions_as_json, positions_from_json
from cdclake_merge.recovery import (
    DEFAULT_RETAIN_HOURS,
    DEFAULT_SAVEPOINT_DAYS,
    HudiProcedures,
    RecoveryChange,
    expired_savepoints,
    prune_sidecar,
    restore_point,
    savepoint_due,
    savepoints_in,
)
from cdclake_merge.schema import Column
from cdclake_merge.sink import Changes, Staged, TableState, register_sink
from cdclake_merge.storage import FileSystem, join
from cdclake_merge.transforms import DELETED, METADATA_COLUMNS, ORDER, empty_state

FORMAT = "cdclake-hudi/2"  # 2: applied input as positions (1: every applied file name)
IS_DELETED = "_hoodie_is_deleted"
MAX_TOMBSTONE_SETS = 16  # more sets than this are rewritten as one
TOMBSTONED_AT = "_cdc_tombstoned_at"  # in tombstone sets: when the run that wrote it staged
MAX_NAMED_KEYS = 1_000  # a run's keys named in the state read (IN list) up to this many
# A run's keys semi-joined to the state are broadcast up to this many, shuffled above: about
# Spark's 10 MB broadcast threshold for a key of two 36-character strings.
MAX_BROADCAST_KEYS = 100_000


class CatalogSyncError(RuntimeError):
    """The data commit succeeded but registering it in the catalog failed."""


def stored_layout(previous: Sequence[str], columns: Sequence[Column]) -> list[str]:
    """The table's column order: what is stored keeps its place, new columns go at the end.

    Hudi (and the catalog sync) refuse to move an existing column, so a column added
    at the source lands after the metadata columns of the first commit.
    """
    if not previous:
        return [*(name for name, _ in columns), *METADATA_COLUMNS, IS_DELETED]
    known = set(previous)
    return [*previous, *(name for name, _ in columns if name not in known)]


class HudiTable:
    """A Hudi table plus the merge's checkpoints and tombstones beside its timeline."""

    def __init__(
        self,
        *,
        warehouse: str,
        table: str,
        key: Sequence[str],
        fs: FileSystem,
        spark_factory: Callable[[], SparkSession],
        partition_fields: Sequence[str] = (),
        table_type: str = "COPY_ON_WRITE",
        quarantine_root: str | None = None,
        sync_catalog: bool = True,
        retain_hours: int = DEFAULT_RETAIN_HOURS,
        savepoint_days: int = DEFAULT_SAVEPOINT_DAYS,
        record_index_file_groups: int | None = None,
        compaction_io_mb: int | None = None,
        clean_every_commits: int = 1,
        generation: int = 1,
        history: bool = False,
    ) -> None:
        self.database, _, self.name = table.partition(".")
        if not self.database or not self.name or "." in self.name:
            raise ValueError(f"table must be DATABASE.TABLE, got {table!r}")
        self.table, self.key = table, tuple(key)
        self.partition_fields, self.table_type = tuple(partition_fields), table_type
        self.fs, self._spark_factory = fs, spark_factory
        # A rebuild's generation n >= 2 lives beside the table at <table>__g<n>, with its own
        # sidecar, and keeps the table's Hudi and catalog name (cdclake_merge.generations).
        self.generation = generation
        folder = generation_folder(self.name, generation)
        self.root = join(warehouse, f"{self.database}.db", folder)
        self.timeline = join(self.root, ".hoodie")
        self.sidecar = join(warehouse, f"{self.database}.db", SIDECAR, folder)
        quarantine_root = quarantine_root or join(warehouse, "_quarantine", table)
        # Quarantine sets are named by version, which each generation counts from 1.
        self.quarantine_root = (
            quarantine_root if generation == 1 else join(quarantine_root, f"g{generation}")
        )
        self.sync_catalog = sync_catalog
        self.retain_hours, self.savepoint_days = retain_hours, savepoint_days
        # None: not sized by config (a read-only command, a merge without --env): a new
        # table gets Hudi's default and a stored one is not held to any size.
        self.record_index_file_groups = record_index_file_groups
        self.compaction_io_mb = compaction_io_mb
        self.clean_every_commits = clean_every_commits
        # One history table for every generation: a rebuild's swap leaves it where it is.
        self.history = history
        self.history_root = join(warehouse, f"{self.database}.db", f"{self.name}{HISTORY_SUFFIX}")

    def _uri(self, path: str) -> str:
        """Spark and Hudi want a scheme; local paths get ``file://``."""
        return path if "://" in path else "file://" + path

    # --- reading -------------------------------------------------------------------------------

    def _paths(self) -> TablePaths:
        return TablePaths(self.root, self.timeline, self.sidecar)

    def newest_checkpoint(self) -> dict[str, Any] | None:
        """The checkpoint the newest commit names, with ``exists`` (no Spark needed)."""
        return newest_checkpoint(self.fs, self._paths())

    def load(self, *, as_stored: bool = False) -> TableState:
        """The state the newest commit names; ValueError if the table was made otherwise than
        this sink's spec (``as_stored``: whatever the spec, for a copy of it into a rebuild)."""
        checkpoint = self.newest_checkpoint()
        if checkpoint is None:
            return TableState()
        if not as_stored:
            self._check_matches()
        state = self._state(checkpoint, exists=checkpoint.pop("exists"))
        if state.exists and self._unsynced_version() not in (None, state.version + 1):
            return dataclasses.replace(state, catalog_unsynced=True)
        return state

    def _unsynced_marker(self) -> str:
        return join(self.sidecar, CATALOG_UNSYNCED)

    def _unsynced_version(self) -> int | None:
        """The version whose catalog registration has not finished (None: all done).

        A marker of the version after the newest commit belongs to a run killed before its
        commit: that version does not exist, and the next run's commit writes it again.
        """
        return unsynced_version(self.fs, self.sidecar) if self.sync_catalog else None

    def _check_matches(self) -> None:
        """The table as Hudi stored it against this sink's spec (LayoutNeedsRebuild: only a
        rebuild takes the difference); a table Hudi never wrote fixes nothing yet."""
        wanted = Layout(
            self.table_type, self.key, self.partition_fields, self.record_index_file_groups
        )
        check_layout(self.fs, self.table, self.timeline, wanted)

    @staticmethod
    def _state(checkpoint: Mapping[str, Any], *, exists: bool) -> TableState:
        return TableState(
            version=int(checkpoint["version"]),
            columns=tuple((n, t) for n, t in checkpoint["columns"]),
            layout=tuple(checkpoint["layout"]),
            truncated_before=checkpoint["truncated_before"],
            # Checkpoints written before it have none.
            snapshots=tuple((int(lsn), file) for lsn, file in checkpoint.get("snapshots", ())),
            positions=positions_from_json(checkpoint.get("positions")),
            legacy_applied=(
                frozenset(checkpoint["applied_files"]) if "applied_files" in checkpoint else None
            ),
            tombstones=tuple(checkpoint["tombstones"]),
            tombstone_written=dict(checkpoint.get("tombstone_written") or {}),
            exists=exists,
            checkpoint=dict(checkpoint),
        )

    def read_live(
        self, spark: SparkSession, state: TableState, columns: Sequence[str] | None = None
    ) -> DataFrame | None:
        """The table's rows: source columns then metadata columns, Hudi's own columns left out.

        ``columns`` narrows the source columns (the key and metadata columns always come).
        """
        if not state.exists:
            return None
        wanted = None if columns is None else {*self.key, *columns}
        names = [n for n, _ in state.columns if wanted is None or n in wanted]
        return (
            spark.read.format("hudi")
            .options(**READ_OPTIONS)
            .load(self._uri(self.root))
            .select(*(f"`{n}`" for n in names), *METADATA_COLUMNS)
        )

    def read_state(self, spark: SparkSession, state: TableState) -> DataFrame | None:
        """Live rows and, for deleted keys, tombstones (``_cdc_deleted``), one row per key."""
        return self.lookup_state(spark, state, None, None)

    def lookup_state(
        self,
        spark: SparkSession,
        state: TableState,
        keys: DataFrame | None,
        columns: Sequence[str] | None,
        *,
        max_broadcast_keys: int = MAX_BROADCAST_KEYS,
    ) -> DataFrame | None:
        """:meth:`read_state` for the keys in ``keys`` only (all keys where None).

        A run asks for the keys it changes and the columns it fills, so it reads about
        that much state, not the table: only ``columns`` are read, and where the keys are
        few enough to name and the key is one column, they are named in the read
        (``key IN (…)``) so Hudi's record index prunes the file groups that hold none of
        them (``hoodie.enable.data.skipping``). Otherwise the read is semi-joined: with
        the keys broadcast up to ``max_broadcast_keys`` of them, shuffled (a sort-merge
        join) above, so that no driver holds a backlog's keys.
        """
        live = self.read_live(spark, state, columns)
        if live is None:
            return None
        few, named = self._sized_keys(keys, max_broadcast_keys)
        if keys is not None:
            keys = F.broadcast(keys) if few else keys.hint("merge")
        if named is not None:
            live = live.where(F.col(self.key[0]).isin(named))
        elif keys is not None:
            live = live.join(keys, list(self.key), "left_semi")
        live = live.withColumn(DELETED, F.lit(False))
        tombstones = self._read_tombstones(spark, state.tombstones)
        if tombstones is None:
            return live
        if keys is not None:
            tombstones = tombstones.join(keys, list(self.key), "left_semi")
        # A key deleted and inserted again has both; the newer one speaks for it.
        held = live.select(*self.key, F.col(ORDER).alias("_live"))
        newer = (
            tombstones.join(held, list(self.key), "left")
            .where(F.col("_live").isNull() | (F.col(ORDER) > F.col("_live")))
            .drop("_live")
        )
        return live.unionByName(newer.withColumn(DELETED, F.lit(True)), allowMissingColumns=True)

    def _sized_keys(
        self, keys: DataFrame | None, max_broadcast_keys: int
    ) -> tuple[bool, list[Any] | None]:
        """Whether ``keys`` are few enough to broadcast, and their values if few enough to name.

        Counting stops past the larger limit, so this costs one pass over the run's keys.
        """
        if keys is None:
            return False, None
        count = keys.limit(max(max_broadcast_keys, MAX_NAMED_KEYS) + 1).count()
        if len(self.key) != 1 or count > MAX_NAMED_KEYS:
            return count <= max_broadcast_keys, None
        return count <= max_broadcast_keys, [row[0] for row in keys.collect()]

    def _read_tombstones(self, spark: SparkSession, sets: Sequence[str]) -> DataFrame | None:
        if not sets:
            return None
        frame = spark.read.parquet(*(self._uri(join(self.sidecar, s)) for s in sets))
        newest = F.max(F.col(ORDER)).alias(ORDER)
        return frame.groupBy(*self.key).agg(newest)

    # --- writing -------------------------------------------------------------------------------

    def stage(self, spark: SparkSession, previous: TableState, changes: Changes) -> Staged:
        """Write the quarantine, the tombstones and the checkpoint of version n+1 aside."""
        version = previous.version + 1
        tag = f"v{version:08d}"
        quarantine = None
        if changes.quarantine is not None:
            quarantine = join(self.quarantine_root, tag)
            changes.quarantine.coalesce(1).write.mode("overwrite").json(self._uri(quarantine))
        now = dt.datetime.now(dt.UTC).isoformat()
        tombstones, tombstone_written = self._stage_tombstones(spark, previous, changes, tag, now)
        layout = stored_layout(previous.layout, changes.columns) if changes.columns else []
        checkpoint = {
            "format": FORMAT,
            "table": self.table,
            "version": version,
            "key": list(changes.key),
            "table_type": self.table_type,
            "partition_fields": list(self.partition_fields),
            "columns": [list(c) for c in changes.columns],
            "layout": layout,
            "truncated_before": changes.truncated_before,
            "snapshots": [list(snapshot) for snapshot in changes.snapshots],
            "positions": positions_as_json(changes.positions),
            "tombstones": tombstones,
            "tombstone_written": tombstone_written,
            "quarantine": quarantine,
            "staged_at": now,
            "run": changes.run,
        }
        path = join("checkpoints", f"{tag}.json")
        self.fs.write_text(join(self.sidecar, path), json.dumps(checkpoint))
        return Staged(version=version, checkpoint_path=path, changes=changes)

    def _stage_tombstones(
        self, spark: SparkSession, previous: TableState, changes: Changes, tag: str, now: str
    ) -> tuple[list[str], dict[str, str]]:
        """The tombstone sets of version n+1 and when each was written (ISO, UTC).

        A set written before ``changes.tombstones_before`` is dropped whole, unread; rows
        of a set rewritten as one keep their own time (``_cdc_tombstoned_at``) and go
        when it passes. Sets of checkpoints that kept no times count as written now.
        """
        written = {s: previous.tombstone_written.get(s, now) for s in previous.tombstones}
        cutoff = changes.tombstones_before
        sets = [s for s in previous.tombstones if cutoff is None or written[s] >= cutoff]
        rows = changes.rows
        deleted = None
        if rows is not None and changes.run.get("deletes"):
            deleted = rows.where(F.col(DELETED)).select(
                *self.key, ORDER, F.lit(now).alias(TOMBSTONED_AT)
            )
        if not changes.truncated and (deleted is None or len(sets) < MAX_TOMBSTONE_SETS):
            if deleted is not None:
                deleted.coalesce(1).write.mode("overwrite").parquet(
                    self._uri(join(self.sidecar, "tombstones", tag))
                )
                sets.append(f"tombstones/{tag}")
                written[f"tombstones/{tag}"] = now
            return sets, {s: written[s] for s in sets}
        # Rewrite as one set: after a truncate only tombstones newer than it matter.
        kept = self._read_tombstone_rows(spark, sets, written)
        if deleted is not None:
            kept = deleted if kept is None else kept.unionByName(deleted)
        if kept is None:
            return [], {}
        if changes.truncated_before is not None:
            kept = kept.where(F.col(ORDER) > F.lit(changes.truncated_before))
        if cutoff is not None:
            kept = kept.where(F.col(TOMBSTONED_AT) >= F.lit(cutoff))
        newest = F.max(F.struct(ORDER, TOMBSTONED_AT)).alias("_t")
        kept = kept.groupBy(*self.key).agg(newest).select(*self.key, "_t.*")
        if kept.isEmpty():  # a truncate or the retention covered them all: no set at all
            return [], {}
        target = join(self.sidecar, "tombstones", tag)
        kept.coalesce(1).write.mode("overwrite").parquet(self._uri(target))
        return [f"tombstones/{tag}"], {f"tombstones/{tag}": now}

    def _read_tombstone_rows(
        self, spark: SparkSession, sets: Sequence[str], written: Mapping[str, str]
    ) -> DataFrame | None:
        """Every row of ``sets`` with its time (sets from before times: the set's)."""
        frames = []
        for name in sets:
            frame = spark.read.parquet(self._uri(join(self.sidecar, name)))
            if TOMBSTONED_AT not in frame.columns:
                frame = frame.withColumn(TOMBSTONED_AT, F.lit(written[name]))
            frames.append(frame.select(*self.key, ORDER, TOMBSTONED_AT))
        if not frames:
            return None
        result = frames[0]
        for frame in frames[1:]:
            result = result.unionByName(frame)
        return result

    def commit(self, spark: SparkSession, staged: Staged) -> TableState:
        """Make the staged version current: one Hudi commit that names its checkpoint."""
        checkpoint_text = self.fs.read_text(join(self.sidecar, staged.checkpoint_path))
        checkpoint = json.loads(checkpoint_text)
        changes = staged.changes
        if not changes.columns:  # nothing has ever had a row: there is no table to commit to
            self.fs.write_text(
                join(self.sidecar, "checkpoints", "standalone.json"), checkpoint_text
            )
            return self._state(checkpoint, exists=False)
        rows = changes.rows
        if rows is None:
            rows = empty_state(spark, changes.columns)
        if changes.into_empty:
            # Into an empty table (the first load, a snapshot of millions of rows) there is
            # nothing to look up or merge with: Hudi's bulk insert writes the rows through
            # its row writer, and the record index is built from the written files. A key
            # already deleted is left out (its tombstone is in the checkpoint); each key
            # comes once (the fold made it so).
            rows = rows.where(~F.col(DELETED))
        layout = checkpoint["layout"]
        frame = rows.select(
            *[
                F.col(DELETED).alias(IS_DELETED) if name == IS_DELETED else F.col(f"`{name}`")
                for name in layout
            ]
        )
        options = self._options(
            sync_catalog=self.sync_catalog,
            commit_metadata={CHECKPOINT_KEY: staged.checkpoint_path},
            operation="bulk_insert" if changes.into_empty else "upsert",
        )
        if self.sync_catalog:
            self.fs.write_text(self._unsynced_marker(), json.dumps({"version": staged.version}))
        try:
            frame.write.format("hudi").options(**options).mode("append").save(self._uri(self.root))
        except Exception as exc:  # py4j wraps the JVM's exception; name only its cause
            raise _one_line(exc, self.table, staged.version) from None
        if self.sync_catalog:
            self.fs.delete(self._unsynced_marker())
        return self._state(checkpoint, exists=True)

    def write_history(
        self, spark: SparkSession, previous: TableState, columns: Sequence[Column], rows: DataFrame
    ) -> None:
        """Upsert a run's history rows (:mod:`cdclake_merge.history`) into ``<table>_history``
        and register it in the catalog as the table is: COPY_ON_WRITE (its runs mostly add
        rows, and each closes at most one stored version a key it changes; its readers need
        no compaction and no ``_rt`` view), keyed by the table's key and ``_cdc_order``,
        partitioned by source date, with the table's cleaning and archival."""
        history = f"{self.name}{HISTORY_SUFFIX}"
        layout = stored_layout(previous.layout, columns)
        history_layout = [
            name
            for field in layout
            for name in (HISTORY_COLUMNS if field == IS_DELETED else [field])
        ]
        options = self._history_options(sync_catalog=self.sync_catalog)
        frame = rows.select(*(f"`{name}`" for name in history_layout))
        try:
            frame.write.format("hudi").options(**options).mode("append").save(
                self._uri(self.history_root)
            )
        except Exception as exc:
            raise _one_line(exc, f"{self.database}.{history}", previous.version + 1) from None

    def _history_options(self, *, sync_catalog: bool) -> dict[str, str]:
        return hudi_options(
            database=self.database,
            table=f"{self.name}{HISTORY_SUFFIX}",
            record_key=(*self.key, ORDER),
            partition_fields=(SOURCE_DATE,),
            retain_hours=self.retain_hours,
            record_index_file_groups=(
                self.record_index_file_groups or DEFAULT_RECORD_INDEX_FILE_GROUPS
            ),
            clean_every_commits=self.clean_every_commits,
            sync_catalog=sync_catalog,
        )

    def register_history(self, spark: SparkSession) -> None:
        """Register the history table's newest commit in the catalog, where it has one: after
        a rebuild by copy, whose runs wrote history rows without the sync (new source-date
        partitions, the table itself if the copy's runs made it)."""
        if self.history and self.fs.exists(join(self.history_root, ".hoodie", PROPERTIES)):
            history = f"{self.database}.{self.name}{HISTORY_SUFFIX}"
            self._meta_sync(
                spark, self.history_root, self._history_options(sync_catalog=True), history
            )

    def _options(self, **write: Any) -> dict[str, str]:
        """This table's Hudi options (:func:`hudi_options`), with ``write``'s settings."""
        return hudi_options(
            database=self.database,
            table=self.name,
            record_key=self.key,
            partition_fields=self.partition_fields,
            table_type=self.table_type,
            retain_hours=self.retain_hours,
            record_index_file_groups=(
                self.record_index_file_groups or DEFAULT_RECORD_INDEX_FILE_GROUPS
            ),
            compaction_io_mb=self.compaction_io_mb,
            clean_every_commits=self.clean_every_commits,
            **write,
        )

    # --- recovery --------------------------------------------------------------------------------

    def savepoints(self) -> list[str]:
        """The table's savepoints (instant times), oldest first; read without Spark."""
        return savepoints_in(self.fs.list_dir(self.timeline))

    def keep_recovery_points(self, spark: SparkSession) -> RecoveryChange:
        """A savepoint of the newest commit when the newest savepoint is a day old (or there
        is none); savepoints past ``savepoint_days`` deleted, the newest always kept."""
        names = self.fs.list_dir(self.timeline)
        commits = sorted(n.split(".", 1)[0] for n in names if n.endswith(COMPLETED))
        change = RecoveryChange()
        if not commits:
            return change
        savepoints, now = savepoints_in(names), dt.datetime.now(dt.UTC)
        procedures = HudiProcedures(spark, self._uri(self.root))
        if savepoint_due(savepoints, commits[-1], now):
            procedures.create_savepoint(commits[-1])
            change.created = commits[-1]
            savepoints.append(commits[-1])
        for instant in expired_savepoints(savepoints, now, self.savepoint_days):
            procedures.delete_savepoint(instant)
            change.deleted.append(instant)
        if change.deleted:  # the horizon moved: what only older versions needed can go
            oldest = min(set(savepoints) - set(change.deleted))
            change.pruned = prune_sidecar(self.fs, self._paths(), names, oldest)
        return change

    def restore(self, spark: SparkSession, to: dt.datetime | None) -> TableState:
        """Roll the table back to its newest savepoint at or before ``to`` (None: the newest)
        and register that version in the catalog. The next merge run applies again every
        change file after the version restored (its checkpoint is the newest again)."""
        savepoint = restore_point(self.table, self.savepoints(), to)
        HudiProcedures(spark, self._uri(self.root)).rollback_to_savepoint(savepoint)
        state = self.load()
        if self.sync_catalog and state.exists:
            self.register(spark, state)
        return state

    def take_over_catalog(self, spark: SparkSession, state: TableState) -> None:
        """Point the table's catalog entry (and ``_rt``'s, MERGE_ON_READ; COPY_ON_WRITE keeps
        none) at this generation by registering its newest commit there: a rebuild's swap.
        Hudi 0.15's sync sets the entry's location to the base path it syncs but refuses to
        change a column's type, so the columns are set first, through the session's catalog."""
        names = [self.name, *([f"{self.name}_rt"] if self.table_type == "MERGE_ON_READ" else [])]
        stored = spark.read.format("hudi").options(**READ_OPTIONS).load(self._uri(self.root))
        data = [f for f in stored.schema.fields if f.name not in self.partition_fields]
        java_schema = spark._jsparkSession.parseDataType(StructType(data).json())
        catalog = spark._jsparkSession.sharedState().externalCatalog()
        for name in names:
            # A table type changed by the rebuild (COPY_ON_WRITE -> MERGE_ON_READ) has no
            # `_rt` entry yet: the sync below creates it with these columns.
            if catalog.tableExists(self.database, name):
                catalog.alterTableDataSchema(self.database, name, java_schema)
        self.register(spark, state)
        if self.table_type != "MERGE_ON_READ":
            # Rebuilt from MERGE_ON_READ: `_rt` reads the old generation, then fails (it is gone).
            catalog.dropTable(self.database, f"{self.name}_rt", True, False)
        if self.partition_fields:
            for name in names:
                self._drop_partitions_elsewhere(spark, name)
        for name in names:  # this session's cached plan of the entry read the old generation
            spark.catalog.refreshTable(f"`{self.database}`.`{name}`")

    def _drop_partitions_elsewhere(self, spark: SparkSession, name: str) -> None:
        """Drop from entry ``name`` the partitions stored outside this generation (data left):
        the sync moves only those it wrote, and one this generation holds no row in would point
        at the old folder, which readers fail on (Trino: HUDI_CANNOT_OPEN_SPLIT)."""
        jvm: Any = spark.sparkContext._jvm
        catalog = spark._jsparkSession.sharedState().externalCatalog()
        root = _local_path(self._uri(self.root)).rstrip("/") + "/"
        partitions = catalog.listPartitions(self.database, name, jvm.scala.Option.empty())
        elsewhere = jvm.java.util.ArrayList()
        found = partitions.iterator()
        while found.hasNext():
            partition = found.next()
            if not _local_path(str(partition.location().toString())).startswith(root):
                elsewhere.add(partition.spec())
        if elsewhere.isEmpty():
            return
        specs = jvm.scala.collection.JavaConverters.asScalaBufferConverter(elsewhere).asScala()
        catalog.dropPartitions(self.database, name, specs.toSeq(), True, False, True)

    def register(self, spark: SparkSession, state: TableState) -> None:
        """Register the newest commit in the catalog, as the commit's own sync would have.

        For a commit whose sync failed (a catalog error, throttling, a run killed between
        the two): the data is in the table, so the run that finds nothing new does this.
        """
        self._meta_sync(
            spark, self.root, self._options(sync_catalog=True), self.table, state.version
        )
        self.fs.delete(self._unsynced_marker())

    def _meta_sync(
        self, spark: SparkSession, path: str, options: dict[str, str], table: str, version: int = 0
    ) -> None:
        """Hudi's Hive sync of the table at ``path`` with ``options``, as a commit's own."""
        jvm: Any = spark.sparkContext._jvm
        properties = jvm.org.apache.hudi.common.config.TypedProperties()
        for name, value in options.items():
            properties.setProperty(name, value)
        conf = spark._jsparkSession.sessionState().newHadoopConf()
        root = self._uri(path)
        try:
            jvm.org.apache.hudi.sync.common.util.SyncUtilHelpers.runHoodieMetaSync(
                "org.apache.hudi.hive.HiveSyncTool",
                properties,
                conf,
                jvm.org.apache.hadoop.fs.Path(root).getFileSystem(conf),
                root,
                "PARQUET",
            )
        except Exception as exc:
            raise _one_line(exc, table, version) from None


def _local_path(uri: str) -> str:
    """``file:/x``, ``file:///x`` and ``/x`` as one spelling; other schemes as they are."""
    return "/" + uri.removeprefix("file:").lstrip("/") if uri.startswith(("file:", "/")) else uri


def _one_line(exc: Exception, table: str, version: int) -> Exception:
    """A Hudi failure as one line naming the table, the version and the root cause."""
    causes: list[str] = []
    java = getattr(exc, "java_exception", None)
    while java is not None:
        causes.append(f"{java.getClass().getSimpleName()}: {java.getMessage()}")
        java = java.getCause()
    if not causes:
        return exc
    root = " ".join(causes[-1].split())
    if any(c.startswith("HoodieMetaSyncException") for c in causes):
        return CatalogSyncError(
            f"table {table}: version {version} is committed, but registering it in the catalog "
            f"failed: {root}"
        )
    return RuntimeError(f"table {table}: the Hudi write of version {version} failed: {root}")


register_sink("hudi", HudiTable)
