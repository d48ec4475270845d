"""Merge throughput: cdclake merge vs. the obvious Spark SQL window vs. DuckDB.

    .venv/bin/python bench/merge_throughput.py          # 0.25M, 0.5M and 1M events (10 per key)
    .venv/bin/python bench/merge_throughput.py --events 200000 --no-scaling

Generates schema-included Debezium envelopes once per size (cached under bench/data/), then
measures (1) ``cdclake merge`` end to end into a fresh snapshot table, (2) latest-row-per-key
with a ``row_number`` window in Spark SQL over the same files, (3) the same in DuckDB, the
reference for what one machine can do, and (4) a no-op rerun of (1). Every contender first runs
once on a small warm-up set, so no figure pays for starting the JVM or the Python workers,
and each input is read once into the page cache first, so none pays for the disk. All three
must produce the number of live rows the generator expects, or the figures are not written.
Prints events/s, the ratios and whether the targets are met, and writes
``bench/results/merge_throughput-<timestamp>.json``, with what the Spark JVM spent during
each Spark contender (compiling, collecting, CPU: a cold run's extra time is the JIT's).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WARM_UP_EVENTS = 20_000
# Issue 17's targets: at least half DuckDB's rate, and at least the window query's.
TARGET_VS_DUCKDB = 0.5
TARGET_VS_WINDOW = 1.0


def generate(events: int, keys: int, root: Path) -> Path:
    from cdclake_merge.generator import GeneratorOptions, generate_files

    out = root / f"events-{events}-{keys}"
    if not (out / "table.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        options = GeneratorOptions(
            events=events, keys=keys, seed=42, partitions=4, flush_size=10_000, truncate=False
        )
        generate_files(out, options)
    return out


def bench_cdclake(spark: Any, data: Path, work: Path) -> tuple[float, float, Any, dict[str, float]]:
    from cdclake_merge.job import MergeOptions, run_merge
    from cdclake_merge.sink import open_sink
    from cdclake_merge.storage import LocalFileSystem

    shutil.rmtree(work, ignore_errors=True)
    fs = LocalFileSystem()
    table = f"bench.orders_{int(time.time())}"
    sink = open_sink(
        warehouse=str(work), table=table, key=("id",), fs=fs, spark_factory=lambda: spark
    )
    options = MergeOptions(table=table, key=("id",), changes=str(data / "topics"))
    marks: list[tuple[str, float]] = []
    started = time.perf_counter()
    result = run_merge(
        lambda: spark, fs, sink, options, progress=lambda s: marks.append((s, time.perf_counter()))
    )
    elapsed = time.perf_counter() - started
    points = [("list", started), *marks, ("end", started + elapsed)]
    stages = {a: round(u - t, 2) for (a, t), (_, u) in itertools.pairwise(points)}
    started = time.perf_counter()
    rerun = run_merge(lambda: spark, fs, sink, options)
    noop = time.perf_counter() - started
    assert not rerun.committed
    return elapsed, noop, result, stages


def bench_spark_window(spark: Any, data: Path, work: Path) -> float:
    files = [str(p) for p in (data / "topics").rglob("*.json")]
    started = time.perf_counter()
    raw = spark.read.json(files)
    raw.createOrReplaceTempView("raw")
    latest = spark.sql(
        """
        SELECT * FROM (
          SELECT coalesce(payload.after.id, payload.before.id) AS id, payload.op AS op,
                 payload.after AS row,
                 row_number() OVER (
                   PARTITION BY coalesce(payload.after.id, payload.before.id)
                   ORDER BY cast(get_json_object(payload.source.sequence, '$[0]') AS bigint) DESC,
                            payload.source.lsn DESC) AS rn
          FROM raw WHERE payload IS NOT NULL AND payload.op IN ('r', 'c', 'u', 'd')
        ) WHERE rn = 1 AND op != 'd'
        """
    )
    latest.write.mode("overwrite").parquet(str(work / "window"))
    return time.perf_counter() - started


def bench_duckdb(data: Path, work: Path) -> float:
    import duckdb

    pattern = str(data / "topics" / "*" / "*" / "*.json")
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute(
        f"""
        COPY (
          SELECT * FROM (
            SELECT coalesce(payload.after.id, payload.before.id) AS id, payload.op AS op,
                   payload.after AS row,
                   row_number() OVER (
                     PARTITION BY coalesce(payload.after.id, payload.before.id)
                     ORDER BY CAST(json_extract_string(payload.source.sequence, '$[0]') AS BIGINT)
                              DESC, payload.source.lsn DESC) AS rn
            FROM read_json('{pattern}', format='newline_delimited', maximum_object_size=100000000,
                           ignore_errors=true)
            WHERE payload IS NOT NULL AND payload.op IN ('r', 'c', 'u', 'd')
          ) WHERE rn = 1 AND op != 'd'
        ) TO '{work / "duckdb.parquet"}' (FORMAT parquet)
        """
    )
    return time.perf_counter() - started


def jvm_counters(spark: Any) -> dict[str, float]:
    """The Spark JVM's totals so far: its JIT compilers' time, its collectors' time and its
    process CPU time, in seconds. A cold run's extra time is mostly the JIT's: two cores
    shared by Spark's tasks and the compilers (docs/reliability.md)."""
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    collectors = management.getGarbageCollectorMXBeans()
    gc_ms = sum(collectors.get(i).getCollectionTime() for i in range(collectors.size()))
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    # utime and stime, the 14th and 15th fields, after the parenthesised command name
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {
        "jit_s": management.getCompilationMXBean().getTotalCompilationTime() / 1000,
        "gc_s": gc_ms / 1000,
        "cpu_s": (int(fields[11]) + int(fields[12])) / ticks,
    }


