"""A lake table's life in one process: N merge runs with table services, and what it leaves.

    .venv/bin/python bench/table_life.py --runs 200 --rows 200000 --changes 2000 \\
        --table-type MERGE_ON_READ --out /tmp/life-mor
    .venv/bin/python bench/table_life.py --runs 150 --rows 200000 --changes 2000 \\
        --table-type COPY_ON_WRITE --out /tmp/life-cow

A table of ``--rows`` generated rows (committed by the merge's own sink), then ``--runs`` runs
of ``--changes`` changes each through ``run_merge`` exactly as a Glue run makes them: 80 %
updates of live keys (a tenth with a TOAST placeholder), 10 % inserts, 10 % deletes, and every
tenth run a primary-key change (a delete and an insert). Compaction, cleaning, archival and
the day's savepoint run as they run in production (inline, the writer's options). Every run is
timed; a full snapshot read (the rows Athena would see) is timed after run 10 and after the
last.

Hudi's cleaner keeps file versions by age (``lake.retain_hours``) on the machine's clock, and
the soak makes in an hour what a table makes in weeks. So the soak keeps, by count, what the
cleaner would keep by age at the table's cadence: ``--retain-hours`` (24) of runs every
``--cadence-minutes`` (15) is 96 commits (``KEEP_LATEST_COMMITS``, the only option changed;
archival kept behind it), and takes the day's savepoint and expires those past
``--savepoint-days`` (7) by the same clock: a run is ``--cadence-minutes`` of the table's
life, so a savepoint is taken every 96 runs and 7 are kept over 672. Then the objects the
table holds are counted: files under the table and their bytes (all of them, what a read of
the newest slices scans, ``.hoodie``), the active and archived timeline, pending instants,
base-file versions and log files per file group, and the merge's own checkpoints and
tombstone sets.

With ``--beside OPTION=VALUE`` (repeatable) a second table takes the same changes in the same
process with those Hudi writer options on top, the two runs of each change set in alternating
order, so a setting is measured against a baseline beside it under the same load: its runs,
counts and the ratio of its runs to the first table's (runs 11 to 50, and the last 40) are
recorded under ``beside``.

Writes ``OUT/table_life.json`` (``table_path``, ``expected_rows``, ``runs``, ``reads``,
``counts``, ``targets``) and prints the figures. Never asserted on time in tests
(``tests/merge/test_bench.py`` runs it small).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as dt
import json
import math
import os
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from merge_incremental import event, machine, make_table, timed_run, write_changes  # noqa: E402

FIRST_MEASURED_RUN, LAST_BASELINE_RUN = 11, 50  # the baseline: runs 11 to 50
TARGETS = {"last_runs_ratio": 1.25, "read_ratio": 1.25, "base_versions": 25, "log_files": 12}
PARTITIONS = 4
# A Hudi base file is <fileId>_<writeToken>_<instant>.parquet; a log file is
# .<fileId>_<baseInstant>.log.<version>_<writeToken>.
BASE_FILE = re.compile(r"^(?P<group>[0-9a-f-]+-\d+)_[^_]+_(?P<instant>\d+)\.parquet$")
LOG_FILE = re.compile(r"^\.(?P<group>[0-9a-f-]+-\d+)_(?P<instant>\d+)\.log\.\d+_\S+$")


class Keys:
    """The live keys, for picking one at random and removing it in constant time."""

    def __init__(self, rows: int) -> None:
        self.live = list(range(rows))
        self.where = {key: i for i, key in enumerate(self.live)}
        self.next = rows

    def pick(self, rng: random.Random) -> int:
        return self.live[rng.randrange(len(self.live))]

    def add(self) -> int:
        key, self.next = self.next, self.next + 1
        self.where[key] = len(self.live)
        self.live.append(key)
        return key

    def remove(self, key: int) -> None:
        i, last = self.where.pop(key), self.live.pop()
        if last != key:
            self.live[i], self.where[last] = last, i


def run_changes(keys: Keys, rng: random.Random, run: int, changes: int) -> list[str]:
    """One run's changes, in LSN order, keeping ``keys`` what the source holds after them."""
    lines, lsn = [], 1_000_000 + run * changes * 2
    for _ in range(changes):
        lsn += 1
        kind = rng.random()
        if kind < 0.8:
            lines.append(event("u", keys.pick(rng), lsn, toast=rng.random() < 0.1))
        elif kind < 0.9:
            lines.append(event("c", keys.add(), lsn))
        elif len(keys.live) > 1:
            key = keys.pick(rng)
            keys.remove(key)
            lines.append(event("d", key, lsn))
    if run % 10 == 0:  # a primary-key change: Debezium's delete of the old key, then the new
        old = keys.pick(rng)
        keys.remove(old)
        lines.append(event("d", old, lsn + 1))
        lines.append(event("c", keys.add(), lsn + 2))
    return lines


