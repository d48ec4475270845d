"""One replicated table as ``tables:`` lists it: where its changes go, its keys and columns,
and the lake settings of its own that override the lake's."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from environment.capacity import DEFAULT_EXPECTED_ROWS, record_index_file_groups
from environment.fields import (
    ColumnType,
    ConfigModel,
    FreshnessMinutes,
    HudiTableType,
    Identifier,
    ReplicaIdentity,
    WorkerType,
)
from environment.names import merge_job_prefix

# What a lake table does when a stored column changes type in a way Hudi cannot take in place
# (docs/merge-job.md "Schema changes"): rebuild it beside the live table, or stop (park) it.
SchemaChangePolicy = Literal["rebuild", "stop"]
# What the next rebuild does with a column the source dropped: keep it (null in later rows,
# as between rebuilds) or leave it out of the rebuilt table.
DropColumnsPolicy = Literal["keep", "drop"]


class FanOutRouting(ConfigModel):
    """How a table's changes look on the EventBridge bus."""

    source: str | None = Field(
        default=None, description="EventBridge Source; default cdc.<schema>.<table>"
    )
    detail_type: str | None = Field(
        default=None, description="EventBridge DetailType; default '<schema>.<table> changed'"
    )


class GlueJobSizing(ConfigModel):
    """A lake table's own merge workers; what it leaves out comes from ``lake.glue_job``."""

    worker_type: WorkerType | None = None
    number_of_workers: int | None = Field(
        default=None, ge=2, description="workers a run may scale up to (driver included)"
    )
    min_workers: int | None = Field(
        default=None, ge=2, description="workers a run starts with at least (driver included)"
    )


class TableConfig(ConfigModel):
    """One replicated table."""

    name: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$")] = (
        Field(description="schema.table in PostgreSQL")
    )
    primary_key: list[Identifier] = Field(min_length=1)
    partition_by: list[Identifier] = Field(default_factory=list)
    hudi_table_type: HudiTableType = "COPY_ON_WRITE"
    replica_identity: ReplicaIdentity = "DEFAULT"
    exclude_columns: list[Identifier] = Field(default_factory=list)
    column_types: dict[Identifier, ColumnType] = Field(
        default_factory=dict,
        description="Types for change files without a schema (envelope/flattened shapes)",
    )
    lake: bool = True
    fanout: bool = False
    routing: FanOutRouting = Field(default_factory=FanOutRouting)
    freshness_minutes: FreshnessMinutes | None = Field(
        default=None, description="lake lag objective; default lake.freshness_minutes"
    )
    glue_job: GlueJobSizing = Field(
        default_factory=GlueJobSizing,
        description="the table's merge workers; default lake.glue_job's",
    )
    retain_hours: int | None = Field(
        default=None,
        ge=1,
        le=24 * 30,
        description=(
            "how far back this lake table's file versions are kept; default lake.retain_hours "
            "(a COPY_ON_WRITE table with random-key updates keeps a copy of itself per run in it)"
        ),
    )
    expected_rows: int = Field(
        default=DEFAULT_EXPECTED_ROWS,
        ge=1,
        description=(
            "rows the lake table is expected to reach in its life: sizes its record index "
            "when the table is first written (a later change needs a rebuild)"
        ),
    )

    schema_changes: SchemaChangePolicy = Field(
        default="rebuild",
        description=(
            "a type change the lake table cannot take in place: rebuild the table beside the "
            "live one (it keeps serving meanwhile), or stop: park the table and page"
        ),
    )
    drop_columns: DropColumnsPolicy = Field(
        default="keep",
        description="a column dropped at the source: kept (null in later rows) or dropped "
        "from the lake at the table's next rebuild",
    )
    history: bool = Field(
        default=False,
        description=(
            "every version of each row, kept by the merge in <schema>_<table>_history beside "
            "the lake table (SCD2 validity: docs/lake.md)"
        ),
    )

    @model_validator(mode="after")
    def _columns_consistent(self) -> TableConfig:
        excluded_keys = sorted(set(self.primary_key) & set(self.exclude_columns))
        if excluded_keys:
            raise ValueError(f"primary key column(s) {excluded_keys} cannot be excluded")
        excluded_parts = sorted(set(self.partition_by) & set(self.exclude_columns))
        if excluded_parts:
            raise ValueError(f"partition column(s) {excluded_parts} cannot be excluded")
        if len(set(self.primary_key)) != len(self.primary_key):
            raise ValueError("primary_key lists a column twice")
        if not (self.lake or self.fanout):
            raise ValueError("table goes nowhere: set lake and/or fanout to true")
        if self.freshness_minutes is not None and not self.lake:
            raise ValueError("freshness_minutes is the lake's objective: the table has lake: false")
        if self.retain_hours is not None and not self.lake:
            raise ValueError("retain_hours keeps lake file versions: the table has lake: false")
        if "expected_rows" in self.model_fields_set and not self.lake:
            raise ValueError("expected_rows sizes the lake table: the table has lake: false")
        for policy in ("schema_changes", "drop_columns"):
            if policy in self.model_fields_set and not self.lake:
                raise ValueError(f"{policy} governs the lake table: the table has lake: false")
        if self.history and not self.lake:
            raise ValueError("history is kept beside the lake table: the table has lake: false")
        if self.glue_job.model_fields_set and not self.lake:
            raise ValueError("glue_job sizes the lake's merge: the table has lake: false")
        return self

    @property
    def schema_name(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def table_name(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def lake_table_name(self) -> str:
        """Name of the Hudi/Glue table: schema and table joined, unique per database."""
        return f"{self.schema_name}_{self.table_name}"

    def merge_job_name(self, prefix: str) -> str:
        """The table's Glue merge job, ``<prefix>-merge-<schema>-<table>`` (hyphens only)."""
        return merge_job_prefix(prefix) + self.lake_table_name.replace("_", "-")

    @property
    def record_index_file_groups(self) -> int:
        """The record index's file groups, from :attr:`expected_rows`."""
        return record_index_file_groups(self.expected_rows)

    @property
    def event_source(self) -> str:
        return self.routing.source or f"cdc.{self.name}"

    @property
    def event_detail_type(self) -> str:
        return self.routing.detail_type or f"{self.name} changed"
