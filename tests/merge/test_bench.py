"""The README's benchmark commands, on small inputs: they run, check themselves, write figures.

The throughput and first-load benches run as the README runs them (their own JVM: what they
compare is JVM work); the incremental and table-life benches run their measuring functions in
the tests' one Spark session."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def bench_module(repo_root: Path, name: str) -> Any:
    """``bench/<name>.py`` imported, to run in the tests' one Spark session."""
    path = repo_root / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_bench(script: Path, tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    """Run a bench script as the README does; (the JSON it recorded, what it printed)."""
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            *args,
            f"--data-dir={tmp_path / 'data'}",
            f"--results-dir={results}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [written] = results.glob(f"{script.stem}-*.json")
    return json.loads(written.read_text()), done.stdout


def test_merge_throughput_small_run_writes_consistent_results(
    repo_root: Path, tmp_path: Path
) -> None:
    figures, printed = run_bench(
        repo_root / "bench" / "merge_throughput.py",
        tmp_path,
        "--events=3000",
        "--keys=300",
        "--warm-up=0",
        "--no-scaling",
    )
    [run] = figures["runs"]
    assert run["events"] >= 3000 and run["keys"] == 300
    rate = run["events"] / run["cdclake_merge_s"]  # the rounded time: within a few percent
    assert abs(run["cdclake_events_per_s"] - rate) < 0.05 * rate
    assert run["cdclake_vs_duckdb"] > 0 and run["cdclake_vs_spark_window"] > 0
    assert set(run["cdclake_stages_s"]) == {"list", "read", "fold", "write", "services"}
    for contender in ("cdclake merge", "spark window"):
        spent = run["jvm"][contender]
        assert spent["cpu_s"] > 0 and spent["jit_s"] > 0 and spent["gc_s"] >= 0, spent
    assert isinstance(run["targets_met"], bool)
    assert figures["machine"]["cpus"] >= 1 and figures["machine"]["pyspark"].startswith("3.5")
    assert "targets" in printed


@pytest.mark.spark
@pytest.mark.hudi
def test_merge_incremental_small_run_writes_consistent_results(
    spark,  # type: ignore[no-untyped-def]
    repo_root: Path,
    tmp_path: Path,
) -> None:
    bench = bench_module(repo_root, "merge_incremental")
    incremental = bench.bench_incremental(
        spark, tmp_path, [100, 1000], 200, warm_up=False, table_types=("MERGE_ON_READ",)
    )
    assert list(incremental) == ["MERGE_ON_READ"]
    runs = incremental["MERGE_ON_READ"]["runs"]
    assert [run["result"]["files_applied"] for run in runs.values()] == [4, 4]
    assert all(run["result"]["events_read"] == 200 for run in runs.values())
    history = bench.bench_history(spark, tmp_path, 40)
    assert (history["files_applied"], history["noop_committed"]) == (40, False)
    assert 0 < history["checkpoint_bytes"] < history["names_as_json_bytes"] * 10


def test_initial_load_small_run_writes_consistent_results(repo_root: Path, tmp_path: Path) -> None:
    figures, printed = run_bench(repo_root / "bench" / "initial_load.py", tmp_path, "--rows=2000")
    run = figures["run"]
    assert run["rows"] == 2000 and run["input_bytes"] > 0
    ratio = run["cdclake_merge_s"] / run["plain_spark_s"]  # the rounded times: within a few %
    assert abs(run["cdclake_vs_plain_spark"] - ratio) < 0.05 * ratio
    assert run["target_met"] is (run["cdclake_vs_plain_spark"] <= 2.0)
    assert "target <= 2.0x" in printed


@pytest.fixture(scope="module")
def small_life(spark, repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:  # type: ignore[no-untyped-def]
    """Three soak runs, a table beside written with snappy instead of zstd."""
    bench = bench_module(repo_root, "table_life")
    return bench.life(
        spark,
        tmp_path_factory.mktemp("life"),
        runs=3,
        rows=300,
        changes=40,
        table_type="MERGE_ON_READ",
        beside={"hoodie.parquet.compression.codec": "snappy"},
    )


def _base_file_codecs(root: str) -> set[str]:
    import pyarrow.parquet as pq

    files = [p for p in Path(root).rglob("*.parquet") if ".hoodie" not in p.parts]
    metadata = [pq.ParquetFile(p).metadata for p in files]
    return {m.row_group(0).column(0).compression for m in metadata if m.num_row_groups}


@pytest.mark.spark
@pytest.mark.hudi
def test_table_life_small_run_writes_consistent_results(small_life: Any) -> None:
    figures = small_life
    assert [run["run"] for run in figures["runs"]] == [1, 2, 3]
    assert [read["after_run"] for read in figures["reads"]] == [3]
    assert figures["reads"][0]["rows"] == figures["expected_rows"]
    assert figures["targets"]["exact_rows"]["met"] is True
    assert figures["counts"]["pending_instants"] == []
    assert len(figures["counts"]["savepoints"]) == 1  # the day's first commit
    assert figures["targets"]["last_runs_vs_runs_11_to_50"]["met"] is None  # too few runs
    assert 0 < figures["counts"]["read_optimized_bytes"] <= figures["counts"]["data_bytes"]


@pytest.mark.spark
@pytest.mark.hudi
def test_table_life_beside_takes_the_same_changes_with_its_options_only(small_life: Any) -> None:
    beside = small_life["beside"]
    assert [run["run"] for run in beside["runs"]] == [1, 2, 3]
    assert beside["rows"] == small_life["expected_rows"]  # the same changes, the same rows
    assert _base_file_codecs(beside["table_path"]) == {"SNAPPY"}
    assert _base_file_codecs(small_life["table_path"]) == {"ZSTD"}
    assert beside["options"] == {"hoodie.parquet.compression.codec": "snappy"}


def test_table_life_paired_ratios_compare_the_baseline_and_the_last_runs(repo_root: Path) -> None:
    bench = bench_module(repo_root, "table_life")
    first = [{"seconds": 10.0}] * 50 + [{"seconds": 20.0}] * 40
    beside = [{"seconds": 9.0}] * 50 + [{"seconds": 15.0}] * 40
    assert bench.paired_ratios(first, beside) == {"runs_11_to_50": 0.9, "last_runs": 0.75}
    assert bench.paired_ratios(first[:12], beside[:12]) == {"runs_11_to_50": 0.9}


def test_table_life_kept_by_cadence_keeps_a_day_of_runs_then_gives_the_options_back(
    repo_root: Path,
) -> None:
    from cdclake_merge import hudi

    bench = bench_module(repo_root, "table_life")
    by_age = hudi.hudi_options
    with bench.kept_by_cadence(24, 15) as retained:
        options = hudi.hudi_options(database="d", table="t", record_key=("id",))
    assert retained == 96
    assert options["hoodie.clean.policy"] == "KEEP_LATEST_COMMITS"
    assert options["hoodie.cleaner.commits.retained"] == "96"
    assert int(options["hoodie.keep.min.commits"]) > 96
    assert hudi.hudi_options is by_age


def test_table_life_savepoints_by_cadence_take_a_day_of_runs_then_give_the_clock_back(
    repo_root: Path,
) -> None:
    import datetime as dt

    from cdclake_merge import hudi

    bench = bench_module(repo_root, "table_life")
    by_clock = hudi.savepoint_due, hudi.expired_savepoints
    began = dt.datetime(2026, 11, 28, 10, tzinfo=dt.UTC)

    def commit_of(run: int) -> str:  # a commit made a second after its run started
        return (began + dt.timedelta(seconds=10 * run + 1)).strftime("%Y%m%d%H%M%S%f")[:17]

    with bench.savepoints_by_cadence(60) as starts:  # 24 runs a day
        starts.extend(began + dt.timedelta(seconds=10 * run) for run in range(1, 50))
        now = dt.datetime.now(dt.UTC)
        due_at_24 = hudi.savepoint_due([commit_of(1)], commit_of(24), now)
        due_at_25 = hudi.savepoint_due([commit_of(1)], commit_of(25), now)
        expired = hudi.expired_savepoints([commit_of(1), commit_of(25), commit_of(49)], now, 1)
    assert (due_at_24, due_at_25) == (False, True)
    assert expired == [commit_of(1)]  # run 25 is a day before run 49: kept
    assert (hudi.savepoint_due, hudi.expired_savepoints) == by_clock
