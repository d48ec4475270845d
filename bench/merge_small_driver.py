"""Two million keys merged into an existing table by a driver at Spark's minimum memory.

    .venv/bin/python bench/merge_small_driver.py                 # 2M keys
    .venv/bin/python bench/merge_small_driver.py --keys 50000

Issue 25 asks for it with ``spark.driver.memory`` at Spark's minimum (450m: it refuses less
than 1.5 x its 300 MiB reserve); it takes far longer than a test may on a 2-core machine,
so it lives here. Generates a history of inserts, updates and deletes over ``--keys`` keys
(cached under bench/data/), merges its first half of change files with ``cdclake merge
--max-files`` (the existing table) and then the rest (every key of the run semi-joined to
the state: shuffled, not broadcast, past ``MAX_BROADCAST_KEYS``), both with
``CDCLAKE_DRIVER_MEMORY=450m``, exports the table and compares it with the generator's
expected rows. Prints the figures and writes ``bench/results/merge_small_driver-<ts>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DRIVER_MEMORY = "450m"


def generate(keys: int, root: Path) -> Path:
    from cdclake_merge.generator import GeneratorOptions, generate_files

    out = root / f"small-driver-{keys}"
    if not (out / "table.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        # Envelopes without schemas, and small files: a run reads each file whole, and with
        # the tasks in the driver's JVM (local mode) a 30 MB file does not fit in 450m.
        options = GeneratorOptions(
            events=2 * keys,
            keys=keys,
            seed=11,
            shape="envelope",
            partitions=4,
            flush_size=2_000,
            truncate=False,
        )
        generate_files(out, options)
    return out


def cli(*args: str) -> tuple[float, str]:
    environment = {**os.environ, "CDCLAKE_DRIVER_MEMORY": DRIVER_MEMORY}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cdclake.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=environment,
    )
    if done.returncode != 0:
        raise SystemExit(f"cdclake {args[0]} failed: {done.stderr[-3000:]}")
    return time.monotonic() - started, done.stdout


def measure(keys: int, root: Path) -> dict[str, Any]:
    data = generate(keys, root)
    meta = json.loads((data / "table.json").read_text())
    work = root / "work-small-driver"
    shutil.rmtree(work, ignore_errors=True)
    merge = ["merge", "--changes", str(data / "topics"), "--warehouse", str(work / "wh")]
    merge += ["--table", "bench.orders", "--key", ",".join(meta["key"]), "--json"]
    for column, spark_type in meta["column_types"].items():
        merge += ["--type", f"{column}={spark_type}"]
    first_s, first = cli(*merge, "--max-files", str(meta["files"] // 2))
    second_s, second = cli(*merge)
    out = work / "export.jsonl"
    cli("export", "--warehouse", str(work / "wh"), "--table", "bench.orders", "--out", str(out))
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    got = [{k: v for k, v in r.items() if not k.startswith("_")} for r in exported]
    expected = [json.loads(line) for line in (data / "expected.jsonl").read_text().splitlines()]
    return {
        "keys": keys,
        "events": meta["events"],
        "files": meta["files"],
        "driver_memory": DRIVER_MEMORY,
        "existing_table_run_s": round(first_s, 2),
        "merge_into_existing_s": round(second_s, 2),
        "second_run": json.loads(second),
        "first_run_upserts": json.loads(first)["upserts"],
        "rows": len(got),
        "table_right": got == expected,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=2_000_000)
    parser.add_argument("--root", type=Path, default=HERE / "data")
    args = parser.parse_args()
    figures = measure(args.keys, args.root)
    figures["load_average"] = list(os.getloadavg())
    print(json.dumps(figures, indent=2))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    target = HERE / "results" / f"merge_small_driver-{stamp}.json"
    target.write_text(json.dumps(figures, indent=2) + "\n")
    if not figures["table_right"]:
        raise SystemExit("the merged table differs from the generator's expected rows")


if __name__ == "__main__":
    main()
