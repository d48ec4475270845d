"""The local stack's catalog service: the Apache Hive standalone metastore, over thrift.

On AWS the merge's Hudi sync registers each table in the Glue Data Catalog through the Hive
metastore client API (mode ``hms``), and Athena reads it from there. Here the same client
talks to a Hive metastore 3.1 (what Spark 3.5's built-in Hive 2.3.9 client speaks to), from
``jvm/lib/hive-metastore``, started and stopped with the stack:

    metastore/conf/metastore-site.xml   its settings (no secret: the stack's PostgreSQL trusts
                                        its superuser on 127.0.0.1)
    metastore/home/scripts/...          the PostgreSQL scripts of Hive's schema tool
    logs/metastore.log                  the service's output
    logs/metastore-schema.log           the schema tool's (every statement it ran)

Its tables live in the stack's PostgreSQL (database ``metastore``), with the schema Hive's own
schema tool creates (``MetastoreSchemaTool -initSchema -dbType postgres``, what production
metastores run, rather than DataNucleus creating tables as it goes); the warehouse of databases
created without a location is on the stack's moto S3 (s3a). Merges on the stack get its URI
in ``$CDCLAKE_METASTORE_URI`` (``cdclake.local.lake``); others read ``metastore_uri`` from
``LocalStack.status()`` (or :func:`uri` of the state).
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path
from xml.sax.saxutils import escape

from pg8000.native import Connection, identifier

from cdclake.local import processes
from cdclake.local.processes import StackError, Tracked
from cdclake.local.runtime import AWS_ENV, JVM_OPTS, StackHandle, State, java_binary
from environment.paths import REPO_ROOT

LIB = REPO_ROOT / "jvm" / "lib" / "hive-metastore"
HIVE_VERSION = "3.1.3"
DISTRIBUTION = f"hive-standalone-metastore-{HIVE_VERSION}-bin.tar.gz"
SCRIPTS = "scripts/metastore/upgrade/postgres"
NAME = "metastore"
DATABASE = "metastore"
SUPERUSER = "postgres"
FATAL = "Metastore Thrift Server threw an exception"
LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = stdout
appender.stdout.type = Console
appender.stdout.name = stdout
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.hms.name = org.apache.hadoop.hive.metastore.HiveMetaStore
logger.hms.level = INFO
"""


def uri(state: State) -> str:
    return f"thrift://127.0.0.1:{state.ports[NAME]}"


def warehouse(state: State) -> str:
    return f"s3a://{state.bucket}/warehouse"


def settings(state: State) -> dict[str, str]:
    """metastore-site.xml: the stack's PostgreSQL, its moto S3, and what the jars lack."""
    from cdclake_merge.session import s3_settings

    s3_endpoint = f"http://127.0.0.1:{state.ports['moto']}"
    return {
        "metastore.thrift.port": str(state.ports[NAME]),
        "metastore.warehouse.dir": warehouse(state),
        "javax.jdo.option.ConnectionURL": (
            f"jdbc:postgresql://127.0.0.1:{state.ports['postgres']}/{DATABASE}"
        ),
        "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "javax.jdo.option.ConnectionUserName": SUPERUSER,
        # The schema tool made the schema and recorded its version: check it, never alter it.
        "metastore.schema.verification": "true",
        "datanucleus.schema.autoCreateAll": "false",
        # The standalone jars lack Hive's expression proxy (it is in hive-exec): the default
        # one serves every listing by name or filter string, which is what Spark's, Hudi's
        # and Trino's clients ask for.
        "metastore.expression.proxy": (
            "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy"
        ),
        # The 3.1 default list names repl.DumpDirCleanerTask, also only in hive-exec; without
        # it the service exits at start ("class not found").
        "metastore.task.threads.always": ",".join(
            (
                "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
                "org.apache.hadoop.hive.metastore.RuntimeStatsCleanerTask",
                "org.apache.hadoop.hive.metastore.MaterializationsRebuildLockCleanerTask",
            )
        ),
        # Glue's catalog takes any column type change a sync sends (Hudi widens int to bigint);
        # Hive's default refuses "incompatible" ones, which Athena's catalog would not.
        "metastore.disallow.incompatible.col.type.changes": "false",
        **s3_settings({"AWS_ENDPOINT_URL": s3_endpoint, "AWS_REGION": AWS_ENV["AWS_REGION"]}),
    }


