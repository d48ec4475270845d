"""A bounded driver: nothing the merge collects or broadcasts grows with the data.

The small-driver run is the CLI in its own process (the suite shares one SparkSession whose
memory is fixed when it starts), with ``spark.driver.memory`` at about Spark's minimum
(it refuses less than 450 MiB: 1.5 x its 300 MiB reserve).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.debezium import TableSpec
from cdclake_merge.hudi import MAX_NAMED_KEYS, HudiTable
from cdclake_merge.job import RunResult, read_and_count
from cdclake_merge.transforms import MANY_REASONS, run_summary
from tests.merge.support import Lake, envelope, lines_frame, parsed_in_python

SMALL_DRIVER = "450m"
MILLION = 1_000_000
# The Python driver's peak with every bad line's reason collected was 790 MB (1M reasons,
# 450m JVM); counted by kind it is about 165 MB, most of it pyspark itself.
DRIVER_PEAK_LIMIT_KB = 400 * 1024
# `cdclake` as the console script runs it, writing its own peak to the file named first: the
# Python process alone (the JVM it starts is another process), as VmHWM, the high-water mark
# of this program's memory. Not ru_maxrss: that keeps the forking parent's size across exec,
# and the parent here is the test session, hundreds of MB into a full run.
MEASURED_CLI = """
import atexit, re, sys
from pathlib import Path
peak = Path(sys.argv.pop(1))
def hwm():
    status = Path("/proc/self/status").read_text()
    peak.write_text(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))
atexit.register(hwm)
from cdclake.cli import main
main()
"""


def _note_line(i: int) -> str:
    """A compact insert of key ``i`` whose ``note`` is text of its own."""
    return f'{{"op":"c","after":{{"id":{i},"note":"x{i:07d}"}},"source":{{"lsn":{1000 + i}}}}}'


def _bad_note_lines(changes: Path, count: int, files: int) -> None:
    """``count`` lines whose ``note`` is text, each value its own, in ``files`` files.

    Written as text (not through json.dumps) so that a million take a second.
    """
    folder = changes / "topics" / "app.public.orders" / "partition=0"
    folder.mkdir(parents=True, exist_ok=True)
    per = count // files
    for f in range(files):
        (folder / f"app.public.orders+0+{f * per:010d}.json").write_text(
            "".join(_note_line(i) + "\n" for i in range(f * per, (f + 1) * per))
        )


@pytest.fixture(scope="module")
def million_bad_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``cdclake merge``, 450m driver, of a million lines ``--type note=double`` makes bad."""
    root = tmp_path_factory.mktemp("million-bad")
    _bad_note_lines(root / "changes", MILLION, files=50)
    args = [sys.executable, "-c", MEASURED_CLI, str(root / "peak_kb"), "merge"]
    args += ["--changes", str(root / "changes"), "--warehouse", str(root / "wh")]
    args += ["--table", "cli.orders", "--key", "id", "--type", "note=double", "--json"]
    started = time.monotonic()
    done = subprocess.run(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CDCLAKE_DRIVER_MEMORY": SMALL_DRIVER},
        check=False,
    )
    return {
        "returncode": done.returncode,
        "stderr": done.stderr,
        "seconds": time.monotonic() - started,
        "peak_kb": int((root / "peak_kb").read_text()),
        "quarantine": root / "wh" / "_quarantine" / "cli.orders" / "failed-v00000001",
    }


@pytest.mark.slow
@pytest.mark.hudi
def test_merge_million_distinct_bad_lines_small_driver_fails_too_many_bad_records(
    million_bad_run: dict[str, Any],
) -> None:
    assert million_bad_run["returncode"] == 1, million_bad_run["stderr"][-3000:]
    assert (
        f"{MILLION} of {MILLION} lines of cli.orders could not be applied"
        in (million_bad_run["stderr"])
    )
    assert "column 'note': expected a number, got 'x" in million_bad_run["stderr"]


@pytest.mark.slow
@pytest.mark.hudi
def test_merge_million_distinct_bad_lines_driver_peak_stays_small(
    million_bad_run: dict[str, Any],
) -> None:
    assert million_bad_run["peak_kb"] < DRIVER_PEAK_LIMIT_KB, million_bad_run


@pytest.mark.slow
@pytest.mark.hudi
def test_merge_million_distinct_bad_lines_quarantine_keeps_every_full_reason(
    million_bad_run: dict[str, Any],
) -> None:
    reasons = [
        json.loads(text)["reason"]
        for part in million_bad_run["quarantine"].glob("part-*.json")
        for text in part.read_text().splitlines()
    ]
    assert len(reasons) == MILLION
    assert len(set(reasons)) == MILLION
    assert "column 'note': expected a number, got 'x0000007'" in reasons


# --- the run's summary: counted by reason kind (shared session) ----------------------------------


def _parsed(spark: Any, texts: list[str], spec: TableSpec) -> Any:
    return parsed_in_python(lines_frame(spark, texts), spec)


