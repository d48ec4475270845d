"""The local SparkSession: embedded Spark with an embedded (Derby) Hive metastore.

On Glue the session comes from GlueContext instead; see ``glue_jobs/merge_job.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

HUDI_JAR_ENV = "CDCLAKE_HUDI_JAR"  # a local hudi-spark3.5-bundle_2.12-0.15.0.jar
LOG4J = Path(__file__).with_name("log4j2.properties")
HUDI_PACKAGE = "org.apache.hudi:hudi-spark3.5-bundle_2.12:0.15.0"


def local_session(
    warehouse: str | Path, *, app_name: str = "cdclake", hudi_jar: str | None = None
) -> SparkSession:
    """A small local session whose catalog lives under ``warehouse``.

    Session time zone is UTC so timestamps mean the same thing everywhere. Shuffle
    partitions are kept low: local runs are small, and 200 tiny tasks cost more
    than they save.
    """
    warehouse = Path(warehouse).resolve()
    warehouse.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jar = hudi_jar or os.environ.get(HUDI_JAR_ENV)
    metastore = warehouse / "metastore_db"
    builder = (
        SparkSession.builder.master(os.environ.get("CDCLAKE_SPARK_MASTER", "local[2]"))
        .appName(app_name)
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={metastore};create=true",
        )
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dderby.system.home={warehouse} -Dlog4j.configurationFile={LOG4J}",
        )
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", os.environ.get("CDCLAKE_SHUFFLE_PARTITIONS", "8"))
        .config("spark.default.parallelism", "4")
        .config("spark.sql.sources.partitionOverwriteMode", "static")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", os.environ.get("CDCLAKE_DRIVER_MEMORY", "4g"))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .enableHiveSupport()
    )
    if jar:
        builder = (
            builder.config("spark.jars", jar)
            .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
            .config(
                "spark.sql.catalog.spark_catalog",
                "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
            )
            .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def hudi_available(spark: SparkSession) -> bool:
    """Whether the Hudi Spark bundle is on this session's classpath."""
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(  # type: ignore[union-attr]
            "org.apache.hudi.DefaultSource"
        )
    except Exception:
        return False
    return True
