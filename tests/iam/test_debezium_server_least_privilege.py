"""The Debezium Server task role's statements, against the AWS requests Debezium Server makes.

Debezium Server (the distribution the ECS task runs, with its Kinesis sink) runs in the local
stack with the fan-out, writing to moto's Kinesis. moto records every request; Debezium
Server's own (the AWS SDK for Java's User-Agent, the stack's boto3 clients left out) are mapped
to the IAM action and stream they are authorized for, plus the KMS call Kinesis makes for a
write to an encrypted stream, and evaluated against the task role's statements of the local
environment's synthesized fan-out stack (its streams are the local tables'), verbatim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from environment.config import EnvironmentConfig, load_config
from tests.iam.iam_helpers.recorded import SERVER_USER_AGENT, ServerRecording, kinesis_accesses
from tests.iam.iam_helpers.statements import (
    Access,
    label,
    needed_for,
    unallowed,
    unexercised_actions,
)
from tests.iam.iam_helpers.templates import Physical, logical_id, resolver_with, role_policy

pytestmark = [pytest.mark.cdk, pytest.mark.postgres, pytest.mark.moto, pytest.mark.slow]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "iam.md"
ENV = "local"
STACKS = ("network", "database", "lake", "capture", "fanout", "operations")
KEY_ID = "6a1d3c52-8f0e-4b7a-9d21-5c3e8f1a2b47"
#: Statements of the task role no Debezium Server request needs, and why they stay.
NOT_DEBEZIUM_SERVER = {
    "elasticfilesystem:ClientMount, elasticfilesystem:ClientWrite": (
        "ECS mounts the offsets file system for the task with the task role (two statements: "
        "through a mount target, through the access point)"
    ),
    "s3:GetObject": "the rds-ca init container (AWS CLI) copies the RDS CA bundle",
}

#: Actions of the needed statements no request asks for, and why (none: the statements are
#: the recorded actions).
UNEXERCISED: dict[str, str] = {}


@pytest.fixture(scope="module")
def local() -> EnvironmentConfig:
    return load_config(ENV)


@pytest.fixture(scope="module")
def local_templates(synth: Any) -> dict[str, dict[str, Any]]:
    built = synth(ENV)
    return {role: built.template(role) for role in STACKS}


@pytest.fixture(scope="module")
def streams(
    local_templates: dict[str, dict[str, Any]],
    local: EnvironmentConfig,
    server_recording: ServerRecording,
) -> dict[str, tuple[str, str]]:
    """Stream logical id -> (the recorded stream's ARN, its name), by table."""
    fanout = local_templates["fanout"]
    found = {}
    for table, name in server_recording.streams.items():
        lid = logical_id(fanout, "AWS::Kinesis::Stream", "Streams" + _alnum(table))
        found[lid] = (f"arn:aws:kinesis:{local.region}:{local.account}:stream/{name}", name)
    return found


def _alnum(text: str) -> str:
    return "".join(c for c in text if c.isalnum())


@pytest.fixture(scope="module")
def key_arn(local: EnvironmentConfig) -> str:
    return f"arn:aws:kms:{local.region}:{local.account}:key/{KEY_ID}"


@pytest.fixture(scope="module")
def statements(
    local_templates: dict[str, dict[str, Any]],
    local: EnvironmentConfig,
    streams: dict[str, tuple[str, str]],
    key_arn: str,
) -> list[dict[str, Any]]:
    """The task role's statements as synthesized; streams and their key as recorded."""
    fanout = local_templates["fanout"]
    task = logical_id(fanout, "AWS::ECS::TaskDefinition", "DebeziumServerTask")
    role = fanout["Resources"][task]["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0]
    created = {lid: Physical(arn, {"Arn": arn}) for lid, (arn, _) in streams.items()}
    for lid in streams:
        key = fanout["Resources"][lid]["Properties"]["StreamEncryption"]["KeyId"]
        created[key["Fn::GetAtt"][0]] = Physical(key_arn, {"Arn": key_arn})
    resolve = resolver_with(local_templates, local.account, local.region, {"fanout": created})
    return [resolve(s, "fanout") for s in role_policy(fanout, role).statements]


@pytest.fixture(scope="module")
def accesses(
    server_recording: ServerRecording,
    streams: dict[str, tuple[str, str]],
    key_arn: str,
    local: EnvironmentConfig,
) -> list[Access]:
    arns = {name: arn for arn, name in streams.values()}
    keys = dict.fromkeys(arns.values(), key_arn)
    # The lake capture's S3 sink (the same AWS SDK) writes its change files, the heartbeat
    # table's among them, to the same moto server while the recording runs.
    sink = (f"/{local.prefix}-changes/topics/",)
    return kinesis_accesses(server_recording.recording, SERVER_USER_AGENT, arns, keys, sink)


def test_debezium_server_recording_wrote_each_stream_recorded(
    accesses: list[Access], streams: dict[str, tuple[str, str]]
) -> None:
    written = {a.resource for a in accesses if a.action.startswith("kinesis:Put")}
    assert written == {arn for arn, _ in streams.values()}


def test_debezium_server_recorded_requests_all_allowed(
    statements: list[dict[str, Any]], accesses: list[Access]
) -> None:
    denied = unallowed(statements, accesses)
    assert not denied, "not allowed by the task role:\n" + "\n".join(
        sorted({f"{a.action} {a.resource} ({a.request})" for a in denied})
    )


def test_debezium_server_statements_not_needed_match_docs(
    statements: list[dict[str, Any]], accesses: list[Access]
) -> None:
    """Every statement no recorded request needs is one another part of the task uses."""
    needed = needed_for(statements, accesses)
    unneeded = {
        ", ".join(s["Action"]) if isinstance(s["Action"], list) else s["Action"]
        for i, s in enumerate(statements)
        if i not in needed
    }
    assert unneeded == set(NOT_DEBEZIUM_SERVER)


def test_debezium_server_unexercised_actions_match_docs(
    statements: list[dict[str, Any]], accesses: list[Access]
) -> None:
    """In the needed statements: exactly the actions documented as not asked for."""
    needed = needed_for(statements, accesses)
    unused = unexercised_actions([statements[i] for i in sorted(needed)], accesses)
    assert unused == set(UNEXERCISED)
    docs = DOCS.read_text()
    assert all(f"`{action}`" in docs for action in UNEXERCISED)


def test_debezium_server_needed_statements_match_docs_table(
    statements: list[dict[str, Any]], accesses: list[Access]
) -> None:
    needed = needed_for(statements, accesses)
    cells = [
        "Debezium Server (ECS task)",
        ", ".join(f"`{a}`" for a in sorted({a.action for a in accesses})),
        "<br>".join(f"`{label(statements[i])}`" for i in sorted(needed)),
        "recorded (moto's request log), evaluated against the statements",
    ]
    row = "| " + " | ".join(cells) + " |"
    assert row in DOCS.read_text(), row
