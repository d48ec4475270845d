"""First load: `cdclake merge` of a snapshot into an empty table vs. a plain Spark process.

    .venv/bin/python bench/initial_load.py                  # 1M snapshot rows
    .venv/bin/python bench/initial_load.py --rows 200000

Generates schema-included Debezium snapshot reads (``op: r``, one per key, no later changes;
cached under bench/data/), reads them into the page cache, then runs two processes on the same
files, each timed from its start to its exit: (1) ``cdclake merge --json`` into a fresh table
(parse, checks, schema, fold, the Hudi bulk insert of a first load, the catalog sync) and (2)
the baseline, a plain PySpark process (``local[2]``, the same driver memory) that reads the JSON
lines and writes the rows (``payload.after``) as Parquet. Both must have written the expected
number of rows or the figures are not recorded. Issue 25's target: (1) within 2x (2). Prints
the figures and writes ``bench/results/initial_load-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET_VS_SPARK = 2.0  # cdclake merge takes at most this many times the plain Spark process
DRIVER_MEMORY = "4g"  # both processes (local mode: the driver runs the tasks too)

# The baseline: what any Spark user would write, in its own process like `cdclake merge`.
PLAIN_SPARK = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").appName("plain")
         .config("spark.driver.memory", sys.argv[3]).config("spark.ui.enabled", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
rows = spark.read.json(sys.argv[1]).select("payload.after.*")
rows.write.mode("overwrite").parquet(sys.argv[2])
print(spark.read.parquet(sys.argv[2]).count())
"""


def generate(rows: int, root: Path) -> Path:
    from cdclake_merge.generator import GeneratorOptions, generate_files

    out = root / f"snapshot-{rows}"
    if not (out / "table.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        # keys // 3 rows are snapshotted, and with events == rows nothing follows them.
        options = GeneratorOptions(
            events=rows,
            keys=3 * rows,
            seed=7,
            partitions=4,
            flush_size=10_000,
            truncate=False,
            redeliver=False,
        )
        generate_files(out, options)
    return out


def read_into_page_cache(data: Path) -> None:
    for path in (data / "topics").rglob("*.json"):
        with path.open("rb") as f:
            while f.read(1 << 24):
                pass


def timed(command: list[str]) -> tuple[float, str]:
    environment = {**os.environ, "CDCLAKE_DRIVER_MEMORY": DRIVER_MEMORY}
    started = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=ROOT, env=environment
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]} failed: {done.stderr[-2000:]}")
    return seconds, done.stdout


def measure(rows: int, root: Path) -> dict[str, Any]:
    data = generate(rows, root)
    read_into_page_cache(data)
    work = root / "work-initial-load"
    shutil.rmtree(work, ignore_errors=True)
    topics = str(data / "topics")
    merge_s, merged = timed(
        [
            sys.executable,
            "-m",
            "cdclake.cli",
            "merge",
            "--changes",
            topics,
            "--warehouse",
            str(work / "warehouse"),
            "--table",
            "bench.snapshot",
            "--key",
            "id",
            "--json",
        ]
    )
    result = json.loads(merged)
    spark_s, written = timed(
        [sys.executable, "-c", PLAIN_SPARK, topics, str(work / "plain"), DRIVER_MEMORY]
    )
    expected = json.loads((data / "table.json").read_text())["live_rows"]
    counts = {"cdclake merge": result["upserts"], "plain spark": int(written.split()[-1])}
    if any(n != expected for n in counts.values()):
        raise SystemExit(f"expected {expected} rows, got {counts}")
    ratio = merge_s / spark_s
    return {
        "rows": expected,
        "input_bytes": sum(p.stat().st_size for p in (data / "topics").rglob("*.json")),
        "cdclake_merge_s": round(merge_s, 2),
        "plain_spark_s": round(spark_s, 2),
        "cdclake_vs_plain_spark": round(ratio, 3),
        "target_met": ratio <= TARGET_VS_SPARK,
    }


def machine() -> dict[str, Any]:
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "java": java.splitlines()[0] if java else None,
        "pyspark": pyspark.__version__,
        "load_average": list(os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    args = parser.parse_args()
    figures = measure(args.rows, args.data_dir)
    print(json.dumps(figures, indent=2), flush=True)
    result = {
        "machine": machine(),
        "target": {"cdclake_vs_plain_spark_at_most": TARGET_VS_SPARK},
        "run": figures,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.results_dir / f"initial_load-{stamp}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    met = "met" if figures["target_met"] else "NOT met"
    print(
        f"cdclake merge {figures['cdclake_merge_s']} s, plain Spark {figures['plain_spark_s']} s: "
        f"{figures['cdclake_vs_plain_spark']}x (target <= {TARGET_VS_SPARK}x: {met}); {out}"
    )


if __name__ == "__main__":
    main()
