"""A class-data-sharing archive for the short-lived JVMs a test session starts.

A cold ``cdclake merge`` spends a third of its time loading and verifying the same Spark and
Hudi classes every process loads (25-27 s -> 18.5-19 s with the archive, idle machine,
2026-11-29). HotSpot's dynamic archive (JDK 13+) records them at the exit of one merge, and
every later JVM on the same class path maps them instead. The archive is built in the
background at the start of a parallel session: JVMs started before it is ready run as they
did. A JVM given an archive that is absent, or made for another class path, runs without one
and says nothing (``-Xlog:cds*=off``: HotSpot would print the reason on stdout, which the
CLI's ``--json`` owns); a truncated one crashes it, so the archive appears under its final
name only whole, checked by a JVM first.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CLI = [sys.executable, "-m", "cdclake.cli"]
QUIET = "-Xlog:cds*=off"
BUILD_SECONDS = 300


def _build(folder: Path, java_options: str, env_name: str, final: Path) -> None:
    from cdclake.local import processes

    partial = folder / "building.jsa"
    changes = folder / "generated"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    generate = [*CLI, "generate", "--out", str(changes), "--events", "300", "--flush-size", "100"]
    if subprocess.run(generate, check=False, timeout=120, **quiet).returncode != 0:  # type: ignore[call-overload]
        return
    merge = [*CLI, "merge", "--changes", str(changes / "topics"), "--warehouse"]
    merge += [str(folder / "warehouse"), "--table", "cds.orders", "--key", "id", "--json"]
    dumping = f"{java_options} -XX:ArchiveClassesAtExit={partial} {QUIET}".strip()
    build = processes.spawn(
        "class archive", merge, log=folder / "build.log", env={**os.environ, env_name: dumping}
    )
    # Stopped by its start time, not its PID alone: a PID reused by another test's server
    # (a session leader as this one is) is never signalled.
    atexit.register(processes.kill, build)
    deadline = time.monotonic() + BUILD_SECONDS
    # The JVM outlives the CLI's Python process while it writes the archive.
    while processes.group_members(build.pid):
        if time.monotonic() > deadline:
            processes.kill(build)
            return
        time.sleep(0.2)
    processes.kill(build)  # reaps the CLI's process, long exited
    check = ["java", f"-XX:SharedArchiveFile={partial}", QUIET, "-version"]
    if partial.is_file() and subprocess.run(check, check=False, **quiet).returncode == 0:  # type: ignore[call-overload]
        partial.rename(final)


def start(java_options: str, env_name: str) -> str:
    """Begin building the archive in the background; the JVM options that use it once built.

    ``java_options``: what the session's short-lived JVMs run with now; ``env_name``: the
    variable that gives them their options (the build's merge runs under it too).
    """
    folder = Path(tempfile.mkdtemp(prefix="cdclake-class-archive-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    final = folder / "merge.jsa"
    threading.Thread(
        target=_build, args=(folder, java_options, env_name, final), daemon=True
    ).start()
    return f"{java_options} -XX:SharedArchiveFile={final} {QUIET}".strip()
