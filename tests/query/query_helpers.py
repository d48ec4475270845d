"""Helpers for the query tests: a stack of moto S3 alone, Trino on it, the CLI against it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pg8000.native import Connection

from cdclake.local import metastore as local_metastore
from cdclake.local import processes
from cdclake.local import trino as local_trino
from cdclake.local.processes import StackError
from cdclake.local.runtime import State
from cdclake.local.stack import LocalStack

ROOT = Path(__file__).resolve().parents[2]


def missing_engine() -> str | None:
    """Why Trino cannot run here (the exact reason to skip with), or None."""
    try:
        local_trino.java_home()
    except StackError as exc:
        return str(exc)
    unpacked = local_trino.TRINO_LIB / f"trino-server-{local_trino.version()}" / ".unpacked"
    if not unpacked.exists() and shutil.which("mvn") is None:
        return (
            "the Trino distribution is not resolved and Maven (mvn) is not installed to resolve it"
        )
    return None


def start_catalog(stack: LocalStack) -> None:
    """Start moto S3, PostgreSQL and the Hive metastore on ``stack``: what Trino reads through.

    Kafka and Connect are not needed to start Trino and query what it wrote, so only the
    stack's own starts of those three run (the ones `up` runs, in its order).
    """
    state = State(env="local", bucket=f"{stack.config.prefix}-changes")
    for name in ("moto", "postgres", local_metastore.NAME):
        state.ports[name] = processes.free_port()
    stack.save_state(state)
    state.processes["moto"] = stack._start_moto(state)
    stack.save_state(state)
    stack._ensure_bucket(state)
    state.processes["postgres"] = stack._start_postgres(state)
    stack.save_state(state)
    state.processes[local_metastore.NAME] = local_metastore.start(stack, state)
    stack.save_state(state)


def metastore_tables(stack: LocalStack) -> list[tuple[str, str]]:
    """(database, table) of every table the metastore holds, read from its PostgreSQL schema."""
    state = stack.load_state()
    assert state is not None
    conn = Connection(
        user="postgres", host="127.0.0.1", port=state.ports["postgres"], database="metastore"
    )
    try:
        rows = conn.run(
            'SELECT d."NAME", t."TBL_NAME" FROM "TBLS" t JOIN "DBS" d ON d."DB_ID" = t."DB_ID"'
        )
    finally:
        conn.close()
    return sorted((str(r[0]), str(r[1])) for r in rows)


def bucket_keys(stack: LocalStack, prefix: str) -> list[str]:
    state = stack.load_state()
    assert state is not None
    listed = stack.s3_client(state).list_objects_v2(Bucket=state.bucket, Prefix=prefix)
    return [item["Key"] for item in listed.get("Contents", [])]


def run_cli(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``cdclake ARGS`` in a child process on the stack rooted at ``root``."""
    env = {**os.environ, "CDCLAKE_LOCAL_DIR": str(root), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "cdclake.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def listening(pid: int) -> list[tuple[str, int]]:
    """(hex local address, port) of each TCP socket ``pid`` listens on, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed since the listing
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].rsplit(":", 1)
                found.append((address, int(port, 16)))
    return found
