"""The Glue Data Catalog: the metastore calls of a local run, as Glue API calls.

No moto service stands behind Hive's metastore client. Locally the metastore is Spark's
embedded Derby one, whose handler (HiveMetaStore.HMSHandler) writes an audit line for every
call it serves, whoever makes it (Hudi's sync or Spark's session catalog); on Glue the same
IMetaStoreClient calls go to AWS's Glue Data Catalog client, which makes them Glue API calls
with the job role's credentials.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.iam.iam_helpers.moto import PARTITION, REGION
from tests.iam.iam_helpers.statements import Access

#: The logger HMSHandler audits each call with ("ugi=... ip=... cmd=<call><details>").
METASTORE_AUDIT_LOGGER = "org.apache.hadoop.hive.metastore.HiveMetaStore.audit"


#: What HMSHandler also writes to the audit log when a handler thread ends: no call.
METASTORE_HOUSEKEEPING = ("Cleaning up thread local RawStore", "Done cleaning up thread local")


#: Metastore call (the audit's cmd) -> the Glue API calls AWS's client makes for it
#: (awslabs/aws-glue-data-catalog-client-for-apache-hive-metastore, GlueMetastoreClientDelegate
#: and DefaultAWSGlueMetastore). ``get_table`` also serves ``tableExists``, which checks the
#: database first (``databaseExists`` -> GetDatabase); ``create_table`` and ``alter_table``
#: check that the table exists first the same way; ``add_partitions`` reads its table;
#: ``alter_partitions`` updates one partition at a time; ``drop_partition`` reads it first.
GLUE_CATALOG_ACTIONS: dict[str, tuple[str, ...]] = {
    "get_database": ("glue:GetDatabase",),
    "create_database": ("glue:CreateDatabase",),
    "get_all_databases": ("glue:GetDatabases",),
    "get_databases": ("glue:GetDatabases",),
    "get_table": ("glue:GetDatabase", "glue:GetTable"),
    "get_tables": ("glue:GetTables",),
    "create_table": ("glue:GetDatabase", "glue:GetTable", "glue:CreateTable"),
    "alter_table": ("glue:GetDatabase", "glue:GetTable", "glue:UpdateTable"),
    "get_partitions": ("glue:GetPartitions",),
    "get_partition": ("glue:GetPartition",),
    "get_partitions_by_names": ("glue:BatchGetPartition",),
    "add_partitions": ("glue:GetTable", "glue:BatchCreatePartition"),
    "alter_partitions": ("glue:UpdatePartition",),
    "drop_partition": ("glue:GetPartition", "glue:DeletePartition"),
}


_AUDIT_CMD = re.compile(r"\tcmd=(?P<cmd>.*?)\t?$")


_AUDIT_TABLE = re.compile(r"\bdb=(?P<db>\S+) tbl=(?P<table>\S+)")


@dataclass(frozen=True)
class MetastoreCall:
    """One call the metastore served: its name, database and table (None where it has none)."""

    name: str
    database: str | None
    table: str | None
    thread: str

    def __str__(self) -> str:
        target = ".".join(p for p in (self.database, self.table) if p)
        return f"{self.name} {target}".strip()


@contextmanager
def metastore_audit(spark: Any, log: Path) -> Iterator[Callable[[], list[MetastoreCall]]]:
    """The shared SparkSession's metastore audit lines written to ``log`` (a log4j2 file
    appender added to the running JVM's configuration, the logger at INFO and not additive:
    the console stays as quiet as before), then the configuration as it was. Yields a
    function that reads the calls recorded so far."""
    jvm = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern("%t\t%m%n").build()
    appender = (
        log4j.core.appender.FileAppender.newBuilder()
        .setName(f"cdclake-iam-metastore-audit-{uuid.uuid4().hex[:8]}")
        .withFileName(str(log))
        .setLayout(layout)
        .setImmediateFlush(True)
        .setConfiguration(config)
        .build()
    )
    appender.start()
    config.addAppender(appender)
    logger = (
        log4j.core.config.LoggerConfig.newBuilder()
        .withLoggerName(METASTORE_AUDIT_LOGGER)
        .withLevel(log4j.Level.INFO)
        .withAdditivity(False)
        .withConfig(config)
        .build()
    )
    logger.addAppender(appender, log4j.Level.INFO, None)
    config.addLogger(METASTORE_AUDIT_LOGGER, logger)
    context.updateLoggers()
    try:
        yield lambda: metastore_calls(log.read_text() if log.exists() else "")
    finally:
        config.removeLogger(METASTORE_AUDIT_LOGGER)
        config.getAppenders().remove(appender.getName())
        context.updateLoggers()
        appender.stop()


def metastore_calls(audit: str) -> list[MetastoreCall]:
    """The calls of an audit log written by :func:`metastore_audit` ("<thread>\\t<line>").

    ``add_partitions`` is audited without its table: it is the table the same thread named
    last (the client reads the table before it adds partitions to it). A line that is no
    known call raises, naming it: an unmapped call must not pass unchecked."""
    calls: list[MetastoreCall] = []
    last_table: dict[str, tuple[str, str]] = {}
    for line in audit.splitlines():
        if not line.strip():
            continue
        thread, _, message = line.partition("\t")
        found = _AUDIT_CMD.search(message)
        if found is None:
            raise ValueError(f"not a metastore audit line: {line[:200]}")
        cmd = found["cmd"]
        if cmd.startswith(METASTORE_HOUSEKEEPING):
            continue
        name = re.split(r"[\s:]", cmd, maxsplit=1)[0]
        if name not in GLUE_CATALOG_ACTIONS:
            raise LookupError(f"no Glue mapping for metastore call {cmd[:200]!r}")
        database: str | None = None
        table: str | None = None
        if named := _AUDIT_TABLE.search(cmd):
            database, table = named["db"], named["table"]
        elif name == "create_table":
            created = re.search(r"Table\(tableName:(?P<t>[^,]+), dbName:(?P<d>[^,]+),", cmd)
            if created is None:
                raise ValueError(f"create_table without its table: {cmd[:200]}")
            database, table = created["d"], created["t"]
        elif name == "create_database":
            created = re.search(r"Database\(name:(?P<d>[^,]+),", cmd)
            if created is None:
                raise ValueError(f"create_database without its name: {cmd[:200]}")
            database = created["d"]
        elif name == "get_database":
            database = cmd.split(":", 1)[1].strip()
        elif name == "add_partitions":
            if thread not in last_table:
                raise LookupError(f"add_partitions on thread {thread} names no table before it")
            database, table = last_table[thread]
        if database and table:
            last_table[thread] = (database, table)
        calls.append(MetastoreCall(name, database, table, thread))
    return calls


def glue_catalog_arns(
    database: str | None, table: str | None, account: str, region: str = REGION
) -> tuple[str, ...]:
    """What Glue authorizes a call on: the catalog, the database, the table (each must be
    allowed: docs.aws.amazon.com/glue/latest/dg/glue-specifying-resource-arns.html)."""
    base = f"arn:{PARTITION}:glue:{region}:{account}"
    arns = [f"{base}:catalog"]
    if database:
        arns.append(f"{base}:database/{database}")
        if table:
            arns.append(f"{base}:table/{database}/{table}")
    return tuple(arns)


def glue_catalog_accesses(
    calls: Sequence[MetastoreCall],
    account: str,
    databases: Mapping[str, str],
    region: str = REGION,
) -> list[Access]:
    """The Glue authorizations of metastore calls (:data:`GLUE_CATALOG_ACTIONS`), each
    database renamed by ``databases`` (the test's own database -> the template's)."""
    accesses = []
    for call in calls:
        database = databases.get(call.database or "", call.database)
        arns = glue_catalog_arns(database, call.table, account, region)
        for action in GLUE_CATALOG_ACTIONS[call.name]:
            # Database calls name no table; a table's GetDatabase is on its database.
            scoped = arns[:2] if action in ("glue:GetDatabase", "glue:CreateDatabase") else arns
            accesses += [Access(action, arn, (), str(call)) for arn in scoped]
    return accesses
