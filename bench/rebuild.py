"""How long a rebuild beside the live table takes (issue #49): ``--rows`` snapshot reads applied
to the next generation, then the swap of the catalog entry.

    .venv/bin/python bench/rebuild.py                  # 1M rows
    .venv/bin/python bench/rebuild.py --rows 100000

In one process, as a rebuild's Glue run works: a live table (generation 1) of the first change
file, the rebuild begun (the change folders' ends recorded, as ``cdclake rebuild`` does before
its signal), then ``--rows`` schema-included Debezium snapshot reads (``op: r``, one per key;
cached under bench/data/ as bench/initial_load.py makes them) written after those ends, as the
incremental snapshot's reads arrive, and ``rebuild_step`` run until it has swapped the
generation in (the snapshot taken as finished: ``--snapshot_done``, the operator's word; the
notifications are read in tests). The figure is the rebuild's runs and the swap, each timed,
and the rows the live generation holds after it, which must be the expected rows. Prints the
figures and writes ``bench/results/rebuild-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from initial_load import generate, machine, read_into_page_cache

HERE = Path(__file__).resolve().parent
TABLE = "bench.rebuilt"
# Change files written after the rebuild began sort after every listed one in their folder.
AFTER_THE_SIGNAL = 1_000_000_000


def measure(rows: int, root: Path) -> dict[str, Any]:
    from cdclake_merge.generations import begin_rebuild, read_generations
    from cdclake_merge.job import MergeOptions, run_merge
    from cdclake_merge.rebuild import rebuild_step
    from cdclake_merge.session import local_session
    from cdclake_merge.sink import open_sink
    from cdclake_merge.storage import LocalFileSystem

    data = generate(rows, root)
    read_into_page_cache(data)
    work = root / "work-rebuild"
    shutil.rmtree(work, ignore_errors=True)
    changes, warehouse = work / "topics", work / "warehouse"
    spark = local_session(str(warehouse), app_name="bench-rebuild")
    fs = LocalFileSystem()

    def generation_sink(generation: int, catalog: bool) -> Any:
        return open_sink(
            warehouse=str(warehouse),
            table=TABLE,
            key=("id",),
            fs=fs,
            spark_factory=lambda: spark,
            sync_catalog=catalog,
            generation=generation,
        )

    files = sorted((data / "topics").rglob("*.json"))
    first = files[0]
    live_file = changes / first.relative_to(data / "topics")
    live_file.parent.mkdir(parents=True)
    shutil.copyfile(first, live_file)
    options = MergeOptions(table=TABLE, key=("id",), changes=str(changes))
    started = time.monotonic()
    run_merge(lambda: spark, fs, generation_sink(1, True), options)
    live_s = time.monotonic() - started

    # The rebuild begins (its ends recorded) before the snapshot's reads are written.
    home = generation_sink(1, False)
    begin_rebuild(fs, home.sidecar, str(changes))
    for path in files:
        topic, part, offset = path.stem.rsplit("+", 2)
        renamed = f"{topic}+{part}+{int(offset) + AFTER_THE_SIGNAL:010d}.json"
        target = changes / path.parent.relative_to(data / "topics") / renamed
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)

    runs: list[dict[str, Any]] = []
    started = time.monotonic()
    while True:
        run_started = time.monotonic()
        step = rebuild_step(lambda: spark, fs, generation_sink, options, snapshot_done=True)
        runs.append({"seconds": round(time.monotonic() - run_started, 2), **step.as_dict()})
        if step.swapped or len(runs) > 5:
            break
    rebuild_s = time.monotonic() - started
    state = read_generations(fs, home.sidecar)
    held = spark.table(TABLE).count()
    expected = json.loads((data / "table.json").read_text())["live_rows"]
    spark.stop()
    if state.live != 2 or held != expected:
        raise SystemExit(f"expected generation 2 live with {expected} rows: {state}, {held} rows")
    return {
        "rows": expected,
        "input_bytes": sum(p.stat().st_size for p in files),
        "live_table_s": round(live_s, 2),
        "rebuild_s": round(rebuild_s, 2),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    args = parser.parse_args()
    load_before = list(os.getloadavg())
    figures = measure(args.rows, args.data_dir)
    record = {
        "machine": {**machine(), "load_before": load_before},
        "run": figures,
        "at": dt.datetime.now(dt.UTC).isoformat(),
    }
    print(
        f"rebuild of {figures['rows']:,} rows: {figures['rebuild_s']} s in "
        f"{len(figures['runs'])} run(s), swap included"
    )
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    out = args.results_dir / f"rebuild-{stamp}.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"results → {out}")


if __name__ == "__main__":
    main()