def timed_read(spark: Any, root: str) -> tuple[float, int]:
    """A full snapshot read of the live rows, as a query engine makes it; (seconds, rows)."""
    started = time.perf_counter()
    rows = (
        spark.read.format("hudi")
        .load("file://" + root)
        .where("not _hoodie_is_deleted")
        .select("id", "customer", "amount", "note")
        .count()
    )
    return round(time.perf_counter() - started, 2), int(rows)


def object_counts(root: Path, sidecar: Path) -> dict[str, Any]:
    """What the table holds on storage after its life."""
    timeline = root / ".hoodie"
    active = [p.name for p in timeline.iterdir() if p.is_file() and not p.name.startswith(".")]
    completed = {n.split(".")[0] for n in active if not n.endswith((".requested", ".inflight"))}
    pending = sorted(
        n
        for n in active
        if n.endswith((".requested", ".inflight")) and n.split(".")[0] not in completed
    )
    bases: dict[str, set[str]] = defaultdict(set)
    logs: dict[str, int] = defaultdict(int)
    data_files = 0
    for path in root.rglob("*"):
        if ".hoodie" in path.parts or not path.is_file() or path.name.endswith(".crc"):
            continue
        data_files += 1
        if base := BASE_FILE.match(path.name):
            bases[base["group"]].add(base["instant"])
        elif log := LOG_FILE.match(path.name):
            logs[log["group"]] += 1
    archived = timeline / "archived"
    return storage_bytes(root) | {
        "data_files": data_files,
        "file_groups": len(bases.keys() | logs.keys()),
        "max_base_versions_per_group": max((len(v) for v in bases.values()), default=0),
        "max_log_files_per_group": max(logs.values(), default=0),
        "active_timeline_instants": len(completed),
        "active_timeline_files": len(active),
        "archived_files": len([p for p in archived.iterdir() if not p.name.startswith(".")])
        if archived.is_dir()
        else 0,
        "pending_instants": pending,
        "savepoints": sorted(n for n in active if n.endswith(".savepoint")),
        "checkpoints": len(list((sidecar / "checkpoints").glob("v*.json"))),
        "tombstone_sets": len(list((sidecar / "tombstones").glob("v*"))),
    }


def storage_bytes(root: Path) -> dict[str, int]:
    """Bytes the table keeps: every data file, what a snapshot read of its newest slices
    scans (each file group's newest base file, and on MERGE_ON_READ the log files after it),
    and ``.hoodie`` (timeline, archive, metadata table with its record index)."""
    newest: dict[str, tuple[str, int]] = {}
    logs: dict[str, list[tuple[str, int]]] = defaultdict(list)
    data = timeline = 0
    for path in root.rglob("*"):
        if not path.is_file() or path.name.endswith(".crc"):
            continue
        size = path.stat().st_size
        if ".hoodie" in path.parts:
            timeline += size
            continue
        data += size
        if base := BASE_FILE.match(path.name):
            if base["group"] not in newest or newest[base["group"]][0] < base["instant"]:
                newest[base["group"]] = (base["instant"], size)
        elif log := LOG_FILE.match(path.name):
            logs[log["group"]].append((log["instant"], size))
    read_optimized = sum(size for _, size in newest.values())
    snapshot = read_optimized + sum(
        size
        for group, found in logs.items()
        for instant, size in found
        if instant >= newest.get(group, ("", 0))[0]
    )
    return {
        "data_bytes": data,
        "read_optimized_bytes": read_optimized,
        "snapshot_bytes": snapshot,
        "hoodie_bytes": timeline,
    }


def targets(
    runs: list[dict[str, Any]],
    reads: list[dict[str, Any]],
    counts: dict[str, Any],
    *,
    expected_rows: int,
    rows_read: int,
) -> dict[str, Any]:
    """Each of the issue's targets: its figure and whether it is met (None: too few runs)."""
    seconds = [r["seconds"] for r in runs]
    baseline = seconds[FIRST_MEASURED_RUN - 1 : LAST_BASELINE_RUN]
    last = seconds[-len(baseline) :] if len(seconds) > LAST_BASELINE_RUN else []
    run_ratio = round(statistics.mean(last) / statistics.mean(baseline), 2) if last else None
    read_ratio = round(reads[-1]["seconds"] / reads[0]["seconds"], 2) if len(reads) > 1 else None
    return {
        "last_runs_vs_runs_11_to_50": {
            "figure": run_ratio,
            "met": None if run_ratio is None else run_ratio <= TARGETS["last_runs_ratio"],
        },
        "last_read_vs_first": {
            "figure": read_ratio,
            "met": None if read_ratio is None else read_ratio <= TARGETS["read_ratio"],
        },
        "no_pending_instant": {
            "figure": counts["pending_instants"],
            "met": not counts["pending_instants"],
        },
        "base_versions_per_group": {
            "figure": counts["max_base_versions_per_group"],
            "met": counts["max_base_versions_per_group"] <= TARGETS["base_versions"],
        },
        "log_files_per_group": {
            "figure": counts["max_log_files_per_group"],
            "met": counts["max_log_files_per_group"] <= TARGETS["log_files"],
        },
        "exact_rows": {"figure": rows_read, "met": rows_read == expected_rows},
    }


