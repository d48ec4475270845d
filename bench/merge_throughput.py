"""Merge throughput: cdclake merge vs. the obvious Spark SQL window vs. DuckDB.

    .venv/bin/python bench/merge_throughput.py                 # 1,000,000 events, 100,000 keys
    .venv/bin/python bench/merge_throughput.py --events 200000 --scaling

Generates schema-included Debezium envelopes once (cached under bench/data/), then measures
(1) ``cdclake merge`` end to end into a fresh snapshot table, (2) latest-row-per-key with a
``row_number`` window in Spark SQL over the same files, (3) the same in DuckDB, the reference
for what one machine can do, and (4) a no-op rerun of (1). Prints events/s and ratios and writes
``bench/results/merge_throughput-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def generate(events: int, keys: int) -> Path:
    from cdclake_merge.generator import GeneratorOptions, generate_files

    out = HERE / "data" / f"events-{events}-{keys}"
    if not (out / "table.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        options = GeneratorOptions(
            events=events, keys=keys, seed=42, partitions=4, flush_size=10_000, truncate=False
        )
        generate_files(out, options)
    return out


def bench_cdclake(spark: Any, data: Path, work: Path) -> tuple[float, float, int]:
    from cdclake_merge.job import MergeOptions, run_merge
    from cdclake_merge.snapshot_table import SnapshotTable
    from cdclake_merge.storage import LocalFileSystem

    shutil.rmtree(work, ignore_errors=True)
    fs = LocalFileSystem()
    table = f"bench.orders_{int(time.time())}"
    sink = SnapshotTable(fs, str(work), table)
    options = MergeOptions(table=table, key=("id",), changes=str(data / "topics"))
    started = time.perf_counter()
    result = run_merge(lambda: spark, fs, sink, options)
    elapsed = time.perf_counter() - started
    started = time.perf_counter()
    rerun = run_merge(lambda: spark, fs, sink, options)
    noop = time.perf_counter() - started
    assert not rerun.committed
    return elapsed, noop, result.events_read


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


def run(events: int, keys: int, spark: Any) -> dict[str, Any]:
    data = generate(events, keys)
    work = HERE / "data" / "work"
    merge_s, noop_s, read = bench_cdclake(spark, data, work / "cdclake")
    window_s = bench_spark_window(spark, data, work)
    duck_s = bench_duckdb(data, work)
    figures = {
        "events": read,
        "keys": keys,
        "cdclake_merge_s": round(merge_s, 2),
        "spark_window_s": round(window_s, 2),
        "duckdb_s": round(duck_s, 2),
        "noop_rerun_s": round(noop_s, 3),
        "cdclake_events_per_s": round(read / merge_s),
        "spark_window_events_per_s": round(read / window_s),
        "duckdb_events_per_s": round(read / duck_s),
        "cdclake_vs_duckdb": round(duck_s / merge_s, 3),
        "cdclake_vs_spark_window": round(window_s / merge_s, 3),
    }
    print(json.dumps(figures, indent=2))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--scaling", action="store_true", help="also 1/4 and 1/2 of --events")
    args = parser.parse_args()
    from cdclake_merge.session import local_session

    spark = local_session(HERE / "data" / "metastore", app_name="cdclake-bench")
    sizes = [args.events // 4, args.events // 2, args.events] if args.scaling else [args.events]
    runs = [run(n, max(args.keys * n // args.events, 1), spark) for n in sizes]
    result = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "runs": runs,
        "at": dt.datetime.now(dt.UTC).isoformat(),
    }
    out = HERE / "results" / f"merge_throughput-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"results → {out}")


if __name__ == "__main__":
    main()
