"""Helpers for the local capture stack tests: why a stack cannot start here, change files."""

from __future__ import annotations

import gzip
import json
import shutil
import time
from typing import Any

from cdclake.local.processes import StackError
from cdclake.local.stack import JVM_LIB, LocalStack, postgres_bin_dir

# The Confluent layout the merge job reads: topics/<topic>/partition=<p>/<topic>+<p>+<start>.json
CHANGE_FILE = (
    r"topics/(?P<topic>[^/]+)/partition=(?P<partition>\d+)/"
    r"(?P=topic)\+(?P=partition)\+\d{10}\.json(\.gz)?"
)


def missing_prerequisite() -> str | None:
    """Why the stack cannot start on this machine, or None when it can."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH: the local stack needs a Java 17 JDK"
    try:
        postgres_bin_dir()
    except StackError as exc:
        return str(exc)
    for module in ("kafka", "debezium-postgres", "s3-sink"):
        if not any((JVM_LIB / module).glob("*.jar")):
            return (
                f"jvm/lib/{module} has no jars: run "
                "`mvn -B -q -f jvm/pom.xml dependency:copy-dependencies` (make setup)"
            )
    return None


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