@contextlib.contextmanager
def kept_by_cadence(retain_hours: int, cadence_minutes: int) -> Iterator[int]:
    """Within it, the writer keeps by commit count what the cleaner keeps by age at this
    cadence; yields the commits kept. The writer's own options come back after it."""
    from cdclake_merge import hudi

    retained = max(1, math.ceil(retain_hours * 60 / cadence_minutes))
    by_age = hudi.hudi_options

    def by_count(**settings: Any) -> dict[str, str]:
        options = by_age(**settings)
        options["hoodie.clean.policy"] = "KEEP_LATEST_COMMITS"
        options["hoodie.cleaner.commits.retained"] = str(retained)
        # Archival stays behind the cleaner's earliest retained commit, as it does by age.
        options["hoodie.keep.min.commits"] = str(max(30, retained + 1))
        options["hoodie.keep.max.commits"] = str(max(40, retained + 11))
        return options

    hudi.hudi_options = by_count
    try:
        yield retained
    finally:
        hudi.hudi_options = by_age


@contextlib.contextmanager
def savepoints_by_cadence(cadence_minutes: int) -> Iterator[list[dt.datetime]]:
    """Within it, the day's savepoint and its expiry follow the soak's runs, not the clock:
    run ``n`` happens ``n * cadence_minutes`` into the table's life, and a commit belongs to
    the run that started last before it. Yields the list each run's start is appended to."""
    from cdclake_merge import hudi, recovery

    starts: list[dt.datetime] = []
    cadence = dt.timedelta(minutes=cadence_minutes)
    epoch = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def simulated(instant: str) -> dt.datetime:
        return epoch + cadence * bisect.bisect_right(starts, recovery.instant_time(instant))

    def due(savepoints: list[str], newest_commit: str, now: dt.datetime) -> bool:
        if not savepoints:
            return True
        newest = max(savepoints)
        since = simulated(newest_commit) - simulated(newest)
        return newest != newest_commit and since >= recovery.SAVEPOINT_EVERY

    def expired(savepoints: list[str], now: dt.datetime, keep_days: int) -> list[str]:
        horizon = epoch + cadence * len(starts) - dt.timedelta(days=keep_days)
        return [s for s in sorted(savepoints)[:-1] if simulated(s) < horizon]

    by_clock = hudi.savepoint_due, hudi.expired_savepoints
    hudi.savepoint_due, hudi.expired_savepoints = due, expired  # type: ignore[assignment]
    try:
        yield starts
    finally:
        hudi.savepoint_due, hudi.expired_savepoints = by_clock


@contextlib.contextmanager
def extra_options() -> Iterator[dict[str, str]]:
    """Within it, the writer's options take what the yielded dict holds on top (empty: none)."""
    from cdclake_merge import hudi

    extra: dict[str, str] = {}
    underlying = hudi.hudi_options

    def with_extra(**settings: Any) -> dict[str, str]:
        return underlying(**settings) | extra

    hudi.hudi_options = with_extra
    try:
        yield extra
    finally:
        hudi.hudi_options = underlying


