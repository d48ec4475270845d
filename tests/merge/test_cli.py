"""The cdclake CLI as users run it: real processes, exit codes, one-line errors, kills."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
CLI = [sys.executable, "-m", "cdclake.cli"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("generated")
    result = run(
        "generate", "--out", str(out), "--events", "600", "--seed", "5", "--flush-size", "50"
    )
    assert result.returncode == 0, result.stderr
    return out


def merge_args(changes: Path, warehouse: Path) -> list[str]:
    return [
        "merge",
        "--changes",
        str(changes),
        "--warehouse",
        str(warehouse),
        "--table",
        "cli.orders",
        "--key",
        "id",
        "--format",
        "parquet",
        "--json",
    ]


def export_rows(warehouse: Path, out: Path) -> list[dict[str, object]]:
    result = run(
        "export", "--warehouse", str(warehouse), "--table", "cli.orders", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    return [
        {k: v for k, v in json.loads(line).items() if not k.startswith("_")}
        for line in out.read_text().splitlines()
    ]


def test_cli_merge_then_export_equals_generated_state(generated: Path, tmp_path: Path) -> None:
    result = run(*merge_args(generated / "topics", tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout)
    assert counts["committed"] and counts["events_read"] > 0
    expected = [json.loads(r) for r in (generated / "expected.jsonl").read_text().splitlines()]
    assert export_rows(tmp_path / "wh", tmp_path / "out.jsonl") == expected
    rerun = run(*merge_args(generated / "topics", tmp_path / "wh"))
    assert json.loads(rerun.stdout)["committed"] is False


@pytest.mark.parametrize("stage", ["read", "write", "commit"])
def test_cli_merge_killed_at_stage_keeps_previous_commit_and_recovers(
    generated: Path, tmp_path: Path, stage: str
) -> None:
    killed = run(
        *merge_args(generated / "topics", tmp_path / "wh"), env={"CDCLAKE_ABORT_AT": stage}
    )
    assert killed.returncode == -9
    assert not list((tmp_path / "wh").glob("cli.db/orders/_cdclake/commit-*.json"))
    result = run(*merge_args(generated / "topics", tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    expected = [json.loads(r) for r in (generated / "expected.jsonl").read_text().splitlines()]
    assert export_rows(tmp_path / "wh", tmp_path / "out.jsonl") == expected


def test_cli_merge_missing_changes_folder_fails_with_one_line(tmp_path: Path) -> None:
    result = run(*merge_args(tmp_path / "nope", tmp_path / "wh"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --changes {tmp_path / 'nope'} is not a folder"
    ]


def test_cli_merge_bad_table_name_fails_with_one_line(generated: Path, tmp_path: Path) -> None:
    args = merge_args(generated / "topics", tmp_path / "wh")
    args[args.index("cli.orders")] = "orders"
    result = run(*args)
    assert result.returncode == 2
    assert "table must be DATABASE.TABLE" in result.stderr
    assert "Traceback" not in result.stderr
