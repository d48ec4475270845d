"""Helpers for the local capture stack tests: change files, runbook commands, merges."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from cdclake.local.runtime import JVM_LIB
from cdclake.local.stack import LocalStack

# The Confluent layout the merge job reads: topics/<topic>/partition=<p>/<topic>+<p>+<start>.json
CHANGE_FILE = (
    r"topics/(?P<topic>[^/]+)/partition=(?P<partition>\d+)/"
    r"(?P=topic)\+(?P=partition)\+\d{10}\.json(\.gz)?"
)


def change_files(stack: LocalStack) -> dict[str, bytes]:
    """Every object under topics/ in the moto bucket: key -> body (gunzipped)."""
    state = stack.load_state()
    assert state is not None
    s3 = stack.s3_client(state)
    found: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=state.bucket, Prefix="topics/"):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=state.bucket, Key=item["Key"])["Body"].read()
            found[item["Key"]] = gzip.decompress(body) if item["Key"].endswith(".gz") else body
    return found


def events(files: dict[str, bytes], topic: str) -> list[dict[str, Any]]:
    """The Debezium payloads of one topic, file by file in offset order, line by line."""
    payloads = []
    for key in sorted(k for k in files if k.startswith(f"topics/{topic}/")):
        for line in files[key].decode().splitlines():
            payloads.append(json.loads(line)["payload"])
    return payloads


def wait_for_events(
    stack: LocalStack, topic: str, done: Any, *, timeout: float = 120.0
) -> list[dict[str, Any]]:
    """Poll the bucket until ``done(events)`` holds; return the events (or fail with them)."""
    deadline = time.monotonic() + timeout
    seen: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        seen = events(change_files(stack), topic)
        if done(seen):
            return seen
        time.sleep(2)
    raise AssertionError(f"change files of {topic} never satisfied the check; saw {seen}")


# --- runbooks (tests/local/test_runbooks.py) -------------------------------------------------

REPO_ROOT = JVM_LIB.parent.parent


def missing_merge_prerequisite() -> str | None:
    """Why a merge cannot run here once the stack runs (the merge needs jvm/lib/spark)."""
    if not any((JVM_LIB / "spark").glob("*.jar")):
        return (
            "jvm/lib/spark has no jars: run "
            "`mvn -B -q -f jvm/pom.xml dependency:copy-dependencies` (make setup)"
        )
    return None


@contextmanager
def pointed_at(stack: LocalStack) -> Iterator[None]:
    """This process pointed at ``stack`` as ``cdclake --env local`` would be, then back."""
    import pytest

    from cdclake.local.runtime import AWS_ENV
    from cdclake_merge.session import METASTORE_URI_ENV

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CDCLAKE_LOCAL_DIR", str(stack.root))
        # lake_target sets these for this process; the patch puts the originals back. The
        # metastore URI is set empty (no metastore: the session's Spark stays on Derby) so that
        # undoing the patch removes the one lake_target sets: left behind, it would point later
        # CLI merges (tests/merge) at a stopped service.
        for name, value in {
            **AWS_ENV,
            "AWS_ENDPOINT_URL": "unset",
            METASTORE_URI_ENV: "",
        }.items():
            patch.setenv(name, value)
        yield


def run_cdclake(
    stack: LocalStack, *args: str, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``cdclake ARGS`` as a person runs it, against ``stack``, in its own process group."""
    proc = start_cdclake(stack, *args)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = kill_group(proc)
        command = " ".join(args)
        raise AssertionError(f"cdclake {command} timed out after {timeout}s:\n{err}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def start_cdclake(stack: LocalStack, *args: str) -> subprocess.Popen[str]:
    """``cdclake ARGS`` started against ``stack`` in its own process group, so that killing
    the group takes the JVM it starts with it."""
    env = {**os.environ, "CDCLAKE_LOCAL_DIR": str(stack.root)}
    return subprocess.Popen(
        [sys.executable, "-m", "cdclake.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def kill_group(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGKILL ``proc``'s process group (as a crash or an operator's kill -9 would end it);
    what it printed."""
    os.killpg(proc.pid, signal.SIGKILL)
    return proc.communicate()


def debezium_rest(stack: LocalStack) -> str:
    """The Debezium source connector's REST URL on the stack's Connect worker."""
    from connectors.configs import connector_name

    url = stack.status()["connect_url"]
    return f"{url}/connectors/{connector_name(stack.config, 'debezium-source')}"


def slot_state(stack: LocalStack) -> bool | None:
    """Whether the MSK-side slot is active; None when it does not exist."""
    slot = stack.config.database.replication.slot
    with stack.connect() as conn:
        rows = conn.run("SELECT active FROM pg_replication_slots WHERE slot_name = :s", s=slot)
    return bool(rows[0][0]) if rows else None


def lose_slot(stack: LocalStack, during: Callable[[], None], *, timeout: float = 60.0) -> None:
    """Stop the Debezium connector, drop its slot, run ``during``, resume the connector.

    Changes made by ``during`` are lost to capture, as after a slot PostgreSQL invalidated or
    an operator dropped: on resume Debezium creates a new slot at the current position.
    """
    rest = debezium_rest(stack)
    requests.put(f"{rest}/stop", timeout=30).raise_for_status()
    until(lambda: slot_state(stack) is False, "the slot to become inactive", timeout)
    slot = stack.config.database.replication.slot
    with stack.connect() as conn:
        conn.run("SELECT pg_drop_replication_slot(:s)", s=slot)
    during()
    requests.put(f"{rest}/resume", timeout=30).raise_for_status()
    until(lambda: slot_state(stack) is True, "Debezium to recreate its slot", timeout)


def until(check: Callable[[], bool], what: str, timeout: float) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.5)


def snapshot_signals(stack: LocalStack, table: str) -> set[str]:
    """The ids of the incremental-snapshot signals naming ``table`` in the lake capture's
    signal table (the fan-out's is another table)."""
    signal_table = stack.config.database.replication.signal_table
    with stack.connect() as conn:
        rows = conn.run(f"SELECT id, data FROM {signal_table} WHERE type = 'execute-snapshot'")
    return {str(i) for i, data in rows if table in json.loads(data)["data-collections"]}


def row_ids(payloads: list[dict[str, Any]], op: str | None = None) -> set[int]:
    return {
        int(p["after"]["id"])
        for p in payloads
        if p.get("after") is not None and (op is None or p["op"] == op)
    }


@contextmanager
def spark_on_stack_s3(spark: Any, stack: LocalStack) -> Iterator[None]:
    """Point the shared SparkSession's S3A client at the stack's moto server, then back.

    The session's JVM may predate the stack, so the endpoint and the dummy keys go into its
    Hadoop configuration, not its environment; S3A's cache is off meanwhile.
    """
    from cdclake.local.runtime import AWS_ENV
    from cdclake_merge.session import s3_settings

    endpoint = stack.status()["s3_endpoint"]
    settings = {
        **s3_settings({"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": AWS_ENV["AWS_REGION"]}),
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": AWS_ENV["AWS_ACCESS_KEY_ID"],
        "fs.s3a.secret.key": AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        "fs.s3.impl.disable.cache": "true",
        "fs.s3a.impl.disable.cache": "true",
    }
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    before = {key: conf.get(key) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)


def merge_in_session(spark: Any, table: str, *, config_dir: Path | None = None) -> dict[str, Any]:
    """One merge of a configured table of the running stack, in this process's SparkSession.

    What ``cdclake merge --env local [--config-dir DIR]`` runs (run_merge over the table's
    sink), without a second JVM; the caller points this process at the stack
    (CDCLAKE_LOCAL_DIR).
    """
    from cdclake.ops import AnyFileSystem, local_place
    from cdclake.quarantine import open_table
    from cdclake_merge.job import run_merge
    from environment.config import load_config

    place = local_place(load_config("local", config_dir=config_dir), table)
    options = place.merge_options()
    result = run_merge(lambda: spark, AnyFileSystem(), open_table(place, lambda: spark), options)
    return result.as_dict()


# --- the metastore service (tests/local/test_stack_metastore.py) ----------------------------


@contextmanager
def metastore_client(uri: str) -> Iterator[Any]:
    """A thrift client of the Hive metastore at ``thrift://host:port`` (not Spark's: a reader
    apart from the merge that registered the tables, as Athena is)."""
    from urllib.parse import urlsplit

    from hive_metastore_client import HiveMetastoreClient

    parts = urlsplit(uri)
    assert parts.scheme == "thrift" and parts.hostname and parts.port, uri
    client = HiveMetastoreClient(parts.hostname, parts.port)
    client.open()
    try:
        yield client
    finally:
        client.close()


# --- Trino, the reader Athena is (tests/local/test_rebuild.py) --------------------------------


def through_trino(stack: LocalStack, lake_table: str) -> dict[str, Any]:
    """``DATABASE.TABLE`` as Trino's hudi catalog reads it through the stack's metastore: the
    column types ``DESCRIBE`` gives and every row by column name (Trino started if needed)."""
    from cdclake.local import trino as local_trino
    from cdclake.query import engine_port

    port = engine_port(stack)
    name = f"hudi.{lake_table}"
    described = local_trino.run_query(port, f"DESCRIBE {name}")
    read = local_trino.run_query(port, f"SELECT * FROM {name}")
    return {
        "types": {row[0]: row[1] for row in described.rows},
        "rows": [dict(zip(read.columns, row, strict=True)) for row in read.rows],
    }