def jvm_spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: round(after[name] - before[name], 2) for name in before}


def read_into_page_cache(data: Path) -> None:
    """Reads every input file once, so the first contender does not pay for the disk alone."""
    for path in (data / "topics").rglob("*.json"):
        with path.open("rb") as f:
            while f.read(1 << 24):
                pass


def check_same_rows(data: Path, work: Path, cdclake_live: int) -> None:
    """Figures only compare if all three produced the table the generator says is right."""
    import duckdb

    expected = json.loads((data / "table.json").read_text())["live_rows"]
    con = duckdb.connect()
    counts = {
        "cdclake merge": cdclake_live,
        "spark window": con.execute(
            f"SELECT count(*) FROM '{work / 'window'}/*.parquet'"
        ).fetchall()[0][0],
        "duckdb": con.execute(f"SELECT count(*) FROM '{work / 'duckdb.parquet'}'").fetchall()[0][0],
    }
    wrong = {name: n for name, n in counts.items() if n != expected}
    if wrong:
        raise SystemExit(f"{data.name}: expected {expected} live rows, got {wrong}")


def measure(events: int, keys: int, spark: Any, root: Path) -> dict[str, Any]:
    data = generate(events, keys, root)
    read_into_page_cache(data)
    work = root / "work"
    counters = jvm_counters(spark)
    merge_s, noop_s, result, stages = bench_cdclake(spark, data, work / "cdclake")
    after_merge = jvm_counters(spark)
    read, live = result.events_read, result.upserts
    window_s = bench_spark_window(spark, data, work)
    after_window = jvm_counters(spark)
    duck_s = bench_duckdb(data, work)
    check_same_rows(data, work, live)
    return {
        "events": read,
        "keys": keys,
        "cdclake_merge_s": round(merge_s, 2),
        "spark_window_s": round(window_s, 2),
        "duckdb_s": round(duck_s, 2),
        "noop_rerun_s": round(noop_s, 3),
        "cdclake_stages_s": stages,
        # what the Spark JVM spent during each contender (the no-op rerun included in the first)
        "jvm": {
            "cdclake merge": jvm_spent(counters, after_merge),
            "spark window": jvm_spent(after_merge, after_window),
        },
        "cdclake_events_per_s": round(read / merge_s),
        "spark_window_events_per_s": round(read / window_s),
        "duckdb_events_per_s": round(read / duck_s),
        "cdclake_vs_duckdb": round(duck_s / merge_s, 3),
        "cdclake_vs_spark_window": round(window_s / merge_s, 3),
        "targets_met": duck_s / merge_s >= TARGET_VS_DUCKDB
        and window_s / merge_s >= TARGET_VS_WINDOW,
    }


def machine(spark: Any) -> dict[str, Any]:
    import duckdb
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
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
        "java": java.splitlines()[0] if java else None,
        "pyspark": pyspark.__version__,
        "duckdb": duckdb.__version__,
        "spark_master": spark.sparkContext.master,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument(
        "--scaling",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure 1/4 and 1/2 of --events (default: on)",
    )
    parser.add_argument(
        "--warm-up",
        type=int,
        default=WARM_UP_EVENTS,
        help="events, unmeasured; 0 skips it (default: %(default)s)",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=HERE / "data", help="generated input, work"
    )
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    args = parser.parse_args()
    from cdclake_merge.session import local_session

    spark = local_session(args.data_dir / "metastore", app_name="cdclake-bench")
    ratio = args.events / args.keys
    if args.warm_up:
        warm = measure(args.warm_up, max(int(args.warm_up / ratio), 1), spark, args.data_dir)
        print(f"warm-up ({warm['events']} events) done; measuring")
    sizes = [args.events // 4, args.events // 2, args.events] if args.scaling else [args.events]
    runs = []
    for n in sizes:
        figures = measure(n, max(int(n / ratio), 1), spark, args.data_dir)
        print(json.dumps(figures, indent=2), flush=True)
        runs.append(figures)
    result = {
        "machine": machine(spark),
        "targets": {
            "cdclake_vs_duckdb_at_least": TARGET_VS_DUCKDB,
            "cdclake_vs_spark_window_at_least": TARGET_VS_WINDOW,
        },
        "runs": runs,
        "at": dt.datetime.now(dt.UTC).isoformat(),
    }
    out = args.results_dir / f"merge_throughput-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results → {out}")
    for figures in runs:
        verdict = "met" if figures["targets_met"] else "NOT met"
        print(
            f"{figures['events']:>9} events: cdclake {figures['cdclake_events_per_s']:>7}/s, "
            f"window {figures['spark_window_events_per_s']:>7}/s, "
            f"duckdb {figures['duckdb_events_per_s']:>7}/s; "
            f"vs duckdb {figures['cdclake_vs_duckdb']:.2f}x, "
            f"vs window {figures['cdclake_vs_spark_window']:.2f}x; "
            f"no-op rerun {figures['noop_rerun_s']}s; targets {verdict}"
        )


if __name__ == "__main__":
    main()
