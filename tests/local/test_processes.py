"""Processes stop by process group; a PID whose start time changed is left alone."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
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


BIND = "import socket, sys; socket.socket().bind(('127.0.0.1', int(sys.argv[1]))); print('bound')"
SERVE = (
    "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1])));"
    " s.listen(); time.sleep(300)"
)


def test_processes_exit_while_waiting_error_quotes_log_end(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        proc = processes.spawn(
            "binder", [sys.executable, "-c", BIND, str(port)], log=tmp_path / "b.log"
        )
        with pytest.raises(processes.ProcessExited) as raised:
            processes.wait_for("binder", lambda: False, timeout=30, proc=proc)
    assert raised.value.port_taken
    assert "Address already in use" in str(raised.value)


def test_processes_port_taken_before_bind_started_on_new_port(tmp_path: Path) -> None:
    # A bound, unconnected socket holds the port the way an outgoing connection would: not
    # listening, so a check before the start cannot see it.
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        ports = {"server": holder.getsockname()[1]}
        recorded: list[int] = []

        def start() -> processes.Tracked:
            port = ports["server"]
            proc = processes.spawn(
                "server", [sys.executable, "-c", SERVE, str(port)], log=tmp_path / "s.log"
            )
            processes.wait_for("server", lambda: processes.port_open(port), timeout=30, proc=proc)
            return proc

        proc = processes.start_on_free_ports(
            start, ports, ["server"], chosen=lambda: recorded.append(ports["server"])
        )
        try:
            assert recorded == [ports["server"]]
            assert ports["server"] != holder.getsockname()[1]
            assert processes.port_open(ports["server"])
        finally:
            processes.stop(proc, timeout=10)


def test_processes_terminated_starter_stops_what_it_started(tmp_path: Path) -> None:
    # A starter killed with SIGTERM (CI's time limit) still runs its `finally`.
    starter = subprocess.Popen(
        [sys.executable, "-c", TERMINATED_STARTER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    pid, ticks = (int(n) for n in starter.stdout.readline().split())
    sleeper = processes.Tracked(name="sleeper", pid=pid, start_ticks=ticks, log="")
    assert processes.is_running(sleeper)
    starter.send_signal(signal.SIGTERM)
    assert starter.wait(timeout=30) != 0
    assert not processes.is_running(sleeper)


TERMINATED_STARTER = """
import sys, time
from pathlib import Path
from cdclake.local import processes
with processes.terminated_as_interrupt():
    proc = processes.spawn("sleeper", ["sleep", "300"], log=Path(sys.argv[1]) / "s.log")
    try:
        print(proc.pid, proc.start_ticks, flush=True)
        time.sleep(60)
    finally:
        processes.stop(proc, timeout=10)
"""
