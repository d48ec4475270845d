"""What a Glue worker brings and what the merge does with it: the figures the per-run cap,
the dispatcher's sizing and the cost model share."""

from __future__ import annotations

# vCPUs of one worker (Glue's worker types) and the merge's rate per vCPU, measured at a
# third of what docs/reliability.md's throughput run reached (3.3 GB in 112 s on 2 vCPUs):
# the per-run cap's defaults, so that a capped run ends well inside its timeout.
WORKER_VCPUS = {"G.1X": 4, "G.2X": 8, "G.4X": 16, "G.8X": 32}
MERGE_BYTES_PER_VCPU_SECOND = 5 * 1024 * 1024
MERGE_FILES_PER_VCPU_SECOND = 2
RUN_TIMEOUT_SHARE = 0.5  # of the timeout a capped run plans to use
FLEX_WORKER_TYPES = ("G.1X", "G.2X")  # Glue's flexible execution class takes only these

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
