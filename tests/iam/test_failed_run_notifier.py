"""The failed-run notifier is an EventBridge rule with an SNS target: no code and no role, so
nothing runs under a role's statements. What it needs are resource policies that let the
``events.amazonaws.com`` service principal in: the topic's policy and its key's policy. moto does
not evaluate resource policies for service principals, so they are checked in the synthesized
templates with the evaluator the gate uses; resources are named by symbolic ARNs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from tests.iam.iam_helpers import (
    Resolver,
    Run,
    allowing,
    label,
    needed_statements,
    resource_policy,
    service_statements,
    symbolic_resolver,
)

pytestmark = pytest.mark.cdk

EVENTS = "events.amazonaws.com"
#: EventBridge publishes over TLS.
OVER_TLS = {"aws:SecureTransport": "true"}


@dataclass(frozen=True)
class Page:
    """What EventBridge does for one failed run: publish to the topic, encrypted by its key."""

    topic: str
    key: str
    topic_statements: list[dict[str, Any]]
    key_statements: list[dict[str, Any]]
    rule: str
    dead_letters: str
    dead_letter_statements: list[dict[str, Any]]

    def run(
        self,
        topic_statements: Sequence[Mapping[str, Any]] | None = None,
        key_statements: Sequence[Mapping[str, Any]] | None = None,
        context: Mapping[str, str] = OVER_TLS,
    ) -> Run:
        topic_statements = self.topic_statements if topic_statements is None else topic_statements
        key_statements = self.key_statements if key_statements is None else key_statements
        calls = [
            ("sns:Publish", self.topic, topic_statements),
            ("kms:GenerateDataKey", self.key, key_statements),
            ("kms:Decrypt", self.key, key_statements),
        ]
        granted = [bool(allowing(s, action, arn, context)) for action, arn, s in calls]
        return Run(all(granted), [], dict(zip([c[0] for c in calls], granted, strict=True)))


def _owner(resolve: Resolver, value: Any, stack: str) -> tuple[str, str]:
    """(stack, logical id) of the resource a symbolic ARN names."""
    arn = str(resolve(value, stack))
    _, _, _, owner, lid = arn.split(":", 4)
    return owner, lid.split(".", 1)[0]


@pytest.fixture(scope="module")
def page(templates: dict[str, Any], account: str) -> Page:
    resolve = symbolic_resolver(templates, account)
    rules = [
        (lid, r)
        for lid, r in templates["operations"]["Resources"].items()
        if r["Type"] == "AWS::Events::Rule"
        and r["Properties"].get("EventPattern", {}).get("source") == ["aws.glue"]
    ]
    ((rule_id, rule),) = rules
    (target,) = rule["Properties"]["Targets"]
    stack, topic = _owner(resolve, target["Arn"], "operations")
    _, queue = _owner(resolve, target["DeadLetterConfig"]["Arn"], "operations")
    queue_policy = resource_policy(
        templates["operations"], queue, "AWS::SQS::QueuePolicy", "Queues"
    )
    template = templates[stack]
    key = template["Resources"][topic]["Properties"]["KmsMasterKeyId"]
    _, key_id = _owner(resolve, key, stack)
    topic_policy = resource_policy(template, topic, "AWS::SNS::TopicPolicy", "Topics")
    key_policy = template["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]
    key_arn = str(resolve(key, stack))
    return Page(
        topic=str(resolve({"Ref": topic}, stack)),
        key=key_arn,
        topic_statements=resolve(service_statements(topic_policy, EVENTS), stack),
        # A key policy's "*" is the key itself.
        key_statements=[
            {**s, "Resource": key_arn if s["Resource"] == "*" else s["Resource"]}
            for s in resolve(service_statements(key_policy, EVENTS), stack)
        ],
        rule=str(resolve({"Fn::GetAtt": [rule_id, "Arn"]}, "operations")),
        dead_letters=str(resolve({"Fn::GetAtt": [queue, "Arn"]}, "operations")),
        dead_letter_statements=resolve(service_statements(queue_policy, EVENTS), "operations"),
    )


def test_failed_run_notifier_events_may_publish_to_encrypted_topic(page: Page) -> None:
    result = page.run()
    assert result.ok, result.detail


def test_failed_run_notifier_publish_without_tls_denied(page: Page) -> None:
    assert not page.run(context={"aws:SecureTransport": "false"}).detail["sns:Publish"]


def test_failed_run_notifier_each_needed_statement_removed_denied(page: Page) -> None:
    topic = needed_statements(lambda kept: page.run(topic_statements=kept), page.topic_statements)
    key = needed_statements(lambda kept: page.run(key_statements=kept), page.key_statements)
    assert [label(page.topic_statements[i]) for i in topic] == [
        "EventBridgeRulesPublish: sns:Publish"
    ]
    assert [page.key_statements[i]["Principal"] for i in key] == [
        {"Service": ["cloudwatch.amazonaws.com", "events.amazonaws.com"]}
    ]


def test_failed_run_notifier_dead_letters_accept_only_this_rule(page: Page) -> None:
    """A page EventBridge cannot deliver goes to the dead-letter queue: its policy lets
    EventBridge send for this rule only (no KMS: the queue uses SQS-managed encryption)."""
    this_rule = {**OVER_TLS, "aws:SourceArn": page.rule}
    other_rule = {**OVER_TLS, "aws:SourceArn": page.rule.replace("MergeJobFailures", "Other")}
    send = ("sqs:SendMessage", page.dead_letters)
    assert allowing(page.dead_letter_statements, *send, this_rule)
    assert not allowing(page.dead_letter_statements, *send, other_rule)
    without_tls = {**this_rule, "aws:SecureTransport": "false"}
    assert not allowing(page.dead_letter_statements, *send, without_tls)
