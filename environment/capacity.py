"""What a Glue worker brings and what the merge does with it: the figures the per-run cap,
the dispatcher's sizing and the cost model share."""

from __future__ import annotations

# vCPUs of one worker (Glue's worker types) and the merge's rate per vCPU: the per-run cap's
# defaults and the dispatcher's sizing, so that a capped run ends well inside its timeout.
# The byte rate is the incremental one, not the first load's (14 MB/s a vCPU, an empty table,
# bulk insert): 10,000 changes into a 3,000,000-row MERGE_ON_READ table took 20.7 s on 2
# vCPUs (docs/reliability.md#what-a-run-costs), about 240 changes a second a vCPU; at the
# 3.6 KB of a schema-included Debezium event (the first-load run's 1M rows in 3.6 GB) that is
# about 0.87 MB a second a vCPU, rounded down (cdclake.cost keeps both measured figures;
# tests/cost checks a capped run at this rate ends within half its timeout).
WORKER_VCPUS = {"G.1X": 4, "G.2X": 8, "G.4X": 16, "G.8X": 32}
MERGE_BYTES_PER_VCPU_SECOND = 768 * 1024
MERGE_FILES_PER_VCPU_SECOND = 2
RUN_TIMEOUT_SHARE = 0.5  # of the timeout a capped run plans to use
# A MERGE_ON_READ run compacts inline when due (every 5 delta commits). Its compaction plan is
# bounded by Hudi's own IO budget (hoodie.compaction.target.io, the file groups with the most
# log data first; the rest wait for the next plan), sized to this share of the timeout at the
# rate a run rewrites files: a third of the first load's measured write (14 MB/s a vCPU). With
# the merge's half, a capped run that compacts still ends inside its timeout.
COMPACTION_TIMEOUT_SHARE = 0.25
COMPACTION_BYTES_PER_VCPU_SECOND = 5 * 1024 * 1024
FLEX_WORKER_TYPES = ("G.1X", "G.2X")
# An assumption, not a measurement: Glue's start of a run (workers, the Spark session, the
# job's imports and catalog calls) that every run pays. Glue 2.0 and later start "with reduced
# startup times" (docs.aws.amazon.com/glue/latest/dg/reduced-start-times-spark-etl-jobs.html)
# and give no figure; a run's ExecutionTime on AWS replaces it. The cost model bills it and
# the dispatcher counts it in the expected run that decides when a table is due.
GLUE_START_SECONDS = 30  # Glue's flexible execution class takes only these

# Glue's default quota of concurrent job runs per account; the dispatcher stays below it.
GLUE_CONCURRENT_RUNS_QUOTA = 50

# Hudi's record index: its file-group count is fixed when the index is first written and never
# grows. Hudi sizes it from the rows it sees then (a first load, or none): at 48 bytes a
# mapping, twice the rows, 1 GiB a file group, at least 10 and at most 1,000 file groups
# (HoodieTableMetadataUtil.estimateFileGroupCount with 0.15's defaults). Sized here from the
# rows a table is expected to reach instead, so a table that starts small is not undersized
# for life; the default row count fits the 10 file groups Hudi starts with.
RECORD_INDEX_BYTES_PER_ROW = 48
RECORD_INDEX_GROWTH = 2.0
RECORD_INDEX_FILE_GROUP_BYTES = 1024**3
RECORD_INDEX_FILE_GROUPS = (10, 1000)
DEFAULT_EXPECTED_ROWS = 100_000_000


def record_index_file_groups(expected_rows: int) -> int:
    """The record index's file groups for a table expected to reach ``expected_rows``."""
    rows_per_group = RECORD_INDEX_FILE_GROUP_BYTES // RECORD_INDEX_BYTES_PER_ROW
    wanted = int(expected_rows * RECORD_INDEX_GROWTH) // rows_per_group
    low, high = RECORD_INDEX_FILE_GROUPS
    return min(max(wanted, low), high)