def render_site(values: dict[str, str]) -> str:
    rows = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in values.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}</configuration>\n'


def _lib() -> Path:
    if not (LIB / DISTRIBUTION).exists() or not any(LIB.glob("*.jar")):
        raise StackError(
            f"{LIB} has no Hive metastore; resolve it with "
            "`mvn -B -q -f jvm/pom.xml dependency:copy-dependencies` (part of `make setup`)"
        )
    return LIB


def _scripts(home: Path) -> Path:
    """The schema tool's PostgreSQL scripts, from the distribution (the jar has none)."""
    folder = home / SCRIPTS
    if not any(folder.glob("hive-schema-*.postgres.sql")):
        with tarfile.open(_lib() / DISTRIBUTION) as archive:
            for member in archive.getmembers():
                # apache-hive-metastore-<v>-bin/scripts/...: drop the top folder.
                relative = member.name.split("/", 1)[-1]
                if member.isfile() and relative.startswith(f"{SCRIPTS}/"):
                    target = home / relative
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = archive.extractfile(member)
                    assert source is not None
                    target.write_bytes(source.read())
    return home


def _connect(state: State, database: str) -> Connection:
    return Connection(
        user=SUPERUSER, host="127.0.0.1", port=state.ports["postgres"], database=database
    )


def _schema_exists(state: State) -> bool:
    admin = _connect(state, "postgres")
    try:
        if not admin.run("SELECT 1 FROM pg_database WHERE datname = :d", d=DATABASE):
            admin.run(f"CREATE DATABASE {identifier(DATABASE)}")
            return False
    finally:
        admin.close()
    conn = _connect(state, DATABASE)
    try:
        return bool(conn.run("SELECT 1 FROM pg_tables WHERE tablename = 'VERSION'"))
    finally:
        conn.close()


def _java(conf: Path, log4j: Path) -> list[str]:
    return [
        java_binary(),
        *JVM_OPTS,
        f"-Dlog4j.configurationFile={log4j}",
        "-cp",
        f"{conf}:{_lib()}/*",
    ]


def start(stack: StackHandle, state: State) -> Tracked:
    """Create the database and schema if missing, then start the service; wait for thrift."""
    base = stack.root / NAME
    conf = base / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "metastore-site.xml").write_text(render_site(settings(state)))
    log4j = conf / "log4j2.properties"
    log4j.write_text(LOG4J2)
    log = stack.log_path(NAME)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **AWS_ENV}
    if not _schema_exists(state):
        home = _scripts(base / "home")
        schema_log = stack.log_path(f"{NAME}-schema")
        with schema_log.open("ab") as out:
            made = subprocess.run(
                [
                    *_java(conf, log4j),
                    "org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool",
                    "-dbType",
                    "postgres",
                    "-initSchema",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**env, "METASTORE_HOME": str(home)},
            )
        if made.returncode != 0:
            tail = processes.log_tail(schema_log, lines=15)
            raise StackError(
                f"Hive's schema tool could not create the metastore schema in database "
                f"{DATABASE}; see {schema_log}; it ended with:\n{tail}"
            )
    port = state.ports[NAME]
    logged = log.stat().st_size if log.exists() else 0
    proc = processes.spawn(
        NAME,
        [*_java(conf, log4j), "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(port)],
        log=log,
        env=env,
    )
    processes.wait_for(
        "the Hive metastore", lambda: _serving(proc, port, log, logged), timeout=120, proc=proc
    )
    return proc


def _serving(proc: Tracked, port: int, log: Path, logged: int) -> bool:
    """Whether thrift answers. A service that failed to start logs FATAL and exits its main
    thread, but its other threads keep the JVM alive: stopped here, so the wait reports it
    with its log (and a taken port is chosen again) instead of timing out. Only what this
    start logged counts (``logged``: the log's size before it)."""
    if processes.port_open(port):
        return True
    with log.open("rb") as handle:
        handle.seek(logged)
        if FATAL.encode() in handle.read():
            processes.stop(proc, timeout=10)
    return False
