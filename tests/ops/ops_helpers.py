"""Helpers for the operator commands against AWS: a moto server by PID, S3 uploads, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from cdclake.local import processes

REPO_ROOT = Path(__file__).resolve().parents[2]
MOTO_ACCOUNT = "123456789012"  # the account moto answers for


@contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """``python -m moto.server`` on a free port of 127.0.0.1, stopped by PID when done."""
    port = processes.free_port()
    proc = processes.spawn(
        "moto",
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        log=log,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        processes.wait_for("moto", lambda: processes.port_open(port), timeout=60, proc=proc)
        # Glue job runs reach their final state when first described.
        requests.post(
            f"{endpoint}/moto-api/state-manager/set-transition",
            json={"model_name": "glue::job_run", "transition": {"progression": "immediate"}},
            timeout=10,
        ).raise_for_status()
        yield endpoint
    finally:
        processes.stop(proc)


def upload_tree(s3: Any, folder: Path, bucket: str, prefix: str) -> list[str]:
    """Every file under ``folder`` to ``s3://bucket/prefix/<relative path>``; the keys."""
    keys = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = f"{prefix.rstrip('/')}/{path.relative_to(folder).as_posix()}"
        s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
        keys.append(key)
    return keys


@contextmanager
def spark_on_s3(spark: Any, endpoint: str, region: str) -> Iterator[None]:
    """The shared SparkSession's S3A client on the moto server, then back as it was.

    The session's JVM may predate the server: endpoint and dummy keys go into its Hadoop
    configuration, and S3A's cache is off meanwhile.
    """
    from cdclake_merge.session import s3_settings

    settings = {
        **s3_settings({"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": region}),
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": "testing",
        "fs.s3a.secret.key": "testing",
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


def cdclake_json(*args: str) -> Any:
    """``cdclake ARGS --json`` in a child process with this process's (moto) environment."""
    result = subprocess.run(
        [sys.executable, "-m", "cdclake.cli", *args, "--json"],
        cwd=REPO_ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"cdclake {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return json.loads(result.stdout)
