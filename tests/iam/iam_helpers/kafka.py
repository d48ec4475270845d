"""Kafka: the broker's authorization decisions, checked against kafka-cluster statements.

No moto service speaks Kafka. The local stack's broker runs Kafka's StandardAuthorizer, which
allows everything (no ACLs) and logs every decision (cdclake/local/kafka.py); each decision is
mapped to the kafka-cluster action MSK's IAM authorizer checks for it and evaluated against
the service execution role's verbatim statements.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.iam.iam_helpers.statements import Access, as_list

#: (Kafka ACL operation, resource type) -> MSK's IAM action: the "equivalent to Apache Kafka's
#: ... ACL" column of https://docs.aws.amazon.com/msk/latest/developerguide/kafka-actions.html.
MSK_ACTIONS = {
    ("DESCRIBE", "Cluster"): "kafka-cluster:DescribeCluster",
    ("ALTER", "Cluster"): "kafka-cluster:AlterCluster",
    ("DESCRIBE_CONFIGS", "Cluster"): "kafka-cluster:DescribeClusterDynamicConfiguration",
    ("ALTER_CONFIGS", "Cluster"): "kafka-cluster:AlterClusterDynamicConfiguration",
    ("IDEMPOTENT_WRITE", "Cluster"): "kafka-cluster:WriteDataIdempotently",
    ("CREATE", "Topic"): "kafka-cluster:CreateTopic",
    ("DESCRIBE", "Topic"): "kafka-cluster:DescribeTopic",
    ("ALTER", "Topic"): "kafka-cluster:AlterTopic",
    ("DELETE", "Topic"): "kafka-cluster:DeleteTopic",
    ("DESCRIBE_CONFIGS", "Topic"): "kafka-cluster:DescribeTopicDynamicConfiguration",
    ("ALTER_CONFIGS", "Topic"): "kafka-cluster:AlterTopicDynamicConfiguration",
    ("READ", "Topic"): "kafka-cluster:ReadData",
    ("WRITE", "Topic"): "kafka-cluster:WriteData",
    ("DESCRIBE", "Group"): "kafka-cluster:DescribeGroup",
    ("READ", "Group"): "kafka-cluster:AlterGroup",
    ("DELETE", "Group"): "kafka-cluster:DeleteGroup",
    ("DESCRIBE", "TransactionalId"): "kafka-cluster:DescribeTransactionalId",
    ("WRITE", "TransactionalId"): "kafka-cluster:AlterTransactionalId",
}


#: The same page's "Required actions" on the same resource (kafka-cluster:Connect, required by
#: every action, is checked on the cluster for each decision).
MSK_REQUIRED = {
    "kafka-cluster:WriteData": ("kafka-cluster:DescribeTopic",),
    "kafka-cluster:ReadData": ("kafka-cluster:DescribeTopic",),
    "kafka-cluster:AlterTopic": ("kafka-cluster:DescribeTopic",),
    "kafka-cluster:DeleteTopic": ("kafka-cluster:DescribeTopic",),
    "kafka-cluster:AlterTopicDynamicConfiguration": (
        "kafka-cluster:DescribeTopicDynamicConfiguration",
    ),
    "kafka-cluster:AlterGroup": ("kafka-cluster:DescribeGroup",),
    "kafka-cluster:DeleteGroup": ("kafka-cluster:DescribeGroup",),
    "kafka-cluster:AlterCluster": ("kafka-cluster:DescribeCluster",),
}


#: Requests between the broker and its controller (registration, heartbeats, the envelope a
#: broker forwards a client's request in): the brokers', MSK's own, never a client role's.
INTER_NODE_OPERATION = "CLUSTER_ACTION"


#: Kafka's own topics: the broker creates __consumer_offsets itself on a group's first
#: FindCoordinator (a CreateTopics without a client's envelope) and reads it for the coordinator.
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


_DECISION = re.compile(
    r"Principal = (?P<principal>\S+) is (?P<result>Allowed|Denied) operation = (?P<operation>\w+)"
    r" from host = \S+ on resource = (?P<type>\w+):(?P<pattern>LITERAL|PREFIXED):(?P<name>.+?)"
    r" for request = (?P<request>\w+) with "
)


@dataclass(frozen=True)
class KafkaDecision:
    """One authorization the broker made: operation, resource type and name, the request."""

    operation: str
    resource_type: str
    name: str
    request: str

    def __str__(self) -> str:
        return f"{self.operation} {self.resource_type}:{self.name} ({self.request})"


def authorizer_decisions(log: str) -> list[KafkaDecision]:
    """The decisions of a ``kafka.authorizer.logger`` log; a line it cannot read raises."""
    decisions = []
    for line in log.splitlines():
        if not line.strip():
            continue
        found = _DECISION.search(line)
        if found is None:
            raise ValueError(f"not an authorizer decision: {line[:200]}")
        decisions.append(
            KafkaDecision(found["operation"], found["type"], found["name"], found["request"])
        )
    return decisions


def client_decisions(decisions: Sequence[KafkaDecision]) -> list[KafkaDecision]:
    """The decisions a client's role answers for: without inter-node requests and Kafka's own
    topics. CreateTopics is authorized as CREATE on the cluster, which names no topic; the
    controller then authorizes DESCRIBE_CONFIGS on each topic of the request, so each of those
    adds a topic CREATE (MSK grants kafka-cluster:CreateTopic on topics only)."""
    kept: list[KafkaDecision] = []
    for decision in decisions:
        key = (decision.operation, decision.resource_type)
        if decision.operation == INTER_NODE_OPERATION:
            continue
        if decision.resource_type == "Topic" and decision.name in KAFKA_INTERNAL_TOPICS:
            continue
        if key == ("CREATE", "Cluster") and decision.request == "CreateTopics":
            continue
        if key == ("DESCRIBE_CONFIGS", "Topic") and decision.request == "CreateTopics":
            kept.append(KafkaDecision("CREATE", "Topic", decision.name, decision.request))
        kept.append(decision)
    return kept


def msk_arn(cluster_arn: str, resource_type: str, name: str) -> str:
    """``arn:...:topic/<cluster name>/<cluster uuid>/<name>`` (group, transactional-id alike)."""
    if resource_type == "Cluster":
        return cluster_arn
    kind = {"Topic": "topic", "Group": "group", "TransactionalId": "transactional-id"}
    head, _, rest = cluster_arn.partition(":cluster/")
    return f"{head}:{kind[resource_type]}/{rest}/{name}"


def kafka_accesses(
    decisions: Sequence[KafkaDecision],
    cluster_arn: str,
    names: Mapping[tuple[str, str], Sequence[str]],
) -> list[Access]:
    """The IAM authorizations MSK makes for client decisions: the action on the resource, its
    required actions, and ``kafka-cluster:Connect`` on the cluster. ``names`` maps a recorded
    (resource type, name) to the name(s) it has on MSK; an unmapped name or operation raises."""
    accesses: list[Access] = []
    for decision in decisions:
        key = (decision.operation, decision.resource_type)
        if key not in MSK_ACTIONS:
            raise LookupError(f"no MSK action for {decision}")
        if decision.resource_type == "Cluster":
            targets: Sequence[str] = [decision.name]
        elif (decision.resource_type, decision.name) in names:
            targets = names[(decision.resource_type, decision.name)]
        else:
            raise LookupError(f"{decision}: no MSK name for {decision.name!r}")
        action = MSK_ACTIONS[key]
        for target in targets:
            arn = msk_arn(cluster_arn, decision.resource_type, target)
            request = str(decision)
            accesses.append(Access(action, arn, (), request))
            accesses += [
                Access(required, arn, (), f"{request}, required by {action}")
                for required in MSK_REQUIRED.get(action, ())
            ]
        accesses.append(Access("kafka-cluster:Connect", cluster_arn, (), str(decision)))
    return accesses


def kafka_cluster_statements(statements: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The statements whose actions are all ``kafka-cluster:`` ones (the Kafka data plane)."""
    return [
        dict(s)
        for s in statements
        if all(a.startswith("kafka-cluster:") for a in as_list(s.get("Action", [])))
    ]


@dataclass(frozen=True)
class KafkaRecording:
    """What the local stack's broker authorized while its connectors worked, and the worker
    configuration they ran with."""

    log: str
    worker: Mapping[str, str]


def java_properties(text: str) -> dict[str, str]:
    """``key=value`` lines as :func:`connectors.configs.render_properties` writes them."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key: value.replace("\\\\", "\\") for key, value in pairs}


#: The lake tables of config/local.yaml the Kafka recording creates and writes (conftest.py's
#: kafka_recording); the others (tests/query's) are configured but not created there.
KAFKA_RECORDED_TABLES = ("public.customers", "public.orders")
