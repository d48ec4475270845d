"""Helpers for the operator commands against AWS: a moto server by PID, S3 uploads, the CLI,
change events to quarantine, the Glue entry point's command line."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import requests

from cdclake.local import processes

REPO_ROOT = Path(__file__).resolve().parents[2]
MOTO_ACCOUNT = "123456789012"  # the account moto answers for


@contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """moto's server by PID (cdclake.local.processes), its Glue job runs reaching their final
    state when first described."""
    with processes.moto_server(log) as endpoint:
        requests.post(
            f"{endpoint}/moto-api/state-manager/set-transition",
            json={"model_name": "glue::job_run", "transition": {"progression": "immediate"}},
            timeout=10,
        ).raise_for_status()
        yield endpoint


def config_in_region(folder: Path, region: str) -> Path:
    """config/dev.yaml in ``folder`` with moto's account and ``region``: a region of a test
    module's own, where the shared world's jobs and buckets are not."""
    import yaml

    raw = yaml.safe_load((REPO_ROOT / "config" / "dev.yaml").read_text())
    raw["account"], raw["region"] = MOTO_ACCOUNT, region
    (folder / "dev.yaml").write_text(yaml.safe_dump(raw))
    return folder


def create_merge_job(
    glue: Any, config: Any, table: str, *, changes: str, warehouse: str, **arguments: str
) -> str:
    """``table``'s merge job as deployed (its change folder and warehouse URIs, ``arguments``
    beside them: ``--quarantine_path``=…); the job's name."""
    name = str(config.lake_table(table).merge_job_name(config.prefix))
    glue.create_job(
        Name=name,
        Role=f"arn:aws:iam::{MOTO_ACCOUNT}:role/merge",
        Command={"Name": "glueetl", "ScriptLocation": "s3://assets/merge_job.py"},
        GlueVersion="5.0",
        DefaultArguments={
            "--table": table,
            "--changes_path": changes,
            "--warehouse_path": warehouse,
            "--database": config.lake.glue_database,
            "--record_key": "id",
            **{f"--{name}": value for name, value in arguments.items()},
        },
    )
    return name


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


def run_cdclake(*args: str) -> subprocess.CompletedProcess[str]:
    """``cdclake ARGS`` in a child process with this process's (moto) environment."""
    return subprocess.run(
        [sys.executable, "-m", "cdclake.cli", *args],
        cwd=REPO_ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def cdclake_json(*args: str) -> Any:
    """``cdclake ARGS --json`` (as :func:`run_cdclake`), expected to succeed: its JSON."""
    result = run_cdclake(*args, "--json")
    assert result.returncode == 0, f"cdclake {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return json.loads(result.stdout)


def _variable_scale(value: str) -> dict[str, Any]:
    """Debezium's VariableScaleDecimal (an unconstrained PostgreSQL numeric)."""
    number = Decimal(value)
    scale = max(-int(number.as_tuple().exponent), 0)
    unscaled = int(number.scaleb(scale))
    raw = unscaled.to_bytes(max((unscaled.bit_length() + 8) // 8, 1), "big", signed=True)
    return {"scale": scale, "value": base64.b64encode(raw).decode()}


NUMERIC = ("balance", "fee")  # unconstrained numeric columns: decimal(38,18) in the lake


def order_line(order_id: int, lsn: int, **numbers: str | None) -> str:
    """A schema-included insert into public.orders (id, order_date and the ``numbers`` given).

    ``numbers`` maps columns of :data:`NUMERIC` to a decimal text (or None); a value wider than
    decimal(38,18) makes the line one the merge quarantines, naming the column.
    """
    fields: list[dict[str, Any]] = [
        {"field": "id", "type": "int32", "optional": False},
        {"field": "order_date", "type": "string", "optional": True},
    ]
    after: dict[str, Any] = {"id": order_id, "order_date": "2024-05-01"}
    for name in NUMERIC:
        if name in numbers:
            fields.append(
                {
                    "field": name,
                    "type": "struct",
                    "optional": True,
                    "name": "io.debezium.data.VariableScaleDecimal",
                }
            )
            value = numbers[name]
            after[name] = None if value is None else _variable_scale(value)
    row = {"type": "struct", "fields": fields, "optional": True, "name": "orders.Value"}
    schema = {
        "type": "struct",
        "name": "orders.Envelope",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {"type": "struct", "fields": [], "field": "source"},
            {"type": "string", "field": "op"},
        ],
    }
    payload = {
        "before": None,
        "after": after,
        "source": {
            "connector": "postgresql",
            "ts_ms": 1_700_000_000_000,
            "snapshot": "false",
            "db": "app",
            "sequence": json.dumps([None, str(lsn)]),
            "schema": "public",
            "table": "orders",
            "txId": lsn,
            "lsn": lsn,
        },
        "op": "c",
        "ts_ms": 1_700_000_000_005,
        "transaction": None,
    }
    return json.dumps({"schema": schema, "payload": payload})


def job_argv(arguments: Mapping[str, str], *, job: str, run_id: str | None = None) -> list[str]:
    """What Glue hands ``glue_jobs/merge_job.py``: the run's arguments, after its name and id."""
    argv = ["merge_job.py", "--JOB_NAME", job, *(["--JOB_RUN_ID", run_id] if run_id else [])]
    for name, value in arguments.items():
        argv += [name, value]
    return argv
