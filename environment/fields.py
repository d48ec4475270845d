"""The environment config's building blocks: the base every section derives from and the
field types more than one section uses (names PostgreSQL accepts, Hudi's table types, the
captures, freshness objectives, Glue's worker types)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

# PostgreSQL identifiers as Debezium include lists and publications accept them unquoted.
Identifier = Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]{0,62}$")]
Prefix = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{1,30}[a-z0-9]$")]
HudiTableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
ReplicaIdentity = Literal["DEFAULT", "FULL"]
Op = Literal["c", "u", "d", "r", "t"]
# The two Debezium captures: MSK Connect into the lake, Debezium Server into the fan-out.
Capture = Literal["lake", "fanout"]
# A lake table's lag objective is also its alarm's period: CloudWatch allows at most one day.
FreshnessMinutes = Annotated[int, Field(ge=5, le=1440)]
# Names of aws_logs.RetentionDays members.
LogRetention = Literal[
    "ONE_WEEK", "TWO_WEEKS", "ONE_MONTH", "THREE_MONTHS", "SIX_MONTHS", "ONE_YEAR", "TWO_YEARS"
]
# Glue's worker types the merge runs on (G.*: the ones auto scaling and a run's own size take).
WorkerType = Literal["G.1X", "G.2X", "G.4X", "G.8X"]
# Column types the merge job understands for shapes that carry no schema (Spark SQL DDL names).
ColumnType = Annotated[
    str,
    StringConstraints(
        pattern=r"^(string|boolean|smallint|int|bigint|float|double|date|timestamp|binary"
        r"|decimal\(\d{1,2},\s*\d{1,2}\))$"
    ),
]


class ConfigModel(BaseModel):
    """A config section: unknown keys refused (a typo fails synth), values never changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
