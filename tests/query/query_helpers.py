"""Helpers for the query tests: Trino on the session's local stack, the CLI against it."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pg8000.native import Connection

from cdclake.local import trino as local_trino
from cdclake.local.processes import StackError
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


# --- the lake read back through the catalog (test_lake_through_trino.py) ------------------------


def change_files(stack: LocalStack, topic: str) -> list[bytes]:
    """Each change file of ``topic`` in the stack's change bucket, gzip opened, in offset
    order."""
    state = stack.load_state()
    assert state is not None
    s3 = stack.s3_client(state)
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=state.bucket, Prefix=f"topics/{topic}/"
    )
    bodies = []
    for key in sorted(item["Key"] for page in pages for item in page.get("Contents", [])):
        body = s3.get_object(Bucket=state.bucket, Key=key)["Body"].read()
        bodies.append(gzip.decompress(body) if key.endswith(".gz") else body)
    return bodies


def topic_events(stack: LocalStack, topic: str) -> list[dict[str, Any]]:
    """The Debezium payloads of ``topic`` in the stack's change bucket, in offset order."""
    return [
        json.loads(line)["payload"]
        for body in change_files(stack, topic)
        for line in body.decode().splitlines()
        if line
    ]


def wait_until(check: Callable[[], bool], what: str, *, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(2)


def as_utc(value: dt.datetime) -> dt.datetime:
    """A timestamptz as the lake stores it: UTC, naive, to the millisecond Trino returns."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _metastore_rows(stack: LocalStack, sql: str, **params: Any) -> list[list[Any]]:
    """Rows of the metastore's own PostgreSQL schema (what a thrift client would be told)."""
    state = stack.load_state()
    assert state is not None
    conn = Connection(
        user="postgres", host="127.0.0.1", port=state.ports["postgres"], database="metastore"
    )
    try:
        return [list(row) for row in conn.run(sql, **params)]
    finally:
        conn.close()


def registered_formats(stack: LocalStack, database: str) -> dict[str, str]:
    """Each table of ``database``: the input format its storage descriptor names."""
    rows = _metastore_rows(
        stack,
        'SELECT t."TBL_NAME", s."INPUT_FORMAT" FROM "TBLS" t'
        ' JOIN "DBS" d ON d."DB_ID" = t."DB_ID" JOIN "SDS" s ON s."SD_ID" = t."SD_ID"'
        ' WHERE d."NAME" = :db',
        db=database,
    )
    return {str(name): str(fmt) for name, fmt in rows}


def registered_partitions(stack: LocalStack, database: str, table: str) -> list[str]:
    """The partition values registered for ``table`` (``col=value`` names, values only)."""
    rows = _metastore_rows(
        stack,
        'SELECT p."PART_NAME" FROM "PARTITIONS" p JOIN "TBLS" t ON t."TBL_ID" = p."TBL_ID"'
        ' JOIN "DBS" d ON d."DB_ID" = t."DB_ID" WHERE d."NAME" = :db AND t."TBL_NAME" = :t',
        db=database,
        t=table,
    )
    return sorted(str(name).split("=", 1)[1] for (name,) in rows)


def registered_partition_locations(stack: LocalStack, database: str, table: str) -> list[str]:
    """Where each partition registered for ``table`` is stored, as the metastore says."""
    rows = _metastore_rows(
        stack,
        'SELECT s."LOCATION" FROM "PARTITIONS" p JOIN "TBLS" t ON t."TBL_ID" = p."TBL_ID"'
        ' JOIN "DBS" d ON d."DB_ID" = t."DB_ID" JOIN "SDS" s ON s."SD_ID" = p."SD_ID"'
        ' WHERE d."NAME" = :db AND t."TBL_NAME" = :t',
        db=database,
        t=table,
    )
    return sorted(str(location) for (location,) in rows)


def stack_with(root: Path, *, running: dict[str, int], stopped: tuple[str, ...]) -> LocalStack:
    """A stack's state file as ``local up`` writes it: ``running`` by name and PID (live
    processes), ``stopped`` the ones whose process has gone."""
    from cdclake.local import processes
    from cdclake.local.runtime import State

    log = str(root / "process.log")
    tracked = {
        name: processes.Tracked(name, pid, processes.start_ticks(pid) or 0, log)
        for name, pid in running.items()
    }
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    for name in stopped:
        tracked[name] = processes.Tracked(name, int(gone.stdout), 1, log)
    names = [*running, *stopped]
    state = State(env="local", ports=dict.fromkeys(names, 9), processes=tracked, bucket="lake")
    stack = LocalStack(root, env="local")
    stack.root.mkdir(parents=True, exist_ok=True)
    stack.state_file.write_text(state.to_json())
    return stack


def stored_text(stack: LocalStack, topic: str) -> str:
    """Every value the stack keeps for the lake, as text: each file of its warehouse (the
    tables, their histories, sidecars and quarantine), parquet pages read (they are
    compressed), gzip opened, the rest as stored (Hudi's metadata tables' HFiles too, whose
    blocks may be compressed: a copy there may not show); and each change file of ``topic``
    in its bucket."""
    import io

    import pyarrow.parquet as pq

    warehouse = Path(stack.status()["warehouse"])
    texts = []
    for path in sorted(p for p in warehouse.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".parquet":
            texts.append(str(pq.ParquetFile(io.BytesIO(data)).read().to_pylist()))
        else:
            opened = gzip.decompress(data) if path.suffix == ".gz" else data
            texts.append(opened.decode("latin-1"))
    texts += [body.decode("latin-1") for body in change_files(stack, topic)]
    return "\n".join(texts)
