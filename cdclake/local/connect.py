"""The local stack's Kafka Connect: the MSK Connect configurations, as ``connectors/``
generates them, with local endpoints; its REST API; and the distributed worker it runs.

Only endpoints, credentials and the bucket change (``SOURCE_OVERRIDES`` / ``SINK_OVERRIDES``
name every key that may differ; tests/local checks nothing else does). Passwords stay out of
connector configs here too: the secrets config provider becomes Kafka's own
``FileConfigProvider`` over a file in the state folder, readable by its owner only.

The worker (:func:`start_worker`) keeps ``worker.properties`` and its log4j settings in
``connect/`` of the state folder, and a ``plugin.path`` of one folder per plugin in
``plugins/`` (Debezium's PostgreSQL connector; the S3 sink's jars with the local stand-in for
Confluent's sink, compiled from ``java/`` here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from cdclake.local import processes
from cdclake.local.kafka import LOG4J
from cdclake.local.processes import StackError, Tracked
from cdclake.local.runtime import AWS_ENV, JVM_OPTS, StackHandle, java_binary, jvm_lib
from connectors.configs import (
    CONFIG_PROVIDER,
    S3_IMPORT_PROVIDER,
    DatabaseEndpoint,
    connector_name,
    debezium_source_config,
    render_properties,
    s3_sink_config,
    worker_properties,
)
from environment.config import EnvironmentConfig

SINK_SOURCE = Path(__file__).resolve().parent / "java"
LOCAL_S3_SINK_CLASS = "io.cdclake.local.S3Sink"
FILE_CONFIG_PROVIDER_CLASS = "org.apache.kafka.common.config.provider.FileConfigProvider"
# One broker: every replicated topic has one copy.
LOCAL_REPLICATION_FACTOR = 1

# Keys of the generated configs that the local stack sets differently, and why.
SOURCE_OVERRIDES = {
    "database.hostname": "endpoint",
    "database.port": "endpoint",
    "database.user": "credential (the secrets file instead of a secret ARN)",
    "database.password": "credential (the secrets file instead of a secret ARN)",
    "database.sslmode": "endpoint (the local server has no TLS certificate)",
    "database.sslrootcert": "endpoint (the local server has no TLS certificate)",
    "topic.creation.default.replication.factor": "endpoint (one broker)",
}
SINK_OVERRIDES = {
    "connector.class": "stand-in for Confluent's S3 sink (not on a reachable registry)",
    "store.url": "endpoint (moto)",
    "s3.bucket.name": "bucket",
    "s3.sse.algorithm": "credential (no KMS locally)",
    "s3.sse.kms.key.id": "credential (no KMS locally)",
}
WORKER_OVERRIDES = {
    f"config.providers.{CONFIG_PROVIDER}.class": "credential (file provider)",
    f"config.providers.{CONFIG_PROVIDER}.param.region": "credential (file provider)",
    # No RDS CA bundle to fetch from S3 (and no msk-config-providers on the plugin path).
    "config.providers": "endpoint (no s3import: the local server has no TLS certificate)",
    f"config.providers.{S3_IMPORT_PROVIDER}.class": "endpoint (no TLS certificate)",
    f"config.providers.{S3_IMPORT_PROVIDER}.param.region": "endpoint (no TLS certificate)",
    "offset.storage.replication.factor": "endpoint (one broker)",
}


@dataclass(frozen=True)
class LocalEndpoints:
    postgres_port: int
    kafka_port: int
    connect_port: int
    s3_port: int
    bucket: str
    secrets_file: Path

    @property
    def s3_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def connect_url(self) -> str:
        return f"http://127.0.0.1:{self.connect_port}"


def local_database(config: EnvironmentConfig, endpoints: LocalEndpoints) -> DatabaseEndpoint:
    return DatabaseEndpoint(
        hostname="127.0.0.1",
        port=endpoints.postgres_port,
        dbname=config.database.name,
        secret_arn=str(endpoints.secrets_file),
    )


def source_config(config: EnvironmentConfig, endpoints: LocalEndpoints) -> dict[str, str]:
    """The generated Debezium source config, pointed at the local PostgreSQL and broker."""
    settings = debezium_source_config(
        config,
        database=local_database(config, endpoints),
        replication_factor=LOCAL_REPLICATION_FACTOR,
        secret_id=str(endpoints.secrets_file),
    )
    # The secret id is the secrets file: the generated ${secretsmanager:<id>:password} then
    # resolves through the file provider, and user and password need no override.
    settings["database.sslmode"] = "disable"
    settings.pop("database.sslrootcert", None)
    return settings


def sink_config(config: EnvironmentConfig, endpoints: LocalEndpoints) -> dict[str, str]:
    """The generated S3 sink config, writing into the moto bucket."""
    settings = s3_sink_config(config, bucket_name=endpoints.bucket, kms_key_arn=None)
    settings.pop("s3.sse.algorithm", None)
    settings.pop("s3.sse.kms.key.id", None)
    settings["connector.class"] = LOCAL_S3_SINK_CLASS
    settings["store.url"] = endpoints.s3_endpoint
    return settings


def worker_config(
    config: EnvironmentConfig, *, endpoints: LocalEndpoints, plugin_path: Path
) -> dict[str, str]:
    """MSK Connect's worker configuration plus what MSK Connect sets itself for a worker."""
    settings = worker_properties(config)
    settings.pop(f"config.providers.{CONFIG_PROVIDER}.param.region", None)
    settings[f"config.providers.{CONFIG_PROVIDER}.class"] = FILE_CONFIG_PROVIDER_CLASS
    settings.update(
        {
            "bootstrap.servers": f"127.0.0.1:{endpoints.kafka_port}",
            "group.id": f"{config.prefix}-connect",
            "config.storage.topic": f"{config.prefix}.connect-configs",
            "status.storage.topic": f"{config.prefix}.connect-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "listeners": endpoints.connect_url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(endpoints.connect_port),
            "plugin.path": str(plugin_path),
        }
    )
    return settings


