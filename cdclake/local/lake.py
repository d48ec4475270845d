"""Where a configured table's changes are on the local stack, and where its lake table goes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdclake.local.processes import StackError
from cdclake.local.runtime import AWS_ENV
from cdclake.local.stack import LocalStack
from connectors.configs import topic_name
from environment.config import load_config


@dataclass(frozen=True)
class LakeTarget:
    table: str  # <glue database>.<schema>_<table>
    changes: str  # s3://<bucket>/topics/<topic>/
    warehouse: Path
    key: tuple[str, ...]
    partition: tuple[str, ...] = ()
    table_type: str = "COPY_ON_WRITE"
    column_types: dict[str, str] = field(default_factory=dict)
    exclude: tuple[str, ...] = ()


class StackNotRunning(StackError, LookupError):
    """The local stack has no state, or its processes no longer run."""


def running_status(env: str) -> dict[str, object]:
    """The status of the local stack of ``env``; StackNotRunning when it is not up."""
    status = LocalStack(env=env).status()
    if not status.get("up"):
        raise StackNotRunning("the local stack is not running: start it with `cdclake local up`")
    return status


def lake_target(env: str, source_table: str) -> LakeTarget:
    """The lake side of ``source_table`` on the running local stack of ``env``.

    Points this process's AWS clients (boto3 and Spark's S3 client read the same variables)
    at the stack's moto server, and its Spark catalog at the stack's metastore service.
    ValueError/LookupError carry a one-line reason.
    """
    from cdclake_merge.session import METASTORE_URI_ENV

    config = load_config(env)
    table = config.lake_table(source_table)
    status: dict[str, Any] = running_status(env)
    os.environ.update(AWS_ENV)
    os.environ["AWS_ENDPOINT_URL"] = status["s3_endpoint"]
    os.environ[METASTORE_URI_ENV] = status["metastore_uri"]
    return LakeTarget(
        table=f"{config.lake.glue_database}.{table.lake_table_name}",
        changes=f"{status['changes_uri']}/{topic_name(config, table)}/",
        warehouse=Path(status["warehouse"]),
        key=tuple(table.primary_key),
        partition=tuple(table.partition_by),
        table_type=table.hudi_table_type,
        column_types=dict(table.column_types),
        exclude=tuple(table.exclude_columns),
    )
