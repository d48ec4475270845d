"""Glue 5.0 entry point of the merge job (one job per lake table; see docs/lake.md).

Thin on purpose: arguments, the session, the sink, the run, the Glue job commit.
All CDC logic lives in the ``cdclake_merge`` library (``--extra-py-files``).

Arguments (Glue job parameters, also accepted as ``--name value`` locally)::

    --table schema.table          --changes_path s3://…/topics/<topic>/
    --warehouse_path s3://…/warehouse/   --database <glue database>
    --record_key id[,id2]         --partition_fields ""|col[,col]
    --table_type COPY_ON_WRITE|MERGE_ON_READ   --quarantine_path s3://…/
    --max_bad_fraction 0.01       --environment dev   (publishes the run's CdcLake metrics)
    --max_files_per_run N         --max_bytes_per_run BYTES   (the per-run cap: the rest of a
                                  backlog is left to the next run; default: no cap)
    --mode merge|replay|restore|rebuild|erase   (default merge; replay: apply the quarantined
                                  lines the table's current spec reads, see cdclake_merge.replay;
                                  restore: roll back to a savepoint, cdclake_merge.recovery;
                                  rebuild: one run of the table's rebuild beside it, begun if
                                  none is, and the swap once it caught up,
                                  cdclake_merge.rebuild.rebuild_step; erase: forget a key the
                                  source deleted, cdclake_merge.erase.erase_key)
    --erase_request ID            (erase: the request `cdclake erase` wrote under the
                                  warehouse, holding the key; removed once erased, so the key
                                  is in no run's arguments: cdclake_merge.erase_request)
    --snapshot_done true          (rebuild: an operator's word that the rebuild's incremental
                                  snapshot finished; else Debezium's COMPLETED notification)
    --notifications_path s3://…/  (rebuild: where the S3 sink writes the capture's notifications;
                                  default: <prefix>.notifications beside the table's topic)
    --drop_columns drop           (rebuild: leave out a column the source dropped; config's
                                  drop_columns, passed only when not the default, keep)
    --signal_function NAME        (rebuild: the replication bootstrap's function, invoked to
                                  signal the rebuild's incremental snapshot when no one has:
                                  a run the dispatcher starts for a table needing a rebuild)
    --restore_to latest|DATE|TIME (restore: the newest savepoint at or before it)
    --retain_hours 24             --savepoint_days 7   (lake.retain_hours, lake.savepoint_days)
    --clean_every_commits 4       (commits between Hudi's cleans: an hour's at the objective)
    --record_index_file_groups 10 (from the table's expected_rows; used when the table is first
                                  written)
    --compaction_io_mb MB         (MERGE_ON_READ: a compaction's IO budget, a quarter of the
                                  timeout's worth; default Hudi's)
    --history 1                   (the table keeps every version of its rows beside it; config's
                                  history: true)

Every mode runs on the table's live generation, read from the state object in its sidecar
(``cdclake_merge.generations``); a merge run that finds a rebuild in progress runs the
rebuild's step instead (the live generation takes no commit meanwhile), and replay, restore
and erase are refused until the rebuild is swapped in.

Without ``awsglue`` installed (a laptop) the same script runs on a local session
with the same Hudi bundle, so ``python glue_jobs/merge_job.py …`` exercises this file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

ARGUMENTS = (
    "table",
    "changes_path",
    "warehouse_path",
    "database",
    "record_key",
    "partition_fields",
    "table_type",
    "quarantine_path",
    "max_bad_fraction",
    "environment",
    "exclude_columns",
    "column_types",
    "tombstone_retention_days",
    "max_files_per_run",
    "max_bytes_per_run",
    "mode",
    "restore_to",
    "retain_hours",
    "savepoint_days",
    "clean_every_commits",
    "record_index_file_groups",
    "compaction_io_mb",
    "history",
    "snapshot_done",
    "notifications_path",
    "drop_columns",
    "signal_function",
    "erase_request",
)
MODES = ("merge", "replay", "restore", "rebuild", "erase")
# The table's services, as config's LakeConfig.services_of names them (open_sink's keywords).
SERVICE_ARGUMENTS = (
    "retain_hours",
    "savepoint_days",
    "clean_every_commits",
    "record_index_file_groups",
    "compaction_io_mb",
    "history",
)
# Without --environment the run publishes no metrics (a run by hand).
# Without --mode it merges: job definitions never pass it; `cdclake quarantine replay` starts
# a run with `--mode replay`.
OPTIONAL = {
    "partition_fields": "",
    "table_type": "COPY_ON_WRITE",
    "environment": "",
    "exclude_columns": "",
    "column_types": "{}",
    "tombstone_retention_days": "",
    "max_files_per_run": "",
    "max_bytes_per_run": "",
    "mode": "merge",
    "restore_to": "latest",
    "retain_hours": "",
    "savepoint_days": "",
    "clean_every_commits": "",
    "record_index_file_groups": "",
    "compaction_io_mb": "",
    "snapshot_done": "false",
    "notifications_path": "",
    "drop_columns": "keep",
    "history": "",
    "signal_function": "",
    "erase_request": "",
}


class RunFailed(Exception):
    """The run's failure in one line (``cdclake merge failed: …``). Raised out of the script,
    it fails the Glue run with that line in its ErrorMessage ("RunFailed: cdclake merge
    failed: …"), where the dispatcher tells a failure a retry would repeat
    (``cdclake_merge.failures.DETERMINISTIC``); printed before a bare exit status, the line
    reached only the run's log, and its ErrorMessage said no more than "SystemExit: 1"."""


def parse_arguments(argv: list[str]) -> dict[str, str]:
    """Glue's ``getResolvedOptions`` where it exists, argparse with the same names elsewhere."""
    try:
        from awsglue.utils import getResolvedOptions
    except ImportError:
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("--JOB_NAME", default="local-merge")
        parser.add_argument("--JOB_RUN_ID")  # Glue passes it; getResolvedOptions returns it
        for name in ARGUMENTS:
            parser.add_argument(
                f"--{name}", required=name not in OPTIONAL, default=OPTIONAL.get(name)
            )
        known, _ = parser.parse_known_args(argv[1:])
        return {k: v for k, v in vars(known).items() if v is not None}
    present = [name for name in ARGUMENTS if f"--{name}" in argv]
    resolved = getResolvedOptions(argv, ["JOB_NAME", *present])
    return {**OPTIONAL, **resolved}


def build_session(args: dict[str, str]) -> tuple[Any, Any]:
    """(SparkSession, Glue Job or None)."""
    try:
        from awsglue.context import GlueContext
        from awsglue.job import Job
        from pyspark.context import SparkContext
    except ImportError:
        from cdclake_merge.session import local_session

        return local_session(args["warehouse_path"], app_name=args.get("JOB_NAME", "merge")), None
    glue_context = GlueContext(SparkContext.getOrCreate())
    job = Job(glue_context)
    job.init(args["JOB_NAME"], args)
    return glue_context.spark_session, job


def merge_options(args: dict[str, str]) -> Any:
    """The run's MergeOptions from the job's arguments (the table's settings in config)."""
    from cdclake_merge.job import MergeOptions

    # Job definitions always pass it; a run by hand without it keeps the library's default.
    retention: dict[str, Any] = (
        {"tombstone_retention_days": float(args["tombstone_retention_days"])}
        if args["tombstone_retention_days"]
        else {}
    )
    return MergeOptions(
        table=f"{args['database']}.{args['table'].replace('.', '_')}",
        key=tuple(k for k in args["record_key"].split(",") if k),
        changes=args["changes_path"],
        max_bad_fraction=float(args["max_bad_fraction"]),
        column_types=dict(json.loads(args["column_types"] or "{}")),
        exclude_columns=frozenset(c for c in args["exclude_columns"].split(",") if c),
        max_files=_positive(args, "max_files_per_run"),
        max_bytes=_positive(args, "max_bytes_per_run"),
        **retention,
    )


def _positive(args: dict[str, str], name: str) -> int | None:
    value = args.get(name) or ""
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"--{name} must be a positive whole number, not {value!r}")
    return int(value)