def connector_configs(
    config: EnvironmentConfig, endpoints: LocalEndpoints
) -> dict[str, dict[str, str]]:
    """Connector name -> config, named as MSK Connect names them."""
    return {
        connector_name(config, "debezium-source"): source_config(config, endpoints),
        connector_name(config, "s3-sink"): sink_config(config, endpoints),
    }


class ConnectClient:
    """The Kafka Connect REST API of the local worker."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def ready(self) -> bool:
        return requests.get(f"{self.url}/connector-plugins", timeout=5).status_code == 200

    def plugins(self) -> list[str]:
        response = requests.get(f"{self.url}/connector-plugins", timeout=10)
        response.raise_for_status()
        return [p["class"] for p in response.json()]

    def put_config(self, name: str, settings: dict[str, str]) -> None:
        """Create or update; the worker answers 409 while it rebalances, so retry briefly."""
        for _ in range(30):
            response = requests.put(
                f"{self.url}/connectors/{name}/config", json=settings, timeout=30
            )
            if response.status_code != 409:
                break
            time.sleep(1)
        if response.status_code >= 400:
            raise RuntimeError(f"PUT {name}: {response.status_code} {response.text[:2000]}")

    def status(self, name: str) -> dict[str, Any]:
        response = requests.get(f"{self.url}/connectors/{name}/status", timeout=10)
        if response.status_code == 404:
            return {}
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def running(self, name: str) -> bool:
        status = self.status(name)
        tasks = status.get("tasks", [])
        return (
            status.get("connector", {}).get("state") == "RUNNING"
            and bool(tasks)
            and all(t.get("state") == "RUNNING" for t in tasks)
        )

    def failure(self, name: str) -> str | None:
        """The first FAILED trace of the connector or a task, if any."""
        status = self.status(name)
        for part in [status.get("connector", {}), *status.get("tasks", [])]:
            if part.get("state") == "FAILED":
                return str(part.get("trace", "FAILED"))[:4000]
        return None

    def restart(self, name: str) -> None:
        """Restart the connector and all its tasks."""
        requests.post(
            f"{self.url}/connectors/{name}/restart?includeTasks=true&onlyFailed=false", timeout=30
        ).raise_for_status()


def dump(settings: dict[str, str]) -> str:
    return json.dumps(settings, indent=2, sort_keys=True) + "\n"


# -- the worker process ---------------------------------------------------------------------------


def start_worker(stack: StackHandle, endpoints: LocalEndpoints, *, timeout: float) -> Tracked:
    """The distributed worker on ``endpoints.connect_port``, once its REST API answers."""
    lib = jvm_lib("kafka")
    base = stack.root / "connect"
    base.mkdir(parents=True, exist_ok=True)
    worker = worker_config(stack.config, endpoints=endpoints, plugin_path=_plugin_path(stack.root))
    properties = base / "worker.properties"
    properties.write_text(render_properties(worker))
    log4j = base / "log4j.properties"
    log4j.write_text(LOG4J)
    proc = processes.spawn(
        "connect",
        [
            java_binary(),
            *JVM_OPTS,
            f"-Dlog4j.configuration=file:{log4j}",
            "-cp",
            f"{lib}/*",
            "org.apache.kafka.connect.cli.ConnectDistributed",
            str(properties),
        ],
        log=stack.log_path("connect"),
        env={**os.environ, **AWS_ENV},
    )
    client = ConnectClient(endpoints.connect_url)
    processes.wait_for("Kafka Connect REST", client.ready, timeout=timeout, proc=proc)
    return proc


def _plugin_path(root: Path) -> Path:
    """plugin.path with one folder per plugin, as MSK Connect gives each plugin its own."""
    plugins = root / "plugins"
    debezium = plugins / "debezium-postgres"
    sink = plugins / "s3-sink"
    if plugins.exists():
        shutil.rmtree(plugins)
    debezium.mkdir(parents=True)
    sink.mkdir(parents=True)
    for jar in jvm_lib("debezium-postgres").glob("*.jar"):
        (debezium / jar.name).symlink_to(jar)
    for jar in jvm_lib("s3-sink").glob("*.jar"):
        (sink / jar.name).symlink_to(jar)
    _build_sink(root, sink / "cdclake-local-s3-sink.jar")
    return plugins


def _build_sink(root: Path, target: Path) -> None:
    classes = root / "build" / "s3-sink"
    if classes.exists():
        shutil.rmtree(classes)
    classes.mkdir(parents=True)
    sources = [str(p) for p in SINK_SOURCE.rglob("*.java")]
    classpath = f"{jvm_lib('kafka')}/*:{jvm_lib('s3-sink')}/*"
    result = subprocess.run(
        [
            java_binary("javac"),
            "--release",
            "17",
            "-nowarn",
            "-d",
            str(classes),
            "-cp",
            classpath,
            *sources,
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise StackError(f"compiling the local S3 sink failed:\n{result.stderr}")
    with zipfile.ZipFile(target, "w") as jar:
        for path in sorted(classes.rglob("*.class")):
            jar.write(path, path.relative_to(classes).as_posix())
