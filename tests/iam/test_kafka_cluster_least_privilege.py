"""The MSK Connect service execution role's kafka-cluster statements, against what a real Kafka
Connect worker asks of the broker.

No moto service enforces MSK's Kafka data plane. The local capture stack runs the same Kafka
Connect (3.7, MSK Connect's runtime) with the Debezium PostgreSQL source and the stand-in S3
sink, against a broker whose authorizer allows everything and logs every decision. Each decision
a client made is mapped to the kafka-cluster action AWS documents for it (plus the actions AWS
lists as required, and kafka-cluster:Connect on the cluster), its resource renamed to what it is
called on MSK in dev, and evaluated against the capture stack's statements, verbatim.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from connectors.configs import (
    connector_name,
    heartbeat_changes_topic,
    heartbeat_topic,
    offsets_topic,
    topic_name,
)
from environment.config import EnvironmentConfig, load_config
from environment.names import notifications_topic
from tests.iam.iam_helpers.kafka import (
    KAFKA_RECORDED_TABLES,
    KafkaRecording,
    authorizer_decisions,
    client_decisions,
    kafka_accesses,
    kafka_cluster_statements,
    msk_arn,
)
from tests.iam.iam_helpers.statements import (
    Access,
    allowing,
    label,
    needed_for,
    unallowed,
    unexercised_actions,
)
from tests.iam.iam_helpers.templates import Physical, logical_id, resolver_with, role_policy

pytestmark = [pytest.mark.cdk, pytest.mark.postgres, pytest.mark.slow]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "iam.md"
ENV = "dev"
#: MSK's cluster ARNs end in "<cluster uuid>-<n>" (docs' "Authorization policy resources").
CLUSTER_UUID = "0d9f3f1e-6f8a-4c5e-9c31-2b7d1a4e8f60-2"
#: MSK Connect names its workers' group and config/status topics itself, per connector, under
#: this prefix (AWS's example service execution role policy grants it); the local worker sets
#: its own names (group.id, config.storage.topic, status.storage.topic) in their place.
MSK_CONNECT_PREFIX = "__amazon_msk_connect_"
#: Actions the role grants that no recorded decision needs, and why they stay (docs/iam.md).
UNEXERCISED = {
    "kafka-cluster:DescribeCluster": (
        "no request of the workers is authorized as DESCRIBE on the cluster; AWS's service "
        "execution role example grants it with Connect"
    ),
    "kafka-cluster:AlterTopic": (
        "no ALTER on a topic (CreatePartitions); Connect never alters the topics it created"
    ),
    "kafka-cluster:WriteDataIdempotently": (
        "Kafka Connect 3.7 sets enable.idempotence=false on its producers (Worker."
        "baseProducerConfigs) unless the worker sets producer.enable.idempotence: no "
        "InitProducerId, no IDEMPOTENT_WRITE"
    ),
}


@pytest.fixture(scope="module")
def dev() -> EnvironmentConfig:
    return load_config(ENV)


@pytest.fixture(scope="module")
def cluster_arn(dev: EnvironmentConfig) -> str:
    cluster = dev.resource_name("msk")
    return f"arn:aws:kafka:{dev.region}:{dev.account}:cluster/{cluster}/{CLUSTER_UUID}"


@pytest.fixture(scope="module")
def statements(
    templates: dict[str, dict[str, Any]], account: str, dev: EnvironmentConfig, cluster_arn: str
) -> list[dict[str, Any]]:
    """The role's kafka-cluster statements as synthesized, the cluster named by ``cluster_arn``."""
    capture = templates["capture"]
    cluster = logical_id(capture, "AWS::MSK::Cluster", "KafkaCluster")
    role = logical_id(capture, "AWS::IAM::Role", "ConnectorsServiceExecutionRole")
    resolve = resolver_with(
        templates,
        account,
        dev.region,
        {"capture": {cluster: Physical(cluster_arn, {"Arn": cluster_arn})}},
    )
    found = kafka_cluster_statements(role_policy(capture, role).statements)
    return [resolve(s, "capture") for s in found]


