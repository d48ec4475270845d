"""The local SparkSession: embedded Spark with a Hive metastore: the local stack's service
(thrift, :data:`METASTORE_URI_ENV`) when one runs, else an embedded Derby one.

On Glue the session comes from GlueContext instead; see ``glue_jobs/merge_job.py``.
:data:`SPARK_CONF` is what both sessions share: the Glue job passes it as its ``--conf``
(``stacks/components/merge_jobs.py``), the local session sets it. This module imports no
Spark at import time so that the CDK app can read it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JARS_ENV = "CDCLAKE_SPARK_JARS"  # a folder of jars to add (default: the repo's jvm/lib/spark)
# The thrift URI of a metastore service to sync to, as the Glue job syncs to Glue's catalog; the
# local stack sets it for the merges it runs (cdclake.local.lake). Unset: embedded Derby.
METASTORE_URI_ENV = "CDCLAKE_METASTORE_URI"
# More options for the local driver's JVM. A process that merges a few small files and exits
# gains from `-XX:TieredStopAtLevel=1`: HotSpot's optimising compiler costs a cold merge more
# CPU than it gives back (docs/merge-job.md); a long run on big input wants it.
SHUFFLE_PARTITIONS_ENV = "CDCLAKE_SHUFFLE_PARTITIONS"
JAVA_OPTIONS_ENV = "CDCLAKE_DRIVER_JAVA_OPTIONS"
LOG4J = Path(__file__).with_name("log4j2.properties")
# `make setup` resolves jvm/spark/pom.xml (the Hudi bundle Glue 5.0 runs) into this folder.
REPO_JARS = Path(__file__).resolve().parents[3] / "jvm" / "lib" / "spark"
HUDI_BUNDLE = "hudi-spark3.5-bundle_2.12-0.15.0.jar"
# Built by `make setup` from jvm/local-fs: file:// without a `chmod` process per file written
# (pyspark has no Hadoop native library; a small Hudi commit forked 120 of them, 0.6 s).
LOCAL_FS_JAR, LOCAL_FS_CLASS = "cdclake-local-fs.jar", "io.cdclake.local.NioLocalFileSystem"
# Built by `make setup` from jvm/merge: the event decoder of the JVM parse lane (jvm_parse.py).
# The Glue job ships the same file (--extra-jars).
MERGE_JAR = "cdclake-merge.jar"
# Spark settings that change what the merge reads or writes, the same on Glue and here. They
# must be set before the SparkContext starts (on Glue: the job's --conf), so the job script
# cannot set them itself. Hudi 0.15 wants its Kryo registrator (without it Hudi's own classes
# go through Kryo's generic path); the extension and catalog are Hudi's Spark SQL support;
# timestamps are UTC and stored as microseconds everywhere. Generated code is kept to methods
# HotSpot compiles (8000 bytes, as Spark's documentation advises): a projection over a wide
# table's columns makes one method far larger, which the JVM would only interpret (the JVM
# lane's checks, when they were Spark expressions: 1M events, read 24 -> 21 s).
SPARK_CONF: Mapping[str, str] = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    "spark.sql.hive.convertMetastoreParquet": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.codegen.hugeMethodLimit": "8000",
}


class MissingJars(RuntimeError):
    """The Hudi bundle or the merge jar is not where the local session looks for it."""


# Hudi sizes its in-memory maps with a shaded JOL, which by default attaches the HotSpot
# Serviceability Agent (a second JVM, started per session) and the instrumentation agent, and
# prints warnings when a container forbids either. Its fallback estimate is enough for sizing.
JOL_OPTIONS = "-Djol.skipHotspotSAAttach=true -Djol.skipDynamicAttach=true"


def spark_jars() -> list[Path]:
    """The jars the local session adds to pyspark's own; the Hudi bundle and the merge jar
    must be two of them."""
    folder = Path(os.environ.get(JARS_ENV) or REPO_JARS)
    jars = sorted(folder.glob("*.jar"))
    missing = [name for name in (HUDI_BUNDLE, MERGE_JAR) if not any(j.name == name for j in jars)]
    if missing:
        raise MissingJars(
            f"{' and '.join(missing)} not found in {folder}: run `make setup` "
            f"(or set {JARS_ENV} to a folder that has them)"
        )
    return jars


def local_session(warehouse: str | Path, *, app_name: str = "cdclake") -> SparkSession:
    """A small local session whose tables live under ``warehouse``.

    The catalog is the metastore service at ``$CDCLAKE_METASTORE_URI`` when set, else an
    embedded Derby one under ``warehouse``. :data:`SPARK_CONF` as on Glue, plus what only a
    laptop needs. Shuffle partitions are kept low: local runs are small, and 200 tiny tasks
    cost more than they save. ``$CDCLAKE_DRIVER_JAVA_OPTIONS`` is added to the driver JVM's
    own options (a profiler, a compiler setting).
    """
    from pyspark.sql import SparkSession

    warehouse = Path(warehouse).resolve()
    warehouse.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = spark_jars()
    metastore = warehouse / "metastore_db"
    java_options = os.environ.get(JAVA_OPTIONS_ENV, "")
    metastore_uri = os.environ.get(METASTORE_URI_ENV)
    # The embedded Derby metastore's settings as system properties, which every HiveConf reads,
    # rather than spark.hadoop.* settings, which only Spark's own carries (with the prefixed
    # key): Hudi's catalog sync builds its own, and each time the two differed in a datanucleus
    # or jdo setting the metastore rebuilt its persistence manager factory, twice a merge
    # (about a second of every local merge). Schema verification off: Hudi's sync client checks
    # the schema version Spark's embedded Derby metastore never records, and every process after
    # the one that created it failed the sync (after the data commit) with "Version information
    # not found in metastore" (apache/hudi#6808); Glue's catalog has no such check. With it on,
    # HiveConf also forces datanucleus.schema.autoCreateAll off, which Spark turns on.
    derby = (
        ""
        if metastore_uri
        else f"-Djavax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={metastore};create=true "
        "-Dhive.metastore.schema.verification=false -Ddatanucleus.schema.autoCreateAll=true"
    )
    builder = (
        SparkSession.builder.master(os.environ.get("CDCLAKE_SPARK_MASTER", "local[2]"))
        .appName(app_name)
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dderby.system.home={warehouse} -Dlog4j.configurationFile={LOG4J} {JOL_OPTIONS} "
            f"{derby} {java_options}".strip(),
        )
        .config("spark.sql.shuffle.partitions", os.environ.get(SHUFFLE_PARTITIONS_ENV, "8"))
        .config("spark.default.parallelism", "4")
        .config("spark.sql.sources.partitionOverwriteMode", "static")
        # Hive's session state makes a folder for downloaded resources per session, in /tmp by
        # default, and never removes it: every local merge left one behind.
        .config("spark.hadoop.hive.downloaded.resources.dir", str(warehouse / ".hive-resources"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", os.environ.get("CDCLAKE_DRIVER_MEMORY", "4g"))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
        # What Glue 5.0 adds with --datalake-formats hudi. The jars go on the JVM's classpath,
        # as on Glue, not only into spark.jars' class loader: Hudi's own thread pools resolve
        # Avro classes through the system loader and would otherwise read the record index's
        # delete blocks as generic records (ClassCastException to HoodieDeleteRecord).
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.driver.extraClassPath", os.pathsep.join(str(j) for j in jars))
        .enableHiveSupport()
    )
    if any(j.name == LOCAL_FS_JAR for j in jars):
        builder = builder.config("spark.hadoop.fs.file.impl", LOCAL_FS_CLASS)
    # A rebuild's swap sets the entry's columns to the new generation's: Hive's metastore
    # refuses a column whose position now holds another type (a dropped column, text ->
    # integer), which Glue's catalog never checks (cdclake_merge.rebuild).
    builder = builder.config(
        "spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes", "false"
    )
    if metastore_uri:
        # Spark's catalog and Hudi's sync (its client reads the same Hadoop conf) both talk
        # thrift to the service, as the Glue job's do to Glue's catalog.
        builder = builder.config("spark.hadoop.hive.metastore.uris", metastore_uri)
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    for key, value in s3_settings(os.environ).items():
        builder = builder.config(f"spark.hadoop.{key}", value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # Hudi sizes objects with JOL, which prints its warnings on the JVM's stdout: that is the
    # CLI's stdout (`cdclake merge --json`). JVM output belongs on stderr with the logs, and
    # JOL's one-time notes about agents it is told not to attach (JOL_OPTIONS) nowhere: it is
    # initialised here with stdout set aside.
    jvm: Any = spark.sparkContext._jvm
    system = jvm.java.lang.System
    system.setOut(jvm.java.io.PrintStream(jvm.java.io.ByteArrayOutputStream()))
    try:
        jvm.org.apache.hudi.org.openjdk.jol.vm.VM.current()
    finally:
        system.setOut(system.err)
    return spark


def s3_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """Hadoop settings so ``s3://`` and ``s3a://`` paths work here as ``s3://`` does on Glue.

    The endpoint follows the AWS SDKs' own variables (``AWS_ENDPOINT_URL_S3``, then
    ``AWS_ENDPOINT_URL``), so one setting points boto3 and Spark at the same S3 (a moto server
    locally). Credentials come from the usual environment variables.
    """
    settings = {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.aws.credentials.provider": (
            "com.amazonaws.auth.EnvironmentVariableCredentialsProvider,"
            "com.amazonaws.auth.profile.ProfileCredentialsProvider,"
            "com.amazonaws.auth.InstanceProfileCredentialsProvider"
        ),
    }
    endpoint = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        settings |= {
            "fs.s3a.endpoint": endpoint,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https")).lower(),
        }
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region:
        settings["fs.s3a.endpoint.region"] = region
    return settings