def paired_ratios(runs: list[dict[str, Any]], beside: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean seconds of the table beside over the first's, on runs 11 to 50 and the last 40."""
    first, second = [r["seconds"] for r in runs], [r["seconds"] for r in beside]
    windows = {"runs_11_to_50": slice(FIRST_MEASURED_RUN - 1, LAST_BASELINE_RUN)}
    if len(first) > LAST_BASELINE_RUN:
        windows["last_runs"] = slice(-(LAST_BASELINE_RUN - FIRST_MEASURED_RUN + 1), None)
    return {
        name: round(statistics.mean(second[window]) / statistics.mean(first[window]), 3)
        for name, window in windows.items()
        if first[window]
    }


def life(
    spark: Any,
    out: Path,
    *,
    runs: int,
    rows: int,
    changes: int,
    table_type: str,
    seed: int = 1,
    retain_hours: int = 24,
    cadence_minutes: int = 15,
    savepoint_days: int = 7,
    beside: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The soak in ``spark``: its figures (what ``main`` records); with ``beside``, a second
    table's too, written with those options on top (``--beside``)."""
    out.mkdir(parents=True, exist_ok=True)
    with (
        kept_by_cadence(retain_hours, cadence_minutes) as retained,
        savepoints_by_cadence(cadence_minutes) as starts,
        extra_options() as extra,
    ):
        tables = {"": make_table(spark, out, table_type, rows, savepoint_days=savepoint_days)}
        if beside is not None:
            extra.update(beside)
            tables["beside"] = make_table(
                spark, out / "beside", table_type, rows, savepoint_days=savepoint_days
            )
        sink = tables[""][0]
        keys, rng = Keys(rows), random.Random(seed)
        timings: dict[str, list[dict[str, Any]]] = {name: [] for name in tables}
        reads: list[dict[str, Any]] = []
        rows_read = 0
        for run in range(1, runs + 1):
            lines = run_changes(keys, rng, run, changes)
            starts.append(dt.datetime.now(dt.UTC))  # both tables' commits belong to this run
            for name in sorted(tables, reverse=run % 2 == 0):  # who goes first alternates
                target, table = tables[name]
                folder = out / name / "changes"
                write_changes(folder, lines, PARTITIONS, per_file=500)
                extra.clear()
                extra.update(beside if name and beside else {})
                timed = timed_run(spark, target, table, folder)
                timings[name].append(
                    {
                        "run": run,
                        "seconds": timed["seconds"],
                        "stages": timed["stages"],
                        "load": round(os.getloadavg()[0], 2),  # other work on the machine
                    }
                )
                print(
                    f"run {run}{' ' + name if name else ''}: {timed['seconds']:.2f} s "
                    f"{timed['stages']}",
                    flush=True,
                )
            if run in (10, runs):
                seconds, rows_read = timed_read(spark, sink.root)
                reads.append({"after_run": run, "seconds": seconds, "rows": rows_read})
                print(f"read after run {run}: {seconds:.2f} s, {rows_read} rows", flush=True)
    counts = object_counts(Path(sink.root), Path(sink.sidecar))
    expected = len(keys.live)
    figures = {
        "table_path": sink.root,
        "table_type": table_type,
        "expected_rows": expected,
        "rows": rows,
        "changes_per_run": changes,
        "retain_hours": retain_hours,
        "cadence_minutes": cadence_minutes,
        "commits_retained": retained,
        "savepoint_days": savepoint_days,
        "runs": timings[""],
        "reads": reads,
        "counts": counts,
        "targets": targets(timings[""], reads, counts, expected_rows=expected, rows_read=rows_read),
        "machine": machine(spark),
        "at": dt.datetime.now(dt.UTC).isoformat(),
    }
    if beside is not None:
        other = tables["beside"][0]
        figures["beside"] = {
            "options": beside,
            "table_path": other.root,
            "runs": timings["beside"],
            "counts": object_counts(Path(other.root), Path(other.sidecar)),
            "rows": timed_read(spark, other.root)[1],
            "ratio": paired_ratios(timings[""], timings["beside"]),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--changes", type=int, default=2_000)
    parser.add_argument(
        "--table-type", choices=("MERGE_ON_READ", "COPY_ON_WRITE"), default="MERGE_ON_READ"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--retain-hours", type=int, default=24, help="lake.retain_hours")
    parser.add_argument("--cadence-minutes", type=int, default=15, help="a run every …")
    parser.add_argument("--savepoint-days", type=int, default=7, help="lake.savepoint_days")
    parser.add_argument(
        "--beside",
        action="append",
        metavar="OPTION=VALUE",
        help="a second table with this Hudi writer option on top, runs alternating",
    )
    args = parser.parse_args()
    beside = dict(o.split("=", 1) for o in args.beside) if args.beside else None

    from cdclake_merge.session import local_session

    args.out.mkdir(parents=True, exist_ok=True)
    spark = local_session(args.out / "warehouse", app_name="table-life")
    figures = life(
        spark,
        args.out,
        runs=args.runs,
        rows=args.rows,
        changes=args.changes,
        table_type=args.table_type,
        seed=args.seed,
        retain_hours=args.retain_hours,
        cadence_minutes=args.cadence_minutes,
        savepoint_days=args.savepoint_days,
        beside=beside,
    )
    spark.stop()
    (args.out / "table_life.json").write_text(json.dumps(figures, indent=2) + "\n")
    summary = {"counts": figures["counts"], "targets": figures["targets"]}
    if "beside" in figures:
        summary["beside"] = {k: figures["beside"][k] for k in ("options", "rows", "ratio")}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
