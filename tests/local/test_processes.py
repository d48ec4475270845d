"""Processes stop by process group; a PID whose start time changed is left alone."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from cdclake.local import processes
from cdclake.local.cli import app


def test_processes_stop_whole_group_nothing_left(tmp_path: Path) -> None:
    # The shell forks two children; stopping the leader alone would orphan them.
    proc = processes.spawn(
        "sleepers", ["sh", "-c", "sleep 300 & sleep 300 & wait"], log=tmp_path / "s.log"
    )
    deadline = time.monotonic() + 5
    while len(processes.group_members(proc.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes.group_members(proc.pid)) == 3
    processes.stop(proc, timeout=10)
    assert processes.group_members(proc.pid) == []
    assert not processes.is_running(proc)


def test_processes_reused_pid_not_signalled(tmp_path: Path) -> None:
    proc = processes.spawn("sleeper", ["sleep", "300"], log=tmp_path / "s.log")
    try:
        impostor = replace(proc, start_ticks=proc.start_ticks + 1)
        assert not processes.is_running(impostor)
        processes.stop(impostor, timeout=1)
        assert processes.is_running(proc)
    finally:
        processes.stop(proc, timeout=10)
    assert not processes.is_running(proc)


def test_local_status_without_stack_exits_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["status", "--json", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert '"up": false' in result.output
