"""The failed-run notifier is an EventBridge rule with an SNS target: no code and no role, so
nothing runs under a role's statements. What it needs are resource policies that let the
``events.amazonaws.com`` service principal in: the topic's policy and its key's policy. moto does
not evaluate resource policies for service principals, so they are checked in the synthesized
templates with the evaluator the gate uses; resources are named by symbolic ARNs.

What EventBridge's calls carry: the publish, the rule it acts for (``aws:SourceAccount``,
``aws:SourceArn``); SNS's calls to KMS for it, the topic's ARN in the encryption context and no
source (the SNS guide: those keys are not supported for EventBridge-to-encrypted topics)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from tests.iam.iam_helpers.moto import REGION
from tests.iam.iam_helpers.runs import Run, needed_statements
from tests.iam.iam_helpers.statements import allowing, as_list, label
from tests.iam.iam_helpers.templates import Resolver, symbolic_resolver

pytestmark = pytest.mark.cdk


def service_statements(
    statements: Sequence[Mapping[str, Any]], service: str
) -> list[dict[str, Any]]:
    """The statements of a resource policy that apply to an AWS service principal."""
    applying = []
    for statement in statements:
        principal = statement.get("Principal")
        services = as_list(principal.get("Service", [])) if isinstance(principal, Mapping) else []
        everyone = principal == "*" or (
            isinstance(principal, Mapping) and principal.get("AWS") == "*"
        )
        if everyone or service in services:
            applying.append(dict(statement))
    return applying


def resource_policy(
    template: Mapping[str, Any], lid: str, policy_type: str, targets: str
) -> list[dict[str, Any]]:
    """Statements of every ``policy_type`` resource whose ``targets`` list names ``lid``."""
    statements: list[dict[str, Any]] = []
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == policy_type and {"Ref": lid} in props.get(targets, []):
            statements += as_list(props["PolicyDocument"]["Statement"])
    return statements


EVENTS = "events.amazonaws.com"
#: EventBridge publishes over TLS.
OVER_TLS = {"aws:SecureTransport": "true"}
TOPIC_CONTEXT = "kms:EncryptionContext:aws:sns:topicArn"


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
    #: The topic's ARN as SNS names it in the encryption context (its real shape: the key's
    #: condition is on it, not on the symbolic ARN).
    topic_arn: str
    account: str

    def publish_context(self, **changes: str) -> dict[str, str]:
        return {
            **OVER_TLS,
            "aws:SourceAccount": self.account,
            "aws:SourceArn": self.rule,
            **changes,
        }

    def run(
        self,
        topic_statements: Sequence[Mapping[str, Any]] | None = None,
        key_statements: Sequence[Mapping[str, Any]] | None = None,
        publish_context: Mapping[str, str] | None = None,
        key_context: Mapping[str, str] | None = None,
    ) -> Run:
        topic_statements = self.topic_statements if topic_statements is None else topic_statements
        key_statements = self.key_statements if key_statements is None else key_statements
        publish = self.publish_context() if publish_context is None else publish_context
        encrypt = {TOPIC_CONTEXT: self.topic_arn} if key_context is None else key_context
        calls = [
            ("sns:Publish", self.topic, topic_statements, publish),
            ("kms:GenerateDataKey", self.key, key_statements, encrypt),
            ("kms:Decrypt", self.key, key_statements, encrypt),
        ]
        granted = [bool(allowing(s, action, arn, c)) for action, arn, s, c in calls]
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
        topic_arn=f"arn:aws:sns:{REGION}:{account}:{stack}-{topic}-1A2B3C4D5E6F",
        account=account,
        dead_letters=str(resolve({"Fn::GetAtt": [queue, "Arn"]}, "operations")),
        dead_letter_statements=resolve(service_statements(queue_policy, EVENTS), "operations"),
    )


def test_failed_run_notifier_events_may_publish_to_encrypted_topic(page: Page) -> None:
    result = page.run()
    assert result.ok, result.detail


def test_failed_run_notifier_publish_without_tls_denied(page: Page) -> None:
    without_tls = page.publish_context(**{"aws:SecureTransport": "false"})
    assert not page.run(publish_context=without_tls).detail["sns:Publish"]


def test_failed_run_notifier_other_accounts_rule_publish_denied(page: Page) -> None:
    # Confused deputy: EventBridge acting for another account's rule.
    other = page.publish_context(
        **{
            "aws:SourceAccount": "999999999999",
            "aws:SourceArn": f"arn:aws:events:{REGION}:999999999999:rule/page-them",
        }
    )
    assert not page.run(publish_context=other).detail["sns:Publish"]


def test_failed_run_notifier_key_for_other_accounts_topic_denied(page: Page) -> None:
    other_topic = {TOPIC_CONTEXT: f"arn:aws:sns:{REGION}:999999999999:their-topic"}
    run = page.run(key_context=other_topic)
    assert not (run.detail["kms:GenerateDataKey"] or run.detail["kms:Decrypt"])


def test_failed_run_notifier_each_needed_statement_removed_denied(page: Page) -> None:
    topic = needed_statements(lambda kept: page.run(topic_statements=kept), page.topic_statements)
    key = needed_statements(lambda kept: page.run(key_statements=kept), page.key_statements)
    assert [label(page.topic_statements[i]) for i in topic] == [
        "EventBridgeRulesPublish: sns:Publish"
    ]
    assert [label(page.key_statements[i]) for i in key] == [
        "EventBridgeRulesPublish: kms:Decrypt, kms:GenerateDataKey*"
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