@pytest.mark.spark
def test_run_summary_distinct_bad_values_one_row_per_reason_kind(spark: Any) -> None:
    texts = [_note_line(i) for i in range(40)]
    summary = run_summary(_parsed(spark, texts, TableSpec(("id",), {"note": "double"})))
    rows = [(r["kind"], r["reason"], r["count"]) for r in summary.collect()]
    assert [r for r in rows if r[0] == "bad"] == [("bad", "column 'note'", 40)]


@pytest.mark.spark
def test_read_and_count_kinds_past_the_cap_are_counted_as_one(spark: Any) -> None:
    # An unknown op names its value before any ':': as many kinds as lines.
    texts = [f'{{"op":"z{i}","after":{{"id":{i}}},"source":{{"lsn":{10 + i}}}}}' for i in range(30)]
    texts += ["", "null"]
    result = RunResult(table="t.orders", version=0)
    read_and_count(_parsed(spark, texts, TableSpec(("id",))), result, max_rows=10)
    assert (result.quarantine_reasons, result.skipped, result.lines) == ({MANY_REASONS: 30}, 2, 32)


# --- the state lookup: broadcast below a size, shuffled above (shared session, small frames) -----


def _semi_joins(frame: Any) -> list[str]:
    """The physical operator of each semi join of the keys, as planned (before any run)."""
    plan = frame._jdf.queryExecution().executedPlan().toString()
    return [
        line.split("Join")[0].split()[-1] + "Join"
        for line in plan.splitlines()
        if "LeftSemi" in line
    ]


def _lake_with_tombstones(spark: Any, root: Path, key: tuple[str, ...], count: int) -> Lake:
    lake = Lake(spark, root, key=key)
    after = [{"id": i, "line": i % 2, "name": f"n{i}"} for i in range(count)]
    events = [envelope("c", lsn=10 + i, after=row) for i, row in enumerate(after)]
    events.append(envelope("d", lsn=10 + count, before=after[0]))
    lake.write("a.json", events)
    lake.merge()
    return lake


def _hudi(lake: Lake) -> HudiTable:
    assert isinstance(lake.sink, HudiTable)  # lookup_state's threshold is the Hudi sink's
    return lake.sink


def _keys(spark: Any, key: tuple[str, ...], count: int) -> Any:
    rows = [(i, i % 2) for i in range(count)]  # a local relation: no column folds to a constant
    return spark.createDataFrame(rows, "id bigint, line bigint").select(*key)


@pytest.fixture(scope="module")
def composite_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    return _lake_with_tombstones(spark, tmp_path_factory.mktemp("composite"), ("id", "line"), 30)


@pytest.mark.spark
@pytest.mark.hudi
def test_lookup_state_composite_keys_below_threshold_are_broadcast(
    spark: Any, composite_lake: Lake
) -> None:
    sink = _hudi(composite_lake)
    keys = _keys(spark, ("id", "line"), 20)
    frame = sink.lookup_state(spark, sink.load(), keys, None, max_broadcast_keys=20)
    joins = _semi_joins(frame)  # the live rows, their orders, the tombstones
    assert (set(joins), len(joins)) == ({"BroadcastHashJoin"}, 3)


@pytest.mark.spark
@pytest.mark.hudi
def test_lookup_state_composite_keys_above_threshold_are_shuffled(
    spark: Any, composite_lake: Lake
) -> None:
    sink = _hudi(composite_lake)
    keys = _keys(spark, ("id", "line"), 20)
    frame = sink.lookup_state(spark, sink.load(), keys, None, max_broadcast_keys=19)
    joins = _semi_joins(frame)
    assert (set(joins), len(joins)) == ({"SortMergeJoin"}, 3)


@pytest.mark.spark
@pytest.mark.hudi
def test_lookup_state_shuffled_keys_read_the_same_state_as_broadcast(
    spark: Any, composite_lake: Lake
) -> None:
    sink = _hudi(composite_lake)
    state = sink.load()
    keys = _keys(spark, ("id", "line"), 20)
    rows = [
        sorted(
            (r["id"], r["_cdc_deleted"])
            for r in sink.lookup_state(spark, state, keys, None, max_broadcast_keys=limit).collect()
        )
        for limit in (19, 20)
    ]
    assert rows[0] == rows[1] == [(0, True), *((i, False) for i in range(1, 20))]


@pytest.mark.spark
@pytest.mark.hudi
def test_lookup_state_one_column_keys_above_threshold_are_shuffled(
    spark: Any, tmp_path: Path
) -> None:
    count = MAX_NAMED_KEYS + 10  # past naming them in the read, to the semi join
    lake = _lake_with_tombstones(spark, tmp_path, ("id",), count)
    sink = _hudi(lake)
    frame = sink.lookup_state(
        spark, sink.load(), _keys(spark, ("id",), count), None, max_broadcast_keys=count - 1
    )
    joins = _semi_joins(frame)
    assert (set(joins), len(joins)) == ({"SortMergeJoin"}, 3)
