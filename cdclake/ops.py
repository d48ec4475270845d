"""Where a configured lake table lives in one environment, for the operator commands.

``status``, ``quarantine`` and ``snapshot`` ask the same questions of the local stack and of
AWS: where are the table's change files, its Hudi table and its quarantine. Locally the
answers come from config and the running stack; on AWS from the table's Glue job, whose
default arguments are what the merge runs with (stacks/components/merge_jobs.py).
Nothing here starts a JVM: S3 is read with boto3, local folders directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from environment.config import EnvironmentConfig
from environment.tables import TableConfig

if TYPE_CHECKING:
    from cdclake_merge.job import MergeOptions


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
    # What config's expected_rows sizes the record index for (None: not from config).
    record_index_file_groups: int | None = None
    history: bool = False  # config's history: rebuilt as a copy, for a layout change only

    @property
    def local(self) -> bool:
        return self.job_name is None

    def merge_options(self, **overrides: Any) -> MergeOptions:
        """What a merge of this table runs with: its spec from config, ``overrides`` (the
        per-run caps, tombstone retention, ...) on top."""
        from cdclake_merge.job import MergeOptions

        options = MergeOptions(
            table=self.lake_table,
            key=self.key,
            changes=self.changes,
            column_types=dict(self.column_types),
            exclude_columns=frozenset(self.exclude),
            max_bad_fraction=self.max_bad_fraction,
        )
        return replace(options, **overrides)


def _spec(table: TableConfig) -> dict[str, Any]:
    return {
        "key": tuple(table.primary_key),
        "partition": tuple(table.partition_by),
        "table_type": table.hudi_table_type,
        "column_types": dict(table.column_types),
        "exclude": tuple(table.exclude_columns),
        "record_index_file_groups": table.record_index_file_groups,
        "history": table.history,
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


class AnyFileSystem:
    """S3 URIs through boto3, everything else on the local disk."""

    def __init__(self) -> None:
        from cdclake_merge.storage import LocalFileSystem, S3FileSystem

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
