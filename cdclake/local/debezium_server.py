"""Debezium Server beside the local stack (the fan-out's source), as the ECS task runs it.

From the distribution in ``jvm/lib/debezium-server`` (unpacked once), with the environment the
ECS task definition gets (``connectors.configs``, routed by the ``DebeziumServer``
construct), changed only in ``server_overrides``; its sink is Kinesis on the stack's moto
server, one stream per fan-out table named after its Debezium topic (:func:`stream_names`).

State folder additions::

    fanout/offsets.dat        Debezium Server's offsets (EFS in the task)
    fanout/debezium-server.env.json  Debezium Server's environment as started (no secrets)
"""

from __future__ import annotations

import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

import requests

from cdclake.local import processes
from cdclake.local.processes import StackError, Tracked
from cdclake.local.runtime import (
    AWS_ENV,
    JVM_OPTS,
    StackHandle,
    State,
    cdk_components,
    java_binary,
)
from connectors.configs import (
    DatabaseEndpoint,
    debezium_server_properties,
    environment_variables,
    topic_name,
)
from environment.config import EnvironmentConfig
from environment.paths import REPO_ROOT

SERVER_LIB = REPO_ROOT / "jvm" / "lib" / "debezium-server"


def stream_names(config: EnvironmentConfig) -> dict[str, str]:
    """Table -> local Kinesis stream: the table's Debezium topic (CloudFormation's name in AWS)."""
    return {t.name: topic_name(config, t) for t in config.fanout_tables}


@dataclass(frozen=True)
class ServerEndpoints:
    postgres_port: int
    aws_endpoint: str
    http_port: int
    offsets_file: str


def server_overrides(config: EnvironmentConfig) -> dict[str, str]:
    """Environment variables the local Debezium Server gets differently from the ECS task."""
    overrides = {
        "DEBEZIUM_SOURCE_DATABASE_HOSTNAME": "endpoint",
        "DEBEZIUM_SOURCE_DATABASE_PORT": "endpoint",
        "DEBEZIUM_SOURCE_DATABASE_SSLMODE": "endpoint (the local server has no TLS certificate)",
        "DEBEZIUM_SOURCE_OFFSET_STORAGE_FILE_FILENAME": "offsets path (state folder, not EFS)",
        "DEBEZIUM_SINK_KINESIS_ENDPOINT": "endpoint (moto; added)",
        "QUARKUS_HTTP_PORT": "endpoint (a free port; the task's is 8080)",
        "QUARKUS_HTTP_HOST": "endpoint (127.0.0.1; added: Quarkus listens on every interface)",
    }
    for index in range(len(config.fanout_tables)):
        overrides[f"DEBEZIUM_TRANSFORMS_STREAM{index}_REPLACEMENT"] = (
            "endpoint (stream name: CloudFormation's in AWS, the topic name here)"
        )
    return overrides


def task_environment(
    config: EnvironmentConfig,
    *,
    database: DatabaseEndpoint,
    offsets_file: str,
    streams: dict[str, str],
) -> dict[str, str]:
    """The container environment ``DebeziumServer`` gives the ECS task (streams: topic -> name)."""
    debezium_server, _, _ = cdk_components()
    properties = debezium_server.stream_routes(
        debezium_server_properties(config, database=database, offsets_file=offsets_file), streams
    )
    result: dict[str, str] = environment_variables(properties)
    return result


def server_environment(config: EnvironmentConfig, endpoints: ServerEndpoints) -> dict[str, str]:
    """The task's environment with only ``server_overrides`` changed (no secrets in it)."""
    database = DatabaseEndpoint(
        hostname="127.0.0.1",
        port=endpoints.postgres_port,
        dbname=config.database.name,
        secret_arn="local",
    )
    topics = {topic_name(config, config.table(t)): s for t, s in stream_names(config).items()}
    env = task_environment(
        config, database=database, offsets_file=endpoints.offsets_file, streams=topics
    )
    env["DEBEZIUM_SOURCE_DATABASE_SSLMODE"] = "disable"
    env["DEBEZIUM_SINK_KINESIS_ENDPOINT"] = endpoints.aws_endpoint
    env["QUARKUS_HTTP_PORT"] = str(endpoints.http_port)
    env["QUARKUS_HTTP_HOST"] = "127.0.0.1"
    return env