def msk_names(
    local: EnvironmentConfig, dev: EnvironmentConfig, worker: Mapping[str, str]
) -> dict[tuple[str, str], list[str]]:
    """Each topic and group the local worker used -> its name(s) on MSK in dev."""
    connectors = [connector_name(dev, "debezium-source"), connector_name(dev, "s3-sink")]
    names = {("Topic", topic_name(local, t)): [topic_name(dev, t)] for t in local.lake_tables}
    names[("Topic", heartbeat_topic(local))] = [heartbeat_topic(dev)]
    names[("Topic", heartbeat_changes_topic(local))] = [heartbeat_changes_topic(dev)]
    names[("Topic", notifications_topic(local.prefix))] = [notifications_topic(dev.prefix)]
    names[("Topic", offsets_topic(local))] = [offsets_topic(dev)]
    # A sink's consumer group is Kafka Connect's "connect-<connector name>".
    sink = connector_name(local, "s3-sink")
    names[("Group", f"connect-{sink}")] = [f"connect-{connector_name(dev, 's3-sink')}"]
    for setting, role in (("config.storage.topic", "configs"), ("status.storage.topic", "status")):
        names[("Topic", worker[setting])] = [f"{MSK_CONNECT_PREFIX}{role}_{c}" for c in connectors]
    names[("Group", worker["group.id"])] = [f"{MSK_CONNECT_PREFIX}{c}" for c in connectors]
    return names


@pytest.fixture(scope="module")
def accesses(
    kafka_recording: KafkaRecording, dev: EnvironmentConfig, cluster_arn: str
) -> list[Access]:
    decisions = client_decisions(authorizer_decisions(kafka_recording.log))
    names = msk_names(load_config("local"), dev, kafka_recording.worker)
    return kafka_accesses(decisions, cluster_arn, names)


def _shown(accesses: list[Access]) -> str:
    return "\n".join(sorted({f"{a.action} {a.resource} ({a.request})" for a in accesses}))


def test_kafka_cluster_recording_covers_the_connectors_work_recorded(
    accesses: list[Access], dev: EnvironmentConfig, cluster_arn: str
) -> None:
    """The run wrote each lake topic, the sink read it and committed its group's offsets."""
    seen = {(a.action, a.resource) for a in accesses}
    sink_group = msk_arn(cluster_arn, "Group", f"connect-{connector_name(dev, 's3-sink')}")
    assert ("kafka-cluster:AlterGroup", sink_group) in seen
    for table in map(load_config("local").lake_table, KAFKA_RECORDED_TABLES):
        topic = msk_arn(cluster_arn, "Topic", topic_name(dev, table))
        for action in ("CreateTopic", "WriteData", "ReadData"):
            assert (f"kafka-cluster:{action}", topic) in seen, (action, topic)


def test_kafka_cluster_recorded_operations_all_allowed(
    statements: list[dict[str, Any]], accesses: list[Access]
) -> None:
    assert statements, "the role has no kafka-cluster statement"
    denied = unallowed(statements, accesses)
    assert not denied, "not allowed by the role's kafka-cluster statements:\n" + _shown(denied)


def test_kafka_cluster_each_statement_needed_by_a_recorded_operation(
    statements: list[dict[str, Any]], accesses: list[Access]
) -> None:
    needed = needed_for(statements, accesses)
    unneeded = [label(s) for i, s in enumerate(statements) if i not in needed]
    assert not unneeded, f"statements no recorded operation needs: {unneeded}"


def test_kafka_cluster_unexercised_actions_match_docs(
    statements: list[dict[str, Any]], accesses: list[Access]
) -> None:
    """Granted but never asked for: exactly the actions documented as such, each named in
    docs/iam.md."""
    assert unexercised_actions(statements, accesses) == set(UNEXERCISED)
    docs = DOCS.read_text()
    assert all(f"`{action}`" in docs for action in UNEXERCISED)


def test_kafka_cluster_needed_statements_match_docs_table(
    statements: list[dict[str, Any]], accesses: list[Access]
) -> None:
    needed = needed_for(statements, accesses)
    actions = sorted({a.action for a in accesses})
    cells = [
        "MSK Connect workers (Kafka protocol)",
        ", ".join(f"`{a}`" for a in actions),
        "<br>".join(f"`{label(statements[i])}`" for i in sorted(needed)),
        "recorded (the local broker's authorizer log), evaluated against the statements",
    ]
    row = "| " + " | ".join(cells) + " |"
    assert row in DOCS.read_text(), row


def test_kafka_cluster_topic_of_another_environment_denied(
    statements: list[dict[str, Any]], cluster_arn: str
) -> None:
    """The topic statement is scoped: a prod topic on the same cluster is not writable."""
    prod = load_config("prod")
    topic = msk_arn(cluster_arn, "Topic", topic_name(prod, prod.lake_tables[0]))
    assert not allowing(statements, "kafka-cluster:WriteData", topic)
