"""Running a handler in-process as a role, on the IAM-enforcing moto server, behind a gate.

moto (5.2) authorizes a request against the caller's user policies only with the request's
resource for S3 and SQS (and IAM/STS); every other service is authorized with the resource
``*``, so a statement scoped to an ARN never matches there. The user moto sees therefore gets
each statement verbatim for S3/SQS and with ``Resource: "*"`` otherwise (moto checks the
action), and :class:`Gate` checks the action *and* the resource of every other call against the
verbatim statements before it leaves the process. Services moto does not have (MSK Connect) are
answered by the gate from an in-memory store, after the same check.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse

from tests.iam.iam_helpers.moto import PARTITION, REGION, Keys, MotoIam
from tests.iam.iam_helpers.runs import ACCESS_DENIED, Call
from tests.iam.iam_helpers.statements import MOTO_CHECKS_RESOURCE, allowing, moto_document
from tests.iam.iam_helpers.templates import Resolver

S3_ACTIONS = {
    "ListObjectsV2": "ListBucket",
    "ListObjects": "ListBucket",
    "HeadObject": "GetObject",
    "HeadBucket": "ListBucket",
    "CreateMultipartUpload": "PutObject",
    "UploadPart": "PutObject",
    "CompleteMultipartUpload": "PutObject",
    "DeleteObjects": "DeleteObject",
}


def iam_action(prefix: str, operation: str) -> str:
    if prefix == "s3":
        return f"s3:{S3_ACTIONS.get(operation, operation)}"
    return f"{prefix}:{operation}"


def call_resources(
    prefix: str, operation: str, params: Mapping[str, Any], account: str
) -> tuple[str, ...]:
    """The ARNs a call acts on, as IAM sees them (``*`` for calls without one)."""
    base = f"arn:{PARTITION}:{prefix}:{REGION}:{account}"
    if prefix == "events" and operation == "PutEvents":
        buses = {e.get("EventBusName", "default") for e in params["Entries"]}
        return tuple(sorted(b if b.startswith("arn:") else f"{base}:event-bus/{b}" for b in buses))
    if prefix == "ecs" and "service" in params:
        cluster = str(params.get("cluster", "default")).rsplit("/", 1)[-1]
        service = str(params["service"])
        return (service if service.startswith("arn:") else f"{base}:service/{cluster}/{service}",)
    if prefix == "kafkaconnect" and "connectorArn" in params:
        return (str(params["connectorArn"]),)
    if prefix == "secretsmanager" and "SecretId" in params:
        return (str(params["SecretId"]),)
    if prefix == "kms" and "KeyId" in params:
        return (str(params["KeyId"]),)
    if prefix == "s3" and "Bucket" in params:
        key = params.get("Key")
        return (f"arn:{PARTITION}:s3:::{params['Bucket']}" + (f"/{key}" if key else ""),)
    return ("*",)


Responder = Callable[[str, Mapping[str, Any]], dict[str, Any]]


def connector_store(connectors: Mapping[str, dict[str, str]], restarted: list[str]) -> Responder:
    """MSK Connect's ListConnectors and RestartConnector over the connectors by ARN (moto has no
    MSK Connect); each restart is appended to ``restarted``."""

    def answer(operation: str, params: Mapping[str, Any]) -> dict[str, Any]:
        if operation == "ListConnectors":
            prefix = params.get("connectorNamePrefix", "")
            listed = [
                {"connectorArn": arn, "connectorName": name, "connectorState": "RUNNING"}
                for arn in connectors
                if (name := arn.split(":connector/", 1)[1].split("/", 1)[0]).startswith(prefix)
            ]
            return {"connectors": listed}
        arn = params["connectorArn"]
        if arn not in connectors:
            return {"Error": {"Code": "NotFoundException", "Message": arn}}
        if operation == "RestartConnector":
            restarted.append(arn)
            return {"connectorArn": arn, "connectorOperationArn": f"{arn}/operation/1"}
        raise NotImplementedError(f"kafkaconnect {operation}")

    return answer


class Gate:
    """Hooks on a boto3 session: every call is recorded; calls to services moto cannot
    authorize by resource are checked against the verbatim statements first and answered
    with AccessDenied when no statement allows them. ``responders`` answer services moto
    does not have (after the check)."""

    def __init__(
        self,
        statements: Sequence[Mapping[str, Any]],
        account: str,
        responders: Mapping[str, Responder] | None = None,
    ) -> None:
        self.statements = statements
        self.account = account
        self.responders = dict(responders or {})
        self.calls: list[Call] = []

    def install(self, session: boto3.Session) -> None:
        session.events.register("before-parameter-build", self._parameters)
        session.events.register("before-call", self._before)
        session.events.register("after-call", self._after)

    def _parameters(self, params: Mapping[str, Any], **_: Any) -> None:
        self._params = dict(params)  # before-call sees the serialized request instead

    def _before(self, model: Any, **_: Any) -> Any:
        params = self._params
        prefix = model.service_model.signing_name
        action = iam_action(prefix, model.name)
        resources = call_resources(prefix, model.name, params, self.account)
        self._pending = Call(action, resources)
        if prefix in MOTO_CHECKS_RESOURCE:
            return None
        if not all(allowing(self.statements, action, r) for r in resources):
            message = f"not authorized to perform {action} on {', '.join(resources)}"
            return _response(400, {"Error": {"Code": "AccessDeniedException", "Message": message}})
        if prefix in self.responders:
            answer = self.responders[prefix](model.name, params)
            return _response(400 if "Error" in answer else 200, answer)
        return None

    def _after(self, parsed: Mapping[str, Any], **_: Any) -> None:
        error = parsed.get("Error", {}) if isinstance(parsed, Mapping) else {}
        code = error.get("Code")
        # moto answers a denial of a JSON-protocol call with its XML error body and status 403,
        # which botocore reports as code "403" with that body as the message.
        if code == "403" and "<Code>AccessDenied</Code>" in str(error.get("Message")):
            code = "AccessDenied"
        call = self._pending
        self.calls.append(Call(call.action, call.resources, code))

    def denied(self) -> list[Call]:
        return [c for c in self.calls if c.error in ACCESS_DENIED]


def _response(status: int, parsed: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = status
    return AWSResponse("https://gate.invalid/", status, {}, None), parsed


@contextmanager
def principal(
    moto: MotoIam, keys: Keys, gate: Gate, environment: Mapping[str, str]
) -> Iterator[boto3.Session]:
    """boto3's default session (what the handlers use) signed with ``keys``, on moto, gated;
    the function's ``environment`` set meanwhile."""
    saved = {k: os.environ.get(k) for k in (*_ENV, *environment)}
    os.environ.update(
        {
            **environment,
            "AWS_ENDPOINT_URL": moto.endpoint,
            "AWS_ACCESS_KEY_ID": keys.access_key_id,
            "AWS_SECRET_ACCESS_KEY": keys.secret_access_key,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
    )
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    boto3.setup_default_session(region_name=REGION)
    assert boto3.DEFAULT_SESSION is not None
    gate.install(boto3.DEFAULT_SESSION)
    try:
        yield boto3.DEFAULT_SESSION
    finally:
        boto3.DEFAULT_SESSION = None
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)


def user_with(moto: MotoIam, name: str, statements: Sequence[Mapping[str, Any]]) -> Keys:
    """A fresh IAM user in moto whose inline policy is :func:`moto_document` of ``statements``."""
    iam = moto.client("iam")
    user = f"{name}-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="role", PolicyDocument=moto_document(statements))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return Keys(key["AccessKeyId"], key["SecretAccessKey"])


@dataclass(frozen=True)
class World:
    """The moto resources of dev that the tested components use, and how to name them."""

    resolve: Resolver
    observer_queue: str  # receives every event on the bus (a test-only rule)
    claim_check_bucket: str
    connectors: dict[str, dict[str, str]]  # MSK Connect configuration by connector ARN
    service_arn: str