def open_table(
    args: dict[str, str], options: Any, spark: Any, generation: int = 1, catalog: bool = True
) -> Any:
    """The job's Hudi table (the sink) of ``generation``, on the job's warehouse and quarantine
    paths; ``catalog``: whether its commits sync the catalog."""
    from cdclake_merge.sink import open_sink
    from cdclake_merge.storage import filesystem_for

    services = {
        name: number for name in SERVICE_ARGUMENTS if (number := _positive(args, name)) is not None
    }
    return open_sink(
        warehouse=args["warehouse_path"],
        table=options.table,
        key=options.key,
        fs=filesystem_for(args["warehouse_path"], spark),
        spark_factory=lambda: spark,
        partition_fields=[p for p in args["partition_fields"].split(",") if p],
        table_type=args["table_type"],
        quarantine_root=args["quarantine_path"],
        sync_catalog=catalog,
        generation=generation,
        **services,
    )


def rebuild_arguments(args: dict[str, str]) -> tuple[bool, bool]:
    """(--snapshot_done, whether to keep dropped columns), refused in one line otherwise."""
    if args["snapshot_done"] not in ("true", "false"):
        raise ValueError(f"--snapshot_done must be true or false, not {args['snapshot_done']!r}")
    if args["drop_columns"] not in ("keep", "drop"):
        raise ValueError(f"--drop_columns must be keep or drop, not {args['drop_columns']!r}")
    return args["snapshot_done"] == "true", args["drop_columns"] == "keep"


def function_signal(function: str, table: str) -> Callable[[str], None]:
    """The rebuild's snapshot signal through the bootstrap function (lambdas/bootstrap:
    ``{"RequestType": "Signal"}``), which reaches the database; the run does not."""

    def signal(signal_id: str) -> None:
        import boto3

        request = {"RequestType": "Signal", "Table": table, "SignalId": signal_id}
        answer = boto3.client("lambda").invoke(
            FunctionName=function, Payload=json.dumps(request).encode()
        )
        if "FunctionError" in answer:
            failure = json.loads(answer["Payload"].read() or b"{}")
            reason = failure.get("errorMessage") or answer["FunctionError"]
            raise ValueError(f"the snapshot signal through {function} failed: {reason}")

    return signal


