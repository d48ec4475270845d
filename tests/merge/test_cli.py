"""The cdclake CLI as users run it: real processes on real Hudi, exit codes, one-line errors,
kills from outside once something is written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.merge.support import CLI, expected_rows, export_rows, merge_args, run_cli

pytestmark = [pytest.mark.spark, pytest.mark.hudi, pytest.mark.slow]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("generated")
    result = run_cli(
        "generate", "--out", str(out), "--events", "600", "--seed", "5", "--flush-size", "50"
    )
    assert result.returncode == 0, result.stderr
    return out


def _commits(warehouse: Path) -> list[Path]:
    return sorted((warehouse / "cli.db" / "orders" / ".hoodie").glob("*.commit"))


@pytest.fixture(scope="module")
def merged(generated: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    """One `cdclake merge` of the generated files: (warehouse, its --json counts)."""
    warehouse = tmp_path_factory.mktemp("merged") / "wh"
    result = run_cli(*merge_args(generated / "topics", warehouse))
    assert result.returncode == 0, result.stderr
    return warehouse, json.loads(result.stdout)


def test_cli_merge_then_export_equals_generated_state(
    generated: Path,
    merged: tuple[Path, dict],  # type: ignore[type-arg]
    tmp_path: Path,
) -> None:
    warehouse, counts = merged
    assert counts["committed"] and counts["events_read"] > 0
    assert export_rows(warehouse, tmp_path / "out.jsonl") == expected_rows(generated)
    rerun = run_cli(*merge_args(generated / "topics", warehouse))
    assert json.loads(rerun.stdout)["committed"] is False


def test_cli_merge_partitioned_merge_on_read_equals_generated_state(
    generated: Path, tmp_path: Path
) -> None:
    args = merge_args(
        generated / "topics",
        tmp_path / "wh",
        "--table-type",
        "MERGE_ON_READ",
        "--partition",
        "active",
    )
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    table = tmp_path / "wh" / "cli.db" / "orders"
    assert {p.name for p in table.glob("active=*")} >= {"active=true", "active=false"}
    assert list((table / ".hoodie").glob("*.deltacommit"))
    assert export_rows(tmp_path / "wh", tmp_path / "out.jsonl") == expected_rows(generated)


def test_cli_merge_other_table_type_than_stored_fails_with_one_line(
    generated: Path,
    merged: tuple[Path, dict],  # type: ignore[type-arg]
    tmp_path: Path,
) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(merged[0], warehouse)
    changes = tmp_path / "changes"
    shutil.copytree(generated / "topics", changes)
    (changes / "later.json").write_text("")
    result = run_cli(*merge_args(changes, warehouse, "--table-type", "MERGE_ON_READ"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: table cli.orders was created otherwise than its config says "
        "(table type COPY_ON_WRITE -> MERGE_ON_READ): needs a rebuild; nothing was committed"
    ]


def _kill_when(args: list[str], ready: Callable[[], bool]) -> None:
    """Run ``cdclake merge`` and SIGKILL it once ``ready()``, as when Glue loses a worker."""
    process = subprocess.Popen(
        [*CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy()
    )
    deadline = time.monotonic() + 600
    while not ready():
        assert process.poll() is None, f"the run ended (status {process.returncode}) unkilled"
        assert time.monotonic() < deadline, "the run never reached the point to kill it at"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL


def test_cli_merge_killed_after_staging_and_during_hudi_write_recovers(
    generated: Path, tmp_path: Path
) -> None:
    """Killed once its checkpoint is written aside, then again with Hudi's commit in flight."""
    args = merge_args(generated / "topics", tmp_path / "wh")
    database = tmp_path / "wh" / "cli.db"
    _kill_when(
        args, lambda: any((database / "_cdclake" / "orders" / "checkpoints").glob("v*.json"))
    )
    assert not _commits(tmp_path / "wh")
    _kill_when(args, lambda: any((database / "orders" / ".hoodie").glob("*.inflight")))
    assert not _commits(tmp_path / "wh")
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["version"] == 1
    assert export_rows(tmp_path / "wh", tmp_path / "out.jsonl") == expected_rows(generated)


def test_cli_merge_max_files_leaves_the_rest_for_the_next_run(
    generated: Path, tmp_path: Path
) -> None:
    files = sum(1 for _ in (generated / "topics").rglob("*.json"))
    args = merge_args(generated / "topics", tmp_path / "wh", "--max-files", "3")
    result = run_cli(*[*args, "--max-bytes", "1GiB"])
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout)
    assert (counts["files_applied"], counts["files_pending"]) == (3, files - 3)


def test_cli_merge_max_bytes_not_a_size_fails_with_one_line(
    generated: Path, tmp_path: Path
) -> None:
    result = run_cli(*merge_args(generated / "topics", tmp_path / "wh", "--max-bytes", "lots"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --max-bytes expects a size such as 1000, 512MB or 2GiB, got 'lots'"
    ]


def test_cli_merge_missing_changes_folder_fails_with_one_line(tmp_path: Path) -> None:
    result = run_cli(*merge_args(tmp_path / "nope", tmp_path / "wh"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --changes {tmp_path / 'nope'} is not a folder"
    ]


def test_cli_merge_bad_table_name_fails_with_one_line(generated: Path, tmp_path: Path) -> None:
    args = merge_args(generated / "topics", tmp_path / "wh")
    args[args.index("cli.orders")] = "orders"
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: table must be DATABASE.TABLE, got 'orders'"
    ]


def test_cli_export_unknown_table_fails_with_one_line(tmp_path: Path) -> None:
    result = run_cli(
        "export", "--warehouse", str(tmp_path), "--table", "cli.none", "--out", str(tmp_path / "o")
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: table cli.none has no commit under {tmp_path}"
    ]
