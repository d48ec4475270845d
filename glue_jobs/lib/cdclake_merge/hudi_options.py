"""The Hudi 0.15 writer and reader options of a lake table: ordering, the record index, table
services (cleaning by age, archival, inline MERGE_ON_READ compaction), the catalog sync and the
commit's own metadata. :class:`cdclake_merge.hudi.HudiTable` writes with nothing else."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cdclake_merge.pending import COMMIT_METADATA_PREFIX
from cdclake_merge.recovery import DEFAULT_RETAIN_HOURS
from cdclake_merge.transforms import ORDER

# Hudi's own minimum, what a table of up to 100M rows needs (environment.capacity sizes it).
DEFAULT_RECORD_INDEX_FILE_GROUPS = 10

PAYLOAD_CLASS = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
# Reads: prune file groups with the record index where a read names its keys.
READ_OPTIONS = {
    "hoodie.enable.data.skipping": "true",
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.record.index.enable": "true",
}


CUSTOM_KEY_GENERATOR = "org.apache.hudi.keygen.CustomKeyGenerator"


def key_generator(record_key: Sequence[str], partition_fields: Sequence[str]) -> str:
    """The key generator class, chosen so that Glue 5.0 and OSS Hudi 0.15 store the same keys.

    ``ComplexKeyGenerator`` with a one-column key writes ``<value>`` in OSS 0.15 (HUDI-7001)
    and ``<column>:<value>`` on Glue 5.0, which reverts HUDI-7001. A one-column key with
    several partition columns therefore takes ``CustomKeyGenerator``, whose one-column record
    key is ``SimpleKeyGenerator``'s ``<value>`` in both. ``ComplexKeyGenerator`` is left to keys
    of several columns (``a:1,b:2`` in both); see docs/merge-job.md.
    """
    if not partition_fields:
        return "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if len(record_key) == 1:
        if len(partition_fields) == 1:
            return "org.apache.hudi.keygen.SimpleKeyGenerator"
        return CUSTOM_KEY_GENERATOR
    return "org.apache.hudi.keygen.ComplexKeyGenerator"


def partition_path_option(record_key: Sequence[str], partition_fields: Sequence[str]) -> str:
    """``hoodie.datasource.write.partitionpath.field`` for :func:`key_generator`'s class.

    ``CustomKeyGenerator`` takes each column with its kind (``col:SIMPLE``, the value as is).
    """
    if key_generator(record_key, partition_fields) == CUSTOM_KEY_GENERATOR:
        return ",".join(f"{field}:SIMPLE" for field in partition_fields)
    return ",".join(partition_fields)


def hudi_options(
    *,
    database: str,
    table: str,
    record_key: Sequence[str],
    partition_fields: Sequence[str] = (),
    table_type: str = "COPY_ON_WRITE",
    sync_catalog: bool = True,
    commit_metadata: Mapping[str, str] | None = None,
    operation: str = "upsert",
    retain_hours: int = DEFAULT_RETAIN_HOURS,
    record_index_file_groups: int = DEFAULT_RECORD_INDEX_FILE_GROUPS,
    compaction_io_mb: int | None = None,
    clean_every_commits: int = 1,
) -> dict[str, str]:
    """Writer options for one CDC commit (Hudi 0.15 option names): an upsert, or the
    ``bulk_insert`` of a table's first rows.

    ``commit_metadata`` keys must start with :data:`COMMIT_METADATA_PREFIX`; keep the
    values small: every option travels into each task's write config.
    """
    if table_type not in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        raise ValueError(f"table_type must be COPY_ON_WRITE or MERGE_ON_READ, got {table_type!r}")
    if not record_key:
        raise ValueError("record_key needs at least one column")
    options = {
        "hoodie.table.name": table,
        "hoodie.datasource.write.table.name": table,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.operation": operation,
        "hoodie.datasource.write.recordkey.field": ",".join(record_key),
        "hoodie.datasource.write.partitionpath.field": partition_path_option(
            record_key, partition_fields
        ),
        "hoodie.datasource.write.keygenerator.class": key_generator(record_key, partition_fields),
        "hoodie.datasource.write.hive_style_partitioning": "true",
        # Event-time ordering: an older incoming record never replaces a newer stored one.
        "hoodie.datasource.write.precombine.field": ORDER,
        "hoodie.datasource.write.payload.class": PAYLOAD_CLASS,
        "hoodie.payload.ordering.field": ORDER,
        # The record index: upserts scale with random keys.
        "hoodie.index.type": "RECORD_INDEX",
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.record.index.enable": "true",
        # Sized for the rows the table is expected to reach (config's expected_rows), not
        # for the rows of its first commit: the count is fixed when the index is first written.
        "hoodie.metadata.record.index.min.filegroup.count": str(record_index_file_groups),
        # The fold hands Hudi whole rows in the table's column layout.
        "hoodie.datasource.write.reconcile.schema": "false",
        "hoodie.schema.on.read.enable": "false",
        # Single writer per table (the Glue job runs with max concurrency 1).
        "hoodie.write.concurrency.mode": "single_writer",
        "hoodie.cleaner.policy.failed.writes": "EAGER",
        # File versions are kept by age, not by count: a table that commits every minute
        # and one that commits daily both keep ``retain_hours`` of history (a restore or a
        # time-travel read reaches that far, a savepoint further: cdclake_merge.recovery).
        "hoodie.clean.policy": "KEEP_LATEST_BY_HOURS",
        "hoodie.cleaner.hours.retained": str(retain_hours),
        # A clean is an instant of its own that every later write lists until it is
        # archived: a busy table cleans about once an hour of its commits, not after each
        # (environment.lake.CLEAN_INTERVAL_MINUTES).
        "hoodie.clean.max.commits": str(clean_every_commits),
        # The active timeline: archival never passes the cleaner's earliest retained commit
        # nor the oldest savepoint, and merges its small archive files instead of adding
        # one a run for a year.
        "hoodie.keep.min.commits": "30",
        "hoodie.keep.max.commits": "40",
        "hoodie.archive.merge.enable": "true",
        # A run that applied files but changed no row still records its checkpoint.
        "hoodie.allow.empty.commit": "true",
        "hoodie.datasource.write.commitmeta.key.prefix": COMMIT_METADATA_PREFIX,
        # zstd, not Hudi 0.15's gzip: a first load of a million rows took 2 to 4 s less
        # (docs/reliability.md); Athena, Trino and Spark read it, and Iceberg writes it by
        # default since 1.4.
        "hoodie.parquet.compression.codec": "zstd",
        # Instant times in UTC wherever the writer runs (Hudi's default is the writer's zone):
        # savepoints, restores and `cdclake status` read them as UTC. Set when a table is
        # created; Glue's zone is UTC, so tables written there read the same either way.
        "hoodie.table.timeline.timezone": "UTC",
    }
    if partition_fields:
        # A row whose partition value changes moves instead of being duplicated. Only for
        # partitioned tables: it forces the global-index merge path.
        options["hoodie.record.index.update.partition.path"] = "true"
    if table_type == "MERGE_ON_READ":
        options["hoodie.compact.inline"] = "true"
        options["hoodie.compact.inline.max.delta.commits"] = "5"
        if compaction_io_mb is not None:  # Hudi's own budget; its default is 500 GB
            options["hoodie.compaction.target.io"] = str(compaction_io_mb)
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
                # MERGE_ON_READ registers <table> (read optimized) and <table>_rt (snapshot)
                # instead of Hudi 0.x's default <table>_ro and <table>_rt. Without the second
                # setting Hudi 0.14+ syncs <table> a third time as a snapshot table, which
                # with the suffix skipped turns the read-optimized <table> into a second
                # snapshot view (found through the metastore service, tests/query).
                "hoodie.datasource.hive_sync.skip_ro_suffix": "true",
                "hoodie.meta.sync.sync_snapshot_with_table_name": "false",
                # Each sync is a new Glue table version; only sync when schema/partitions change.
                "hoodie.datasource.meta_sync.condition.sync": "true",
            }
        )
    for name, value in (commit_metadata or {}).items():
        if not name.startswith(COMMIT_METADATA_PREFIX):
            raise ValueError(
                f"commit metadata key {name!r} must start with {COMMIT_METADATA_PREFIX}"
            )
        options[name] = value
    return options