def server_home() -> Path:
    """Debezium Server unpacked from the distribution ``make setup`` resolved (once)."""
    archives = sorted(SERVER_LIB.glob("debezium-server-dist-*.tar.gz"))
    if not archives:
        raise StackError(
            f"{SERVER_LIB} has no debezium-server-dist-*.tar.gz; resolve it with "
            "`mvn -B -q -f jvm/pom.xml dependency:copy-dependencies` (part of `make setup`)"
        )
    archive = archives[-1]
    version = archive.name.removeprefix("debezium-server-dist-").removesuffix(".tar.gz")
    home = SERVER_LIB / f"debezium-server-{version}"
    marker = home / ".unpacked"
    if marker.exists():
        return home
    staging = SERVER_LIB / f".unpacking-{os.getpid()}"
    with tarfile.open(archive) as tar:
        # Cassandra's connectors (connectors/) are not needed; lib/ has PostgreSQL and Kinesis.
        members = [
            m
            for m in tar.getmembers()
            if m.name.startswith("debezium-server/")
            and not m.name.startswith("debezium-server/connectors/")
        ]
        tar.extractall(staging, members=members, filter="data")
    if home.exists():
        import shutil

        shutil.rmtree(home)
    (staging / "debezium-server").rename(home)
    staging.rmdir()
    if not any((home / "lib").glob("debezium-server-kinesis-*.jar")):
        raise StackError(f"{archive.name} has no Kinesis sink (lib/debezium-server-kinesis-*.jar)")
    marker.touch()
    return home


def start(
    stack: StackHandle, state: State, aws_endpoint: str, folder: Path, *, timeout: float
) -> Tracked:
    """Debezium Server on ``state.ports["debezium-server"]``, recorded, once it reports healthy."""

    home = server_home()
    endpoints = ServerEndpoints(
        postgres_port=state.ports["postgres"],
        aws_endpoint=aws_endpoint,
        http_port=state.ports["debezium-server"],
        offsets_file=str(folder / "offsets.dat"),
    )
    env = server_environment(stack.config, endpoints)
    (folder / "debezium-server.env.json").write_text(json.dumps(env, indent=2, sort_keys=True))
    user, password = stack.replication_credentials()
    runner = next(home.glob("debezium-server-dist-*-runner.jar"))
    proc = processes.spawn(
        "debezium-server",
        [
            java_binary(),
            *JVM_OPTS,
            # The AWS SDK's default wire format for Kinesis is CBOR, which moto does not
            # read (it answers 500); JSON is the same API.
            "-Daws.cborEnabled=false",
            "-cp",
            f"{runner}:{home / 'conf'}:{home / 'lib'}/*",
            "io.debezium.server.Main",
        ],
        log=stack.log_path("debezium-server"),
        cwd=folder,
        env={
            **os.environ,
            **env,
            **AWS_ENV,
            # What ECS injects from Secrets Manager as the task's `secrets`.
            "DEBEZIUM_SOURCE_DATABASE_USER": user,
            "DEBEZIUM_SOURCE_DATABASE_PASSWORD": password,
        },
    )
    state.processes["debezium-server"] = proc
    stack.save_state(state)
    processes.wait_for(
        "Debezium Server health",
        lambda: _healthy(state.ports["debezium-server"]),
        timeout=timeout,
        proc=proc,
    )
    return proc


def _healthy(port: int) -> bool:
    response = requests.get(f"http://127.0.0.1:{port}/q/health", timeout=5)
    return response.status_code == 200 and response.json().get("status") == "UP"
