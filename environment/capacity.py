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
