"""What a merge run costs as the table and its history grow (issue 17).

    .venv/bin/python bench/merge_incremental.py                      # 30,000 and 3,000,000 rows
    .venv/bin/python bench/merge_incremental.py --large 300000       # a smaller large table
    .venv/bin/python bench/merge_incremental.py --history-files 100000 --only history

**incremental**: a COPY_ON_WRITE and a MERGE_ON_READ table of ``--small`` and ``--large``
rows each, then 10,000 changes (updates of existing keys, a tenth with a TOAST placeholder,
inserts, deletes) as change files in the S3 sink layout, merged by ``run_merge``. The figure
is that run's time, per stage, and the ratio large/small per table type. The tables are made
by the merge's own sink (one commit of generated rows; parsing millions of events first would
measure the cold path, which ``merge_throughput.py`` does).

**history**: ``--history-files`` one-event change files in four partitions, merged in one run;
then the size of the checkpoint the commit names and the time of a run that finds nothing.

Prints the figures and writes ``bench/results/merge_incremental-<timestamp>.json`` with the
machine and its load. Never asserted in tests (``tests/merge/test_bench.py`` runs it small).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import platform
import random
import shutil
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TOPIC = "bench.public.orders"
CHANGES = 10_000
TARGET_RATIO = {"MERGE_ON_READ": 1.25, "COPY_ON_WRITE": 2.0}
TABLE_TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")
TARGET_NOOP_S = 2.0
TARGET_CHECKPOINT_BYTES = 64 * 1024
COLUMNS = (("id", "bigint"), ("customer", "string"), ("amount", "double"), ("note", "string"))
NOTE = "n" * 300  # a TOAST-able column


def event(op: str, key: int, lsn: int, *, toast: bool = False) -> str:
    row = None
    if op != "d":
        note = "__debezium_unavailable_value" if toast else f"{NOTE}{lsn}"
        row = {"id": key, "customer": f"c{lsn}", "amount": lsn / 100, "note": note}
    source = {"lsn": lsn, "sequence": json.dumps([str(lsn), str(lsn)]), "ts_ms": 1_700_000_000_000}
    body = {
        "before": {"id": key} if op == "d" else None,
        "after": row,
        "source": source,
        "op": op,
        "ts_ms": 1_700_000_000_000,
    }
    return json.dumps(body, separators=(",", ":"))


def write_changes(changes: Path, lines: list[str], partitions: int, per_file: int) -> int:
    """Lines spread over partitions by position, as files named as the S3 sink names them."""
    streams: list[list[str]] = [[] for _ in range(partitions)]
    for i, text in enumerate(lines):
        streams[i % partitions].append(text)
    files = 0
    for p, stream in enumerate(streams):
        folder = changes / TOPIC / f"partition={p}"
        folder.mkdir(parents=True, exist_ok=True)
        existing = len(list(folder.iterdir()))
        for n, start in enumerate(range(0, len(stream), per_file)):
            name = f"{TOPIC}+{p}+{(existing + n) * per_file:010d}.json"
            (folder / name).write_text("\n".join(stream[start : start + per_file]) + "\n")
            files += 1
    return files


def make_table(
    spark: Any, work: Path, table_type: str, rows: int, *, savepoint_days: int | None = None
) -> tuple[Any, Any]:
    """A Hudi table of ``rows`` generated rows, committed by the merge's sink (version 1);
    ``savepoint_days`` as ``lake.savepoint_days`` (None: its default)."""
    from pyspark.sql import functions as F

    from cdclake_merge.sink import Changes, open_sink
    from cdclake_merge.storage import LocalFileSystem
    from cdclake_merge.transforms import DELETED, LSN, OP, ORDER, SOURCE_TS

    name = f"bench.{table_type.lower()}_{rows}"
    retention: dict[str, Any] = {} if savepoint_days is None else {"savepoint_days": savepoint_days}
    sink = open_sink(
        warehouse=str(work / "warehouse"),
        table=name,
        key=("id",),
        fs=LocalFileSystem(),
        spark_factory=lambda: spark,
        table_type=table_type,
        sync_catalog=False,
        **retention,
    )
    frame = spark.range(rows).select(
        F.col("id"),
        F.concat(F.lit("c"), F.col("id").cast("string")).alias("customer"),
        (F.col("id") / 100).alias("amount"),
        F.concat(F.lit(NOTE), F.col("id").cast("string")).alias("note"),
        F.lpad(F.lit("1"), 40, "0").alias(ORDER),
        F.lit(1).cast("bigint").alias(LSN),
        F.lit("r").alias(OP),
        F.timestamp_millis(F.lit(1_700_000_000_000)).alias(SOURCE_TS),
        F.lit(False).alias(DELETED),
    )
    previous = sink.load()
    changes = Changes(
        columns=COLUMNS,
        key=("id",),
        truncated_before=None,
        snapshots=(),
        positions={},
        rows=frame,
        truncated=False,
        quarantine=None,
        run={"deletes": 0},
    )
    sink.commit(spark, sink.stage(spark, previous, changes))
    return sink, name


def incremental_changes(rows: int, seed: int, changes: int = CHANGES) -> list[str]:
    """``changes`` changes: 80 % updates (a tenth TOASTed), 10 % inserts, 10 % deletes."""
    rng = random.Random(seed)
    lines = []
    for i in range(changes):
        lsn = 10_000 + i
        kind = rng.random()
        if kind < 0.8:
            lines.append(event("u", rng.randrange(rows), lsn, toast=rng.random() < 0.1))
        elif kind < 0.9:
            lines.append(event("c", rows + i, lsn))
        else:
            lines.append(event("d", rng.randrange(rows), lsn))
    return lines


def timed_run(spark: Any, sink: Any, table: str, changes: Path) -> dict[str, Any]:
    from cdclake_merge.job import MergeOptions, run_merge
    from cdclake_merge.storage import LocalFileSystem

    marks: list[tuple[str, float]] = []
    options = MergeOptions(table=table, key=("id",), changes=str(changes))
    started = time.perf_counter()
    result = run_merge(
        lambda: spark,
        LocalFileSystem(),
        sink,
        options,
        progress=lambda stage: marks.append((stage, time.perf_counter())),
    )
    ended = time.perf_counter()
    stages: dict[str, float] = {}
    points = [("list", started), *marks, ("end", ended)]
    for (stage, at), (_, until) in itertools.pairwise(points):
        stages[stage] = round(until - at, 2)
    return {"seconds": round(ended - started, 2), "stages": stages, "result": result.as_dict()}


def time_state_reads(spark: Any, sink: Any, lines: list[str]) -> dict[str, float]:
    """Reading the state of the run's keys, three ways, each twice (the second is counted).

    ``named``: the keys in the read (``id IN (…)``), which Hudi's record index can prune by;
    ``joined``: a semi-join of the table (key, order, one column) with the keys; ``whole``:
    the table with every column, as runs read it before.
    """
    from cdclake_merge import hudi

    keys = sorted({(json.loads(t)["after"] or json.loads(t)["before"])["id"] for t in lines})
    frame = spark.createDataFrame([(k,) for k in keys], "id bigint")
    state = sink.load()
    limit = hudi.MAX_NAMED_KEYS

    def lookup(named: int) -> Any:
        hudi.MAX_NAMED_KEYS = named
        try:
            return sink.lookup_state(spark, state, frame, ("note",))
        finally:
            hudi.MAX_NAMED_KEYS = limit

    figures = {}
    for name, read in (
        ("named", lambda: lookup(len(keys))),
        ("joined", lambda: lookup(0)),
        ("whole", lambda: sink.read_state(spark, state)),
    ):
        for _ in range(2):
            started = time.perf_counter()
            read().agg({"_cdc_order": "max"}).collect()  # a count alone reads no column
            figures[name] = round(time.perf_counter() - started, 2)
    return figures


def bench_incremental(
    spark: Any,
    work: Path,
    sizes: list[int],
    changes: int = CHANGES,
    *,
    warm_up: bool = True,
    table_types: tuple[str, ...] = TABLE_TYPES,
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    warm = work / "warm-up"  # so no figure pays for the first Hudi write and read of the JVM
    for table_type in table_types if warm_up else ():
        shutil.rmtree(warm, ignore_errors=True)
        sink, table = make_table(spark, warm, table_type, 1000)
        write_changes(warm / "changes", incremental_changes(1000, seed=1, changes=500), 4, 1000)
        time_state_reads(spark, sink, incremental_changes(1000, seed=1, changes=500))
        timed_run(spark, sink, table, warm / "changes")
    shutil.rmtree(warm, ignore_errors=True)
    for table_type in table_types:
        per_size = {}
        for rows in sizes:
            target = work / f"{table_type}-{rows}"
            shutil.rmtree(target, ignore_errors=True)
            started = time.perf_counter()
            sink, table = make_table(spark, target, table_type, rows)
            made = time.perf_counter() - started
            lines = incremental_changes(rows, seed=rows, changes=changes)
            write_changes(target / "changes", lines, 4, 1000)
            state_reads = time_state_reads(spark, sink, lines)
            run = timed_run(spark, sink, table, target / "changes")
            run["state_read_s"] = state_reads
            run["table_rows"] = rows
            run["changes"] = changes
            run["table_made_s"] = round(made, 1)
            print(
                f"{table_type} {rows:>9,} rows: {run['seconds']} s {run['stages']}, "
                f"state read {state_reads}",
                flush=True,
            )
            per_size[str(rows)] = run
            shutil.rmtree(target, ignore_errors=True)
        small, large = (per_size[str(n)]["seconds"] for n in sizes)
        ratio = round(large / small, 2)
        figures[table_type] = {
            "runs": per_size,
            "ratio": ratio,
            "target_ratio": TARGET_RATIO[table_type],
            "target_met": ratio <= TARGET_RATIO[table_type],
        }
    return figures


def bench_history(spark: Any, work: Path, files: int) -> dict[str, Any]:
    target = work / "history"
    shutil.rmtree(target, ignore_errors=True)
    changes = target / "changes"
    made = time.perf_counter()
    write_changes(changes, [event("c", i, 100 + i) for i in range(files)], 4, 1)
    made_s = time.perf_counter() - made
    sink, table = make_table(spark, target, "COPY_ON_WRITE", 1000)
    applied = timed_run(spark, sink, table, changes)
    noop = timed_run(spark, sink, table, changes)
    state = sink.load()
    checkpoint = Path(sink.sidecar) / f"checkpoints/v{state.version:08d}.json"
    names = sum(len(str(p.relative_to(changes))) + 4 for p in changes.rglob("*.json"))
    figures = {
        "files": files,
        "files_written_s": round(made_s, 1),
        "merge_s": applied["seconds"],
        "merge_stages": applied["stages"],
        "files_applied": applied["result"]["files_applied"],
        "noop_s": noop["seconds"],
        "noop_committed": noop["result"]["committed"],
        "checkpoint_bytes": checkpoint.stat().st_size,
        "names_as_json_bytes": names,  # what a checkpoint listing every file name would hold
        "targets_met": noop["seconds"] < TARGET_NOOP_S
        and checkpoint.stat().st_size < TARGET_CHECKPOINT_BYTES,
    }
    print(json.dumps(figures, indent=2), flush=True)
    shutil.rmtree(target, ignore_errors=True)
    return figures


def machine(spark: Any) -> dict[str, Any]:
    import pyspark

    memory_kb = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_gib": round(memory_kb / 2**20, 1),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "spark_master": spark.sparkContext.master,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=30_000)
    parser.add_argument("--large", type=int, default=3_000_000)
    parser.add_argument("--changes", type=int, default=CHANGES, help="changes per run")
    parser.add_argument("--history-files", type=int, default=100_000)
    parser.add_argument("--only", choices=["incremental", "history"], default=None)
    parser.add_argument(
        "--table-type",
        choices=TABLE_TYPES,
        action="append",
        help="incremental: only this table type (repeatable; default: both)",
    )
    parser.add_argument(
        "--warm-up",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="merge into a small table of each type first, unmeasured (the JVM's first write)",
    )
    parser.add_argument("--data-dir", type=Path, default=HERE / "data" / "incremental")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    args = parser.parse_args()
    from cdclake_merge.session import local_session

    spark = local_session(args.data_dir / "metastore", app_name="cdclake-bench-incremental")
    load_before = os.getloadavg()
    result: dict[str, Any] = {"machine": machine(spark), "load_before": load_before}
    if args.only in (None, "incremental"):
        sizes = [args.small, args.large]
        result["incremental"] = bench_incremental(
            spark,
            args.data_dir,
            sizes,
            args.changes,
            warm_up=args.warm_up,
            table_types=tuple(args.table_type or TABLE_TYPES),
        )
    if args.only in (None, "history"):
        result["history"] = bench_history(spark, args.data_dir, args.history_files)
    result["load_after"] = os.getloadavg()
    result["at"] = dt.datetime.now(dt.UTC).isoformat()
    out = args.results_dir / f"merge_incremental-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results → {out}")
    for table_type, figures in result.get("incremental", {}).items():
        verdict = "met" if figures["target_met"] else "NOT met"
        print(
            f"{table_type}: ratio {figures['ratio']} (target ≤ {figures['target_ratio']}) {verdict}"
        )
    if "history" in result:
        h = result["history"]
        verdict = "met" if h["targets_met"] else "NOT met"
        print(
            f"history: {h['files']:,} files, checkpoint {h['checkpoint_bytes']:,} B, "
            f"no-op run {h['noop_s']} s; targets {verdict}"
        )


if __name__ == "__main__":
    main()