def notifications_of(args: dict[str, str]) -> str:
    from cdclake_merge.generations import notifications_beside

    return args["notifications_path"] or notifications_beside(args["changes_path"], args["table"])


def main(argv: list[str]) -> int:
    """Run the job; 0 once done. :class:`RunFailed` when the run fails for a reason of its own
    (a refused argument, the merge's gates, a schema change the table cannot take)."""
    from cdclake_merge.erase import erase_key, refuse_unreachable_generations
    from cdclake_merge.erase_request import read_request, remove_request, request_path
    from cdclake_merge.hudi import CatalogSyncError
    from cdclake_merge.job import MergeError
    from cdclake_merge.metrics import TableRun, publish
    from cdclake_merge.rebuild import follow_live, merge_table, rebuild_step
    from cdclake_merge.recovery import parse_restore_target
    from cdclake_merge.replay import replay
    from cdclake_merge.storage import filesystem_for

    args = parse_arguments(argv)
    mode = args["mode"]
    if mode not in MODES:
        raise RunFailed(f"cdclake: --mode must be one of {', '.join(MODES)}, not {mode!r}")
    try:
        options = merge_options(args)
        snapshot_done, keep_columns = rebuild_arguments(args)
        if mode == "erase":  # an id not `cdclake erase`'s
            request_path(args["warehouse_path"], options.table, args["erase_request"])
    except ValueError as exc:  # a job argument edited in the console: fail before a session
        raise RunFailed(f"cdclake {mode} failed: {exc}") from None
    spark, job = build_session(args)
    started = time.monotonic()
    rebuilding = False

    def generation_sink(generation: int, catalog: bool) -> Any:
        return open_table(args, options, spark, generation, catalog)

    try:
        state = follow_live(lambda: spark, generation_sink)
        if state.building is not None and mode in ("replay", "restore"):
            raise ValueError(
                f"a rebuild of the table (generation {state.building}) is in progress: "
                "its live generation takes no commit until the rebuild is swapped in"
            )
        if mode == "erase":  # nor while a replaced generation still holds older rows
            refuse_unreachable_generations(state, options.table)
        sink = generation_sink(state.live, True)
        changes = filesystem_for(args["changes_path"], spark)
        notifications = notifications_of(args) if state.building or mode == "rebuild" else None
        if mode == "replay":
            # The quarantined lines the job's spec reads now, as one commit of their own.
            replayed = replay(
                lambda: spark,
                filesystem_for(args["quarantine_path"], spark),
                sink,
                options,
                job_run=args.get("JOB_RUN_ID"),
            )
            output = {"cdclake_replay": replayed.as_dict()}
        elif mode == "restore":
            # Runs as the table's job, one run at a time: no merge writes while it restores.
            restored = sink.restore(spark, parse_restore_target(args["restore_to"]))
            output = {"cdclake_restore": {"table": options.table, "version": restored.version}}
        elif mode == "erase":
            warehouse = filesystem_for(args["warehouse_path"], spark)
            request = (args["warehouse_path"], options.table, args["erase_request"])
            # Counts only: the run's output is its log, which must not hold the key's values.
            erased = erase_key(
                spark,
                sink,
                changes,
                changes=args["changes_path"],
                quarantine_root=args["quarantine_path"],
                key=read_request(warehouse, *request),
            )
            remove_request(warehouse, *request)  # kept by a failed run: a rerun finds it
            output = {"cdclake_erase": erased.as_dict()}
        elif mode == "rebuild":
            rebuilt = rebuild_step(
                lambda: spark,
                changes,
                generation_sink,
                options,
                notifications=notifications,
                snapshot_done=snapshot_done,
                keep_columns=keep_columns,
                signal=(
                    function_signal(args["signal_function"], args["table"])
                    if args["signal_function"]
                    else None
                ),
            )
            rebuilding, output = True, {"cdclake_rebuild": rebuilt.as_dict()}
        else:
            merged = merge_table(
                lambda: spark,
                changes,
                generation_sink,
                options,
                notifications=notifications,
                keep_columns=keep_columns,
            )
            rebuilding = merged.rebuilding
            output = {"cdclake_rebuild" if rebuilding else "cdclake_merge": merged.as_dict()}
    except (MergeError, CatalogSyncError, ValueError) as exc:  # RestoreError is a ValueError
        # Fail the Glue run visibly with one line; a rerun starts from the last commit.
        raise RunFailed(f"cdclake {mode} failed: {exc}") from exc
    print(json.dumps(output))
    # A replay publishes nothing: it applies old lines out of band; the next merge reports lag.
    # Nor does a rebuild's run: the live generation's lag stays what its last commit left.
    if mode == "merge" and not rebuilding and args.get("environment"):
        # After the commit, so a CloudWatch outage costs a datapoint, never a merge.
        publish(
            TableRun.from_result(
                output["cdclake_merge"],
                environment=args["environment"],
                table=args["table"],
                duration_seconds=time.monotonic() - started,
            )
        )
    if job is not None:
        job.commit()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
