"""A moto server standing in for one deployed environment (dev): buckets, a Glue job, a Hudi
table its merge wrote, change files it has not applied yet, a metric."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from tests.ops.ops_helpers import (
    MOTO_ACCOUNT,
    create_merge_job,
    moto_server,
    spark_on_s3,
    upload_tree,
)

ENV = "dev"


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def aws_env(moto_endpoint: str) -> Iterator[None]:
    """boto3, here and in the CLI's processes, talks to the moto server with dummy keys."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("AWS_"):
                patch.delenv(name)
        patch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        patch.setenv("AWS_CONFIG_FILE", os.devnull)
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        yield


@pytest.fixture(scope="session")
def config_dir(tmp_path_factory: pytest.TempPathFactory, repo_root: Path) -> Path:
    folder = tmp_path_factory.mktemp("config")
    raw = yaml.safe_load((repo_root / "config" / f"{ENV}.yaml").read_text())
    raw["account"] = MOTO_ACCOUNT
    (folder / f"{ENV}.yaml").write_text(yaml.safe_dump(raw))
    return folder


@pytest.fixture(scope="session")
def deployed(
    aws_env: None,
    moto_endpoint: str,
    config_dir: Path,
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """public.orders of dev as after one Glue run: what `cdclake status` reads on AWS."""
    from cdclake.ops import AnyFileSystem
    from cdclake_merge.generator import GeneratorOptions, generate_files
    from cdclake_merge.job import MergeOptions, run_merge
    from cdclake_merge.metrics import TableRun, publish
    from cdclake_merge.sink import open_sink
    from cdclake_merge.storage import LocalFileSystem
    from environment.config import load_config

    config = load_config(ENV, config_dir=config_dir)
    table = config.lake_table("public.orders")
    region = config.region
    s3 = boto3.client("s3", region_name=region)
    buckets = {k: f"{config.prefix}-{k}" for k in ("changes", "lake", "quarantine")}
    for bucket in buckets.values():
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
    topic = f"{config.prefix}.{table.name}"
    changes = f"s3://{buckets['changes']}/topics/{topic}/"
    quarantine = f"s3://{buckets['quarantine']}/{table.lake_table_name}/"
    database = config.lake.glue_database

    generated = tmp_path_factory.mktemp("generated")
    generate_files(
        generated,
        GeneratorOptions(
            table=table.name,
            events=300,
            keys=30,
            partitions=1,
            flush_size=60,
            prefix=config.prefix,
            truncate=False,
            redeliver=False,
        ),
    )
    files = sorted((generated / "topics" / topic / "partition=0").glob("*.json"))
    *applied, late = files
    with applied[0].open("a") as bad:
        bad.write('{"payload": "cut short\n')  # the one line this run quarantines
    for path in applied:
        s3.put_object(
            Bucket=buckets["changes"],
            Key=f"topics/{topic}/partition=0/{path.name}",
            Body=path.read_bytes(),
        )

    # The Glue job's merge: here in the shared session, with the warehouse on disk.
    warehouse = tmp_path_factory.mktemp("warehouse")
    lake_table = f"{database}.{table.lake_table_name}"
    with spark_on_s3(spark, moto_endpoint, region):
        sink = open_sink(
            warehouse=str(warehouse),
            table=lake_table,
            key=tuple(table.primary_key),
            fs=LocalFileSystem(),
            spark_factory=lambda: spark,
            partition_fields=tuple(table.partition_by),
            table_type=table.hudi_table_type,
            quarantine_root=quarantine,
            sync_catalog=False,
        )
        options = MergeOptions(table=lake_table, key=tuple(table.primary_key), changes=changes)
        started = time.monotonic()
        result = run_merge(lambda: spark, AnyFileSystem(), sink, options)
    assert result.committed and result.quarantined == 1, result
    upload_tree(s3, warehouse, buckets["lake"], "warehouse")
    s3.put_object(
        Bucket=buckets["changes"],
        Key=f"topics/{topic}/partition=0/{late.name}",
        Body=late.read_bytes(),
    )

    glue = boto3.client("glue", region_name=region)
    job = create_merge_job(
        glue,
        config,
        table.name,
        changes=changes,
        warehouse=f"s3://{buckets['lake']}/warehouse/",
        quarantine_path=quarantine,
        max_bad_fraction="0.01",
    )
    run_id = glue.start_job_run(JobName=job)["JobRunId"]
    published = publish(
        TableRun.from_result(
            result.as_dict(),
            environment=ENV,
            table=table.name,
            duration_seconds=time.monotonic() - started,
        ),
        client=boto3.client("cloudwatch", region_name=region),
        now=datetime.now(UTC),
    )
    assert published
    return {"result": result.as_dict(), "job": job, "run_id": run_id, "config_dir": config_dir}
