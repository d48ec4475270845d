"""What a lake table's history costs (issue #51): run time and bytes against the same table
without it.

    .venv/bin/python bench/history_cost.py                      # 100,000 rows, 10,000 changes
    .venv/bin/python bench/history_cost.py --rows 30000 --pairs 1

Each pair makes two COPY_ON_WRITE tables of ``--rows`` generated rows (the merge's sink, one
commit, as ``merge_incremental.py`` makes them), one with ``history`` and one without, then
merges into each the same runs of ``--changes`` changes (updates, a tenth with a TOAST
placeholder, inserts, deletes; ``merge_incremental.incremental_changes``), the two tables'
runs alternating. The first run into a history table also writes the stored version of every
key it changes (history turned on over a table that had none); the figure is the later runs'.
Bytes are the files under the table, its sidecar and its history table after the last run.

Prints the figures and writes ``bench/results/history_cost-<timestamp>.json`` with the machine
and its load. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from merge_incremental import (
    CHANGES,
    incremental_changes,
    machine,
    make_table,
    timed_run,
    write_changes,
)

HERE = Path(__file__).resolve().parent


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def bench_pair(spark: Any, work: Path, rows: int, changes: int, runs: int) -> dict[str, Any]:
    tables = {}
    for kept in (False, True):
        target = work / ("with" if kept else "without")
        shutil.rmtree(target, ignore_errors=True)
        sink, table = make_table(spark, target, "COPY_ON_WRITE", rows)
        # history turned on over the table made without it (open_sink's history=1, which
        # make_table does not pass)
        sink.history = kept
        tables[kept] = (target, sink, table)
    seconds: dict[bool, list[float]] = {False: [], True: []}
    for run in range(runs):
        lines = incremental_changes(rows, seed=rows + run, changes=changes)
        order = (False, True) if run % 2 == 0 else (True, False)
        for kept in order:
            target, sink, table = tables[kept]
            write_changes(target / "changes", [shift(t, run) for t in lines], 4, 1000)
            seconds[kept].append(timed_run(spark, sink, table, target / "changes")["seconds"])
            print(f"run {run + 1} history={kept}: {seconds[kept][-1]} s", flush=True)
    figures: dict[str, Any] = {}
    for kept, (target, sink, _) in tables.items():
        warehouse = target / "warehouse" / "bench.db"
        name = Path(sink.root).name
        figures["with" if kept else "without"] = {
            "run_s": seconds[kept],
            "later_runs_median_s": statistics.median(seconds[kept][1:]),
            "table_bytes": folder_bytes(warehouse / name),
            "sidecar_bytes": folder_bytes(warehouse / "_cdclake" / name),
            "history_bytes": folder_bytes(warehouse / f"{name}_history"),
        }
    without, with_ = figures["without"], figures["with"]
    figures["run_time_ratio"] = round(
        with_["later_runs_median_s"] / without["later_runs_median_s"], 2
    )
    figures["history_bytes_per_table_byte"] = round(
        with_["history_bytes"] / without["table_bytes"], 2
    )
    for target, _, _ in tables.values():
        shutil.rmtree(target, ignore_errors=True)
    return figures


def shift(line: str, run: int) -> str:
    """A run's changes after the last run's: their LSNs moved past them (the same keys)."""
    event = json.loads(line)
    lsn = event["source"]["lsn"] + run * 1_000_000
    event["source"]["lsn"] = lsn
    event["source"]["sequence"] = json.dumps([str(lsn), str(lsn)])
    event["source"]["ts_ms"] += run * 60_000  # a run a minute
    return json.dumps(event, separators=(",", ":"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=CHANGES, help="changes per run")
    parser.add_argument("--runs", type=int, default=3, help="runs into each table of a pair")
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--data-dir", type=Path, default=HERE / "data" / "history")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    args = parser.parse_args()

    from cdclake_merge.session import local_session

    args.data_dir.mkdir(parents=True, exist_ok=True)
    spark = local_session(str(args.data_dir / "session"))
    pairs = [
        bench_pair(spark, args.data_dir / f"pair-{n}", args.rows, args.changes, args.runs)
        for n in range(args.pairs)
    ]
    result = {
        "rows": args.rows,
        "changes": args.changes,
        "runs": args.runs,
        "pairs": pairs,
        "machine": machine(spark),
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    print(json.dumps(pairs, indent=2))
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (args.results_dir / f"history_cost-{stamp}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
