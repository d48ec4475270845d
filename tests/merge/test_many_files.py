"""10,000 small change files in one run, in a real `cdclake merge` process with a small driver.

The S3 sink flushes a file per `flush.size` records or per rotation interval, so a quiet
table or a backlog after an outage produces many tiny files. One run must take them all
without the driver running out of memory; the driver is held to 512 MiB here so that
per-file state on the driver (listings, plans, one partition per file) shows up as a failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdclake_merge.generator import GeneratorOptions, generate_files
from tests.merge.support import expected_rows, export_rows, merge_args, run_cli

pytestmark = [pytest.mark.spark, pytest.mark.hudi, pytest.mark.slow]
SMALL_DRIVER = {"CDCLAKE_DRIVER_MEMORY": "512m"}


@pytest.fixture(scope="module")
def many_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("many-files")
    meta = generate_files(
        out, GeneratorOptions(events=9_000, keys=1_500, seed=21, partitions=4, flush_size=1)
    )
    assert int(meta["files"]) >= 10_000  # type: ignore[call-overload]
    return out, meta


def test_cli_merge_ten_thousand_small_files_with_small_driver_equals_expected(
    many_files: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    source, meta = many_files
    warehouse = tmp_path / "warehouse"
    merged = run_cli(*merge_args(source / "topics", warehouse), env=SMALL_DRIVER)
    assert merged.returncode == 0, merged.stderr
    counts = json.loads(merged.stdout)
    lines = [
        line
        for path in (source / "topics").rglob("*.json")
        for line in path.read_text().splitlines()
    ]
    assert counts["files_applied"] == meta["files"]
    assert counts["lines"] == len(lines)
    assert counts["skipped"] == lines.count("null")  # the tombstone after each delete
    assert counts["quarantined"] == 0
    assert export_rows(warehouse, tmp_path / "export.jsonl") == expected_rows(source)

    rerun = run_cli(*merge_args(source / "topics", warehouse), env=SMALL_DRIVER)
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["committed"] is False
