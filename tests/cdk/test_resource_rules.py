"""Rules that hold for every resource of a kind, over every stack of dev and prod: a new
resource that breaks one fails here, named by its stack and logical id.

Each rule is read from the synthesized templates, not from the constructs: a resource CDK adds
on its own (a custom resource's function, a policy a grant writes) is held to it as well.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cdk.stack_helpers import (
    STATEFUL_TYPES,
    as_list,
    every_resource,
    get_att_id,
    references,
)

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module", params=["dev", "prod"])
def env(request: pytest.FixtureRequest, synth) -> Any:  # type: ignore[no-untyped-def]
    return synth(request.param)


def _named(stack: str, logical_id: str, what: str = "") -> str:
    return f"{stack}/{logical_id}{f' ({what})' if what else ''}"


# --- dead letters --------------------------------------------------------------------------------


def test_rules_every_target_has_dead_letter_queue(env: Any) -> None:
    """Every target of an EventBridge rule and of an EventBridge Scheduler schedule names a
    dead-letter queue: without one, an event EventBridge could not deliver after its retries is
    dropped without a trace (up to 24 hours and 185 attempts by default, then gone).

    Lambda's asynchronous invoke configs are not held to it: they are where a function's own
    failures go after EventBridge delivered the event, which each function decides (the
    credential refresh and the bootstrap keep their events in an on-failure queue; a dispatcher
    turn that fails is the next turn's to redo, and its error alarm pages).
    """
    offenders = []
    for stack, logical_id, resource, _ in every_resource(env):
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Events::Rule":
            targets = props.get("Targets", [])
        elif resource["Type"] == "AWS::Scheduler::Schedule":
            targets = [props.get("Target", {})]
        else:
            continue
        offenders += [
            _named(stack, logical_id, f"target {target.get('Id', '?')}")
            for target in targets
            if not target.get("DeadLetterConfig", {}).get("Arn")
        ]
    assert offenders == [], f"rule or schedule targets without a dead-letter queue: {offenders}"


def test_rules_encrypted_bus_has_dead_letter_queue(env: Any) -> None:
    """An event bus under a customer-managed key names a dead-letter queue: an event the bus
    cannot encrypt or decrypt (the key disabled, its policy changed) is an error EventBridge
    does not retry, and AWS sends it to the bus's DLQ only when there is one."""
    offenders = [
        _named(stack, logical_id)
        for stack, logical_id, resource, _ in every_resource(env)
        if resource["Type"] == "AWS::Events::EventBus"
        and resource.get("Properties", {}).get("KmsKeyIdentifier")
        and not resource["Properties"].get("DeadLetterConfig", {}).get("Arn")
    ]
    assert offenders == [], f"CMK-encrypted buses without a dead-letter queue: {offenders}"


def _dead_letter_queue_ids(resource: dict[str, Any]) -> list[str | None]:
    """Logical ids of the queues a resource sends what it could not deliver or process to."""
    props = resource.get("Properties", {})
    kind = resource["Type"]
    arns: list[Any] = []
    if kind == "AWS::Events::Rule":
        arns = [t.get("DeadLetterConfig", {}).get("Arn") for t in props.get("Targets", [])]
    elif kind == "AWS::Scheduler::Schedule":
        arns = [props.get("Target", {}).get("DeadLetterConfig", {}).get("Arn")]
    elif kind == "AWS::Events::EventBus":
        arns = [props.get("DeadLetterConfig", {}).get("Arn")]
    elif kind in ("AWS::Lambda::EventInvokeConfig", "AWS::Lambda::EventSourceMapping"):
        arns = [props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")]
    elif kind == "AWS::SQS::Queue":
        arns = [props.get("RedrivePolicy", {}).get("deadLetterTargetArn")]
    return [get_att_id(arn) for arn in arns if arn]


def test_rules_every_dead_letter_queue_pages(env: Any) -> None:
    """Every queue that receives what a target, a bus, a function or a queue gave up on has an
    alarm on its visible messages that notifies someone (an alarm action): a dead letter
    nobody hears of is as lost as a dropped one."""
    offenders = []
    for stack, logical_id, resource, template in every_resource(env):
        for queue_id in _dead_letter_queue_ids(resource):
            if queue_id is None or queue_id not in template["Resources"]:
                offenders.append(_named(stack, logical_id, "dead letters outside its stack"))
                continue
            depth = {"Fn::GetAtt": [queue_id, "QueueName"]}
            paged = [
                alarm
                for alarm in template["Resources"].values()
                if alarm["Type"] == "AWS::CloudWatch::Alarm"
                and alarm["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
                and {"Name": "QueueName", "Value": depth}
                in alarm["Properties"].get("Dimensions", [])
                and alarm["Properties"].get("AlarmActions")
            ]
            if not paged:
                offenders.append(_named(stack, queue_id, f"dead letters of {logical_id}"))
    assert offenders == [], f"dead-letter queues no alarm pages on: {sorted(set(offenders))}"


# --- service principals in resource policies --------------------------------------------------

#: Where each kind keeps its resource policy (a document, or its statements).
POLICY_PROPERTY = {
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::S3::BucketPolicy": "PolicyDocument",
    "AWS::KMS::Key": "KeyPolicy",
    "AWS::SecretsManager::ResourcePolicy": "ResourcePolicy",
    "AWS::Logs::ResourcePolicy": "PolicyDocument",
    "AWS::Events::EventBusPolicy": "Statement",
    "AWS::ECR::Repository": "RepositoryPolicyText",
    "AWS::Kinesis::ResourcePolicy": "ResourcePolicy",
}
#: Global condition keys that bind a service's request to a source of ours.
SOURCE_KEYS = ("aws:sourceaccount", "aws:sourcearn", "aws:sourceorgid", "aws:sourceorgpaths")
#: KMS also names the resource or the service a request is for.
KMS_KEYS = (*SOURCE_KEYS, "kms:viaservice", "kms:encryptioncontext:")


def _statements(kind: str, props: dict[str, Any]) -> list[dict[str, Any]]:
    document = props.get(POLICY_PROPERTY[kind])
    if isinstance(document, str):
        document = json.loads(document)
    if kind == "AWS::Events::EventBusPolicy" and document is None:
        document = {k: props[k] for k in ("Principal", "Action", "Condition") if k in props}
    if not document:
        return []
    if "Statement" in document:
        return list(as_list(document["Statement"]))
    return [{"Effect": "Allow", **document}]


def _condition_keys(statement: dict[str, Any]) -> list[str]:
    return [key.lower() for block in statement.get("Condition", {}).values() for key in block]


def test_rules_service_principals_carry_source_condition(env: Any) -> None:
    """Every Allow to a service principal in a resource policy says for whose sake the service
    may act (confused deputy): otherwise the service acting for any account's resource (a rule,
    an alarm, a bucket) gets what the statement allows on ours.

    What counts:

    - ``aws:SourceAccount``, ``aws:SourceArn``, ``aws:SourceOrgID`` or ``aws:SourceOrgPaths``
      (global keys the service sets to the resource it acts for) in any resource policy;
    - in a KMS key policy also ``kms:EncryptionContext:*`` (the key is usable only for a
      named resource: a log group, a bus, a topic) and ``kms:ViaService`` (only through a named
      service on a caller's behalf). They are what AWS supports where the global keys are not
      sent: EventBridge publishing to an encrypted SNS topic carries no ``aws:SourceAccount`` or
      ``aws:SourceArn`` to KMS (the SNS guide), so the topic key binds EventBridge to this
      account's topics by the topic ARN SNS puts in the encryption context;
    - on an ``AWS::Lambda::Permission`` its ``SourceArn``, ``SourceAccount`` or
      ``PrincipalOrgID`` property (the same keys, written as properties).

    Roles' trust policies are not resource policies of this kind: a service assumes a role
    only for a resource of this account that names it, which ``iam:PassRole`` guards.
    """
    offenders = []
    for stack, logical_id, resource, _ in every_resource(env):
        kind = resource["Type"]
        props = resource.get("Properties", {})
        if kind == "AWS::Lambda::Permission":
            principal = props.get("Principal", "")
            if (
                isinstance(principal, str)
                and principal.endswith(".amazonaws.com")
                and not any(props.get(k) for k in ("SourceArn", "SourceAccount", "PrincipalOrgID"))
            ):
                offenders.append(_named(stack, logical_id, principal))
            continue
        if kind not in POLICY_PROPERTY:
            continue
        accepted = KMS_KEYS if kind == "AWS::KMS::Key" else SOURCE_KEYS
        for statement in _statements(kind, props):
            principal = statement.get("Principal", {})
            services = as_list(principal.get("Service", [])) if isinstance(principal, dict) else []
            if statement.get("Effect") != "Allow" or not services:
                continue
            keys = _condition_keys(statement)
            if not any(key.startswith(prefix) for key in keys for prefix in accepted):
                what = f"{statement.get('Sid') or ''} {', '.join(map(str, services))}".strip()
                offenders.append(_named(stack, logical_id, what))
    assert offenders == [], f"service principals allowed without a source condition: {offenders}"


# --- log retention -------------------------------------------------------------------------------


def test_rules_every_log_group_expires(env: Any) -> None:
    """Every log group of the templates has a retention: CloudWatch keeps logs forever (and
    bills them) unless told otherwise."""
    offenders = [
        _named(stack, logical_id)
        for stack, logical_id, resource, _ in every_resource(env)
        if resource["Type"] == "AWS::Logs::LogGroup"
        and not resource.get("Properties", {}).get("RetentionInDays")
    ]
    assert offenders == [], f"log groups that never expire: {offenders}"


def _log_group_names(template: dict[str, Any]) -> dict[str, str]:
    """Literal name -> logical id of the template's named log groups."""
    return {
        resource["Properties"]["LogGroupName"]: logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Logs::LogGroup"
        and isinstance(resource.get("Properties", {}).get("LogGroupName"), str)
    }


def test_rules_glue_jobs_log_to_their_stacks_log_groups(env: Any) -> None:
    """Every Glue job logs into log groups its stack owns (and so expire): Glue 5.0 writes to
    ``<--custom-logGroup-prefix>/error`` and ``.../output``, else to ``/aws-glue/jobs/error``
    and ``/output``, which Glue creates on first use with no retention."""
    offenders = []
    for stack, logical_id, resource, template in every_resource(env):
        if resource["Type"] != "AWS::Glue::Job":
            continue
        prefix = resource["Properties"].get("DefaultArguments", {}).get("--custom-logGroup-prefix")
        names = _log_group_names(template)
        if not isinstance(prefix, str) or any(
            f"{prefix}/{stream}" not in names for stream in ("error", "output")
        ):
            offenders.append(_named(stack, logical_id, f"--custom-logGroup-prefix {prefix}"))
    assert offenders == [], f"Glue jobs logging where nothing expires: {offenders}"


def test_rules_lambda_functions_log_to_their_stacks_log_groups(env: Any) -> None:
    """Every Lambda function (CDK's own custom-resource handlers included) logs into a log
    group of its stack: its ``LoggingConfig.LogGroup``, or ``/aws/lambda/<function>`` created
    beside it. Otherwise Lambda creates ``/aws/lambda/<function>`` itself, with no retention."""
    offenders = []
    for stack, logical_id, resource, template in every_resource(env):
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        configured = get_att_id(resource["Properties"].get("LoggingConfig", {}).get("LogGroup"))
        default_name = {"Fn::Join": ["", ["/aws/lambda/", {"Ref": logical_id}]]}
        owned = [
            group_id
            for group_id, group in template["Resources"].items()
            if group["Type"] == "AWS::Logs::LogGroup"
            and (group_id == configured or group["Properties"].get("LogGroupName") == default_name)
        ]
        if not owned:
            offenders.append(_named(stack, logical_id))
    assert offenders == [], f"functions whose logs never expire: {offenders}"


# --- removal policies ------------------------------------------------------------------------

#: What holds data: the replacement-sensitive kinds of the update tests, and the bus archive.
STATEFUL_KINDS = frozenset({*STATEFUL_TYPES, "AWS::Events::Archive"})
#: Kinds whose data is kept when the stack goes, where the environment keeps its data. Not in
#: it: log groups (not the system of record), Aurora instances (the cluster holds the data),
#: Kinesis streams (changes in transit for hours, already on the bus or in the fan-out's
#: failed-records queue), the bus archive (replayable only into its own bus, which goes with
#: the stack) and keys (held by the rule on keys below).
KEPT_KINDS = frozenset(
    {
        "AWS::S3::Bucket",
        "AWS::DynamoDB::Table",
        "AWS::RDS::DBCluster",
        "AWS::SecretsManager::Secret",
        "AWS::SQS::Queue",
        "AWS::MSK::Cluster",
        "AWS::EFS::FileSystem",
    }
)
KEEPING = ("Retain", "RetainExceptOnCreate", "Snapshot")


def test_rules_stateful_resources_state_their_removal_policy(env: Any) -> None:
    """Every resource that holds data says what happens to it when its stack is deleted and
    when it is replaced (both policies written), instead of CloudFormation's default."""
    offenders = [
        _named(stack, logical_id, resource["Type"])
        for stack, logical_id, resource, _ in every_resource(env)
        if resource["Type"] in STATEFUL_KINDS
        and not (resource.get("DeletionPolicy") and resource.get("UpdateReplacePolicy"))
    ]
    assert offenders == [], f"stateful resources without explicit removal policies: {offenders}"


def test_rules_data_kept_where_environment_keeps_it(env: Any) -> None:
    """Where the environment keeps its data (``database.deletion_protection``), every resource
    of a kind that holds data nobody else has outlives its stack."""
    if not env.config.database.deletion_protection:
        pytest.skip(f"{env.env} does not keep its data")
    offenders = [
        _named(stack, logical_id, f"{resource['Type']} {resource.get('DeletionPolicy')}")
        for stack, logical_id, resource, _ in every_resource(env)
        if resource["Type"] in KEPT_KINDS
        and (
            resource.get("DeletionPolicy") not in KEEPING
            or resource.get("UpdateReplacePolicy") not in KEEPING
        )
    ]
    assert offenders == [], f"data deleted with its stack: {offenders}"


def test_rules_keys_of_kept_data_are_kept(env: Any) -> None:
    """A KMS key that encrypts something kept when the stack goes is kept too: data under a
    deleted key is unreadable."""
    offenders = []
    for stack, logical_id, resource, template in every_resource(env):
        if resource.get("DeletionPolicy") not in KEEPING or resource["Type"] == "AWS::KMS::Key":
            continue
        for key_id in references(resource.get("Properties", {})):
            key = template["Resources"].get(key_id)
            if (
                key is not None
                and key["Type"] == "AWS::KMS::Key"
                and key.get("DeletionPolicy") not in KEEPING
            ):
                offenders.append(_named(stack, key_id, f"encrypts {logical_id}"))
    assert offenders == [], f"keys deleted under kept data: {offenders}"
