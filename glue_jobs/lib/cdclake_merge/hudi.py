"""Apache Hudi 0.15 sink (Glue 5.0): the production write path.

The merge decides what changes (the same transforms as the local snapshot table);
Hudi stores it. Every writer option comes from :func:`hudi_options`, which is
unit-tested; the write itself runs where the Hudi Spark bundle is on the
classpath (Glue with ``--datalake-formats hudi``, or ``CDCLAKE_HUDI_JAR``).

* Ordering: ``_cdc_order`` is the precombine and payload ordering field with
  ``DefaultHoodieRecordPayload``, so even a record Hudi receives out of order
  never overwrites a newer stored row.
* Deletes ride in the same commit as upserts (``_hoodie_is_deleted``). Deleted
  keys are also kept in a companion table ``<table>_cdc_tombstones`` (key + order)
  so a late, older change cannot resurrect a deleted row in a later run.
* The input checkpoint and the truncation horizon are written into the main
  table's commit metadata (``hoodie.datasource.write.commitmeta.key.prefix``):
  the commit that changes the data is the commit that records what was applied.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake_merge.schema import Column
from cdclake_merge.snapshot_table import TableState
from cdclake_merge.storage import HadoopFileSystem, join
from cdclake_merge.transforms import DELETED, METADATA_COLUMNS, ORDER

CHECKPOINT_PREFIX = "_cdclake."
CHECKPOINT_KEY = CHECKPOINT_PREFIX + "checkpoint"
TOMBSTONE_SUFFIX = "_cdc_tombstones"
PAYLOAD_CLASS = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
_COMPLETED = (".commit", ".deltacommit", ".replacecommit")


def key_generator(record_key: Sequence[str], partition_fields: Sequence[str]) -> str:
    if not partition_fields:
        return "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if len(record_key) == 1 and len(partition_fields) == 1:
        return "org.apache.hudi.keygen.SimpleKeyGenerator"
    return "org.apache.hudi.keygen.ComplexKeyGenerator"


def hudi_options(
    *,
    database: str,
    table: str,
    record_key: Sequence[str],
    partition_fields: Sequence[str] = (),
    table_type: str = "COPY_ON_WRITE",
    sync_catalog: bool = True,
    checkpoint: str | None = None,
) -> dict[str, str]:
    """Writer options for one CDC upsert commit (Hudi 0.15 option names)."""
    if table_type not in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        raise ValueError(f"table_type must be COPY_ON_WRITE or MERGE_ON_READ, got {table_type!r}")
    if not record_key:
        raise ValueError("record_key needs at least one column")
    options = {
        "hoodie.table.name": table,
        "hoodie.datasource.write.table.name": table,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.recordkey.field": ",".join(record_key),
        "hoodie.datasource.write.partitionpath.field": ",".join(partition_fields),
        "hoodie.datasource.write.keygenerator.class": key_generator(record_key, partition_fields),
        "hoodie.datasource.write.hive_style_partitioning": "true",
        # Event-time ordering: an older incoming record never replaces a newer stored one.
        "hoodie.datasource.write.precombine.field": ORDER,
        "hoodie.datasource.write.payload.class": PAYLOAD_CLASS,
        "hoodie.payload.ordering.field": ORDER,
        # A global record index: upserts scale with random keys, and a row whose partition
        # value changes moves instead of being duplicated.
        "hoodie.index.type": "RECORD_INDEX",
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.record.index.update.partition.path": "true",
        # Added columns and widened types arrive with the incoming schema.
        "hoodie.datasource.write.reconcile.schema": "false",
        "hoodie.schema.on.read.enable": "false",
        # Single writer per table (the Glue job runs with max concurrency 1).
        "hoodie.write.concurrency.mode": "single_writer",
        "hoodie.cleaner.policy.failed.writes": "EAGER",
        "hoodie.cleaner.commits.retained": "24",
        "hoodie.keep.min.commits": "30",
        "hoodie.keep.max.commits": "40",
        "hoodie.allow.empty.commit": "true",
        "hoodie.datasource.write.commitmeta.key.prefix": CHECKPOINT_PREFIX,
    }
    if table_type == "MERGE_ON_READ":
        options["hoodie.compact.inline"] = "true"
        options["hoodie.compact.inline.max.delta.commits"] = "5"
    if sync_catalog:
        extractor = (
            "org.apache.hudi.hive.MultiPartKeysValueExtractor"
            if partition_fields
            else "org.apache.hudi.hive.NonPartitionedExtractor"
        )
        options.update(
            {
                "hoodie.datasource.hive_sync.enable": "true",
                "hoodie.datasource.hive_sync.mode": "hms",
                "hoodie.datasource.hive_sync.database": database,
                "hoodie.datasource.hive_sync.table": table,
                "hoodie.datasource.hive_sync.partition_fields": ",".join(partition_fields),
                "hoodie.datasource.hive_sync.partition_extractor_class": extractor,
                "hoodie.datasource.hive_sync.support_timestamp": "true",
                # Each sync is a new Glue table version; only sync when schema/partitions change.
                "hoodie.datasource.meta_sync.condition.sync": "true",
            }
        )
    if checkpoint is not None:
        options[CHECKPOINT_KEY] = checkpoint
    return options


def encode_checkpoint(
    applied_files: frozenset[str],
    truncated_before: str | None,
    columns: Sequence[Column],
    key: Sequence[str],
) -> str:
    files = base64.b64encode(gzip.compress("\n".join(sorted(applied_files)).encode())).decode()
    return json.dumps(
        {
            "applied_files_gz": files,
            "truncated_before": truncated_before,
            "columns": [list(c) for c in columns],
            "key": list(key),
        }
    )


def decode_checkpoint(text: str) -> dict[str, Any]:
    data = json.loads(text)
    raw = gzip.decompress(base64.b64decode(data["applied_files_gz"])).decode()
    data["applied_files"] = frozenset(filter(None, raw.split("\n")))
    return data


def latest_checkpoint(timeline_files: dict[str, str]) -> dict[str, Any] | None:
    """From ``{instant file name: its JSON}``, the newest completed commit's checkpoint."""
    for name in sorted(timeline_files, reverse=True):
        if not name.endswith(_COMPLETED):
            continue
        extra = json.loads(timeline_files[name] or "{}").get("extraMetadata") or {}
        if CHECKPOINT_KEY in extra:
            return decode_checkpoint(extra[CHECKPOINT_KEY])
    return None


