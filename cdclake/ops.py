"""Where a configured lake table lives in one environment, for the operator commands.

``status``, ``quarantine`` and ``snapshot`` ask the same questions of the local stack and of
AWS: where are the table's change files, its Hudi table and its quarantine. Locally the
answers come from config and the running stack; on AWS from the table's Glue job, whose
default arguments are what the merge runs with (stacks/components/merge_jobs.py).
Nothing here starts a JVM: S3 is read with boto3, local folders directly.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from cdclake.config import EnvironmentConfig, TableConfig


@dataclass(frozen=True)
class LakePlace:
    """One lake table of one environment: its source name, its files and its merge spec."""

    env: str
    source_table: str  # schema.table, as in config and in the metrics' Table dimension
    lake_table: str  # <glue database>.<schema>_<table>
    warehouse: str  # a folder or s3://…/warehouse/
    changes: str  # the table's change folder
    quarantine_root: str
    key: tuple[str, ...]
    partition: tuple[str, ...] = ()
    table_type: str = "COPY_ON_WRITE"
    column_types: dict[str, str] = field(default_factory=dict)
    exclude: tuple[str, ...] = ()
    max_bad_fraction: float = 0.01
    job_name: str | None = None  # the Glue job (AWS only)

    @property
    def local(self) -> bool:
        return self.job_name is None


def _spec(table: TableConfig) -> dict[str, Any]:
    return {
        "key": tuple(table.primary_key),
        "partition": tuple(table.partition_by),
        "table_type": table.hudi_table_type,
        "column_types": dict(table.column_types),
        "exclude": tuple(table.exclude_columns),
    }


def local_place(config: EnvironmentConfig, source_table: str) -> LakePlace:
    """The table on the running local stack of ``config.env``; points boto3 at its moto server.

    The merge spec comes from ``config`` (which may be a file other than config/<env>.yaml:
    a fix being tried); where the files are comes from the stack. LookupError: not running.
    """
    from cdclake.local.lake import lake_target
    from cdclake_merge.storage import join

    table = config.lake_table(source_table)
    target = lake_target(config.env, source_table)
    warehouse = str(target.warehouse.resolve())
    return LakePlace(
        env=config.env,
        source_table=source_table,
        lake_table=target.table,
        warehouse=warehouse,
        changes=target.changes,
        # Where HudiTable puts it when no quarantine root is given (cdclake merge gives none).
        quarantine_root=join(warehouse, "_quarantine", target.table),
        max_bad_fraction=config.lake.glue_job.max_bad_fraction,
        **_spec(table),
    )


def aws_place(config: EnvironmentConfig, source_table: str, glue: Any) -> LakePlace:
    """The table as its Glue job runs it; LookupError with a one-line reason otherwise."""
    table = config.lake_table(source_table)
    name = table.merge_job_name(config.prefix)
    try:
        job = glue.get_job(JobName=name)["Job"]
    except glue.exceptions.EntityNotFoundException:
        raise LookupError(f"Glue job {name} not found: is {config.env} deployed?") from None
    args = job.get("DefaultArguments", {})
    missing = [a for a in ("--changes_path", "--warehouse_path", "--database") if a not in args]
    if missing:
        raise LookupError(f"Glue job {name} has no {', '.join(missing)}: not a cdclake merge job")
    database = args["--database"]
    return LakePlace(
        env=config.env,
        source_table=source_table,
        lake_table=f"{database}.{table.lake_table_name}",
        warehouse=args["--warehouse_path"],
        changes=args["--changes_path"],
        quarantine_root=args.get("--quarantine_path", "").rstrip("/")
        or f"{args['--warehouse_path'].rstrip('/')}/_quarantine/{database}.{table.lake_table_name}",
        max_bad_fraction=float(
            args.get("--max_bad_fraction", config.lake.glue_job.max_bad_fraction)
        ),
        job_name=name,
        **_spec(table),
    )


# --- storage without a JVM ------------------------------------------------------------------


def s3_client() -> Any:
    """boto3's S3 client; path-style against a local endpoint (moto), as the merge's S3A is."""
    import boto3
    from botocore.config import Config

    local = bool(os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))
    return boto3.client("s3", config=Config(s3={"addressing_style": "path"}) if local else None)


def _split(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.lstrip("/")


class S3FileSystem:
    """The merge library's FileSystem over boto3, for reading (and small writes) without Spark."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = s3_client()
        return self._client

    def _objects(self, uri: str, *, delimiter: bool) -> Iterator[dict[str, Any]]:
        bucket, prefix = _split(uri)
        prefix = prefix.rstrip("/") + "/" if prefix.rstrip("/") else ""
        arguments: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if delimiter:
            arguments["Delimiter"] = "/"
        for page in self.client.get_paginator("list_objects_v2").paginate(**arguments):
            for common in page.get("CommonPrefixes", ()):
                yield {"Key": common["Prefix"], "folder": True}
            yield from page.get("Contents", ())

    def list_files(self, root: str) -> Iterator[str]:
        bucket, _ = _split(root)
        scheme = urlparse(root).scheme
        for item in self._objects(root, delimiter=False):
            if not item["Key"].endswith("/"):
                yield f"{scheme}://{bucket}/{item['Key']}"

    def list_folder(self, folder: str, after: str | None = None) -> Any:
        from cdclake_merge.storage import list_s3_folder

        return list_s3_folder(folder, after, client=self.client)

    def list_dir(self, path: str) -> list[str]:
        names = set()
        for item in self._objects(path, delimiter=True):
            name = item["Key"].rstrip("/").rsplit("/", 1)[-1]
            if name:
                names.add(name)
        return sorted(names)

    def read_text(self, path: str) -> str:
        bucket, key = _split(path)
        return str(self.client.get_object(Bucket=bucket, Key=key)["Body"].read().decode())

    def read_prefix(self, path: str, limit: int) -> bytes:
        bucket, key = _split(path)
        body = self.client.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{limit - 1}")
        return bytes(body["Body"].read())

    def write_text(self, path: str, text: str) -> None:
        bucket, key = _split(path)
        self.client.put_object(Bucket=bucket, Key=key, Body=text.encode())

    def create_exclusive(self, path: str, text: str) -> None:
        if self.exists(path):
            raise FileExistsError(path)
        self.write_text(path, text)

    def exists(self, path: str) -> bool:
        bucket, key = _split(path)
        listed = self.client.list_objects_v2(Bucket=bucket, Prefix=key.rstrip("/"), MaxKeys=1)
        return bool(listed.get("KeyCount"))

    def delete(self, path: str) -> None:
        bucket, key = _split(path)
        self.client.delete_object(Bucket=bucket, Key=key)

    def mkdirs(self, path: str) -> None:
        """S3 has no folders."""


class AnyFileSystem:
    """S3 URIs through boto3, everything else on the local disk."""

    def __init__(self) -> None:
        from cdclake_merge.storage import LocalFileSystem

        self.s3 = S3FileSystem()
        self.disk = LocalFileSystem()

    def _for(self, path: str) -> Any:
        return self.s3 if path.startswith(("s3://", "s3a://", "s3n://")) else self.disk

    def __getattr__(self, name: str) -> Any:
        def call(path: str, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._for(path), name)(path, *args, **kwargs)

        return call


def local_path(path: str) -> Path:
    return Path(path.removeprefix("file://"))