class HudiTable:
    """The merge's sink on Glue: a Hudi table plus its tombstone companion."""

    def __init__(
        self,
        spark: SparkSession,
        warehouse: str,
        table: str,
        key: Sequence[str],
        *,
        partition_fields: Sequence[str] = (),
        table_type: str = "COPY_ON_WRITE",
        quarantine_root: str | None = None,
        sync_catalog: bool = True,
    ) -> None:
        self.database, _, self.name = table.partition(".")
        if not self.database or not self.name:
            raise ValueError(f"table must be DATABASE.TABLE, got {table!r}")
        self.spark, self.key, self.table = spark, tuple(key), table
        self.partition_fields, self.table_type = tuple(partition_fields), table_type
        self.fs = HadoopFileSystem(spark)
        base = warehouse if "://" in warehouse else "file://" + warehouse
        self.root = join(base, f"{self.database}.db", self.name)
        self.tombstones = self.root + TOMBSTONE_SUFFIX
        self.quarantine_root = quarantine_root or join(base, "_quarantine", table)
        self.sync_catalog = sync_catalog

    def load(self) -> TableState:
        timeline = join(self.root, ".hoodie")
        names = [n for n in self.fs.list_dir(timeline) if n.endswith(_COMPLETED)]
        newest = sorted(names, reverse=True)[:50]
        files = {n: self.fs.read_text(join(timeline, n)) for n in newest}
        checkpoint = latest_checkpoint(files)
        if checkpoint is None:
            return TableState()
        return TableState(
            version=len(names),
            columns=tuple((n, t) for n, t in checkpoint["columns"]),
            truncated_before=checkpoint["truncated_before"],
            applied_files=checkpoint["applied_files"],
            state_path=self.root,
            manifest=checkpoint,
        )

    def read_state(self, spark: SparkSession, state: TableState) -> DataFrame | None:
        if state.state_path is None:
            return None
        names = [n for n, _ in state.columns]
        live = (
            spark.read.format("hudi")
            .load(self.root)
            .select(*names, *METADATA_COLUMNS, F.lit(False).alias(DELETED))
        )
        if not self.fs.exists(join(self.tombstones, ".hoodie")):
            return live
        tombstones = spark.read.format("hudi").load(self.tombstones)
        return live.unionByName(
            tombstones.select(*self.key, ORDER, F.lit(True).alias(DELETED)),
            allowMissingColumns=True,
        )

    def clean_uncommitted(self, state: TableState) -> None:
        """Hudi rolls back a failed (inflight) write itself on the next write."""

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
        if quarantine is not None:
            quarantine.coalesce(1).write.mode("append").json(self.quarantine_root)
        checkpoint = encode_checkpoint(applied_files, truncated_before, columns, key)
        names = [n for n, _ in columns]
        if changes is None:
            changes = spark.createDataFrame([], new_state.schema) if new_state else None
        if changes is None:
            return previous
        # Tombstones first: a kill between the two writes only repeats idempotent work.
        tomb_options = hudi_options(
            database=self.database,
            table=self.name + TOMBSTONE_SUFFIX,
            record_key=self.key,
            sync_catalog=False,
        )
        tombstone_rows = changes.select(
            *self.key, ORDER, (~F.col(DELETED)).alias("_hoodie_is_deleted")
        )
        tombstone_rows.write.format("hudi").options(**tomb_options).mode("append").save(
            self.tombstones
        )
        hook("write")
        options = hudi_options(
            database=self.database,
            table=self.name,
            record_key=self.key,
            partition_fields=self.partition_fields,
            table_type=self.table_type,
            sync_catalog=self.sync_catalog,
            checkpoint=checkpoint,
        )
        rows = changes.select(*names, *METADATA_COLUMNS, F.col(DELETED).alias("_hoodie_is_deleted"))
        hook("commit")
        rows.write.format("hudi").options(**options).mode("append").save(self.root)
        hook("committed")
        return self.load()
