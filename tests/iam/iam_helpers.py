"""Helpers of the least-privilege tests: a moto server with IAM enforcement, the synthesized
templates' role statements resolved to the moto resources' ARNs, and a gate that checks every
AWS call a component makes against those statements.

moto (5.2) authorizes a request against the caller's user policies only with the request's
resource for S3 and SQS (and IAM/STS); every other service is authorized with the resource
``*``, so a statement scoped to an ARN never matches there. The user moto sees therefore gets
each statement verbatim for S3/SQS and with ``Resource: "*"`` otherwise (moto checks the
action), and :class:`Gate` checks the action *and* the resource of every other call against the
verbatim statements before it leaves the process. Services moto does not have (MSK Connect) are
answered by the gate from an in-memory store, after the same check.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from cdclake.local import processes

REGION = "eu-west-1"
PARTITION = "aws"
ADMIN = "iam-tests-admin"
#: moto authorizes these services' requests with the request's resource ARN.
MOTO_CHECKS_RESOURCE = frozenset({"s3", "sqs"})
#: What boto3 raises with when IAM says no, by protocol.
ACCESS_DENIED = frozenset({"AccessDenied", "AccessDeniedException"})


# --- the moto server ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Keys:
    access_key_id: str
    secret_access_key: str


@dataclass(frozen=True)
class MotoIam:
    endpoint: str
    account: str
    admin: Keys

    def client(self, service: str, keys: Keys | None = None) -> Any:
        keys = keys or self.admin
        return boto3.client(
            service,
            region_name=REGION,
            endpoint_url=self.endpoint,
            aws_access_key_id=keys.access_key_id,
            aws_secret_access_key=keys.secret_access_key,
        )


#: The setup calls moto answers before it starts enforcing: create the admin, its policy, its key.
SETUP_CALLS = 3


@contextmanager
def moto_server(log: Path, account: str) -> Iterator[MotoIam]:
    """``python -m moto.server`` with IAM enforcement after :data:`SETUP_CALLS` calls.

    Those first calls create an admin user (``*`` on ``*``) whose keys set up the resources;
    every later request, the admin's included, is authenticated and authorized. The account
    is the templates' (``MOTO_ACCOUNT_ID``), so their literal ARNs name moto's resources.
    """
    port = processes.free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_CALLS),
        "MOTO_ACCOUNT_ID": account,
    }
    proc = processes.spawn(
        "moto",
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        log=log,
        env=env,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        processes.wait_for("moto", lambda: processes.port_open(port), timeout=60, proc=proc)
        iam = boto3.client(
            "iam",
            region_name=REGION,
            endpoint_url=endpoint,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName=ADMIN)
        iam.put_user_policy(
            UserName=ADMIN,
            PolicyName="admin",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName=ADMIN)["AccessKey"]
        yield MotoIam(endpoint, account, Keys(key["AccessKeyId"], key["SecretAccessKey"]))
    finally:
        processes.stop(proc)


# --- templates: statements and the resolver ----------------------------------------------------


def logical_id(template: Mapping[str, Any], resource_type: str, prefix: str) -> str:
    """The one resource of ``resource_type`` whose logical id is ``prefix`` plus CDK's hash."""
    pattern = re.compile(re.escape(prefix) + r"[0-9A-F]{8}")
    found = [
        lid
        for lid, r in template["Resources"].items()
        if r["Type"] == resource_type and pattern.fullmatch(lid)
    ]
    if len(found) != 1:
        raise LookupError(f"{resource_type} {prefix}*: expected one in the template, found {found}")
    return found[0]


def function_environment(
    template: Mapping[str, Any], function: str, resolve: Resolver, stack: str
) -> dict[str, str]:
    """A Lambda function's environment variables as deployed (intrinsics resolved)."""
    variables = template["Resources"][function]["Properties"]["Environment"]["Variables"]
    return {name: str(resolve(value, stack)) for name, value in variables.items()}


def function_role(template: Mapping[str, Any], function: str) -> str:
    """The logical id of the role a Lambda function runs as."""
    role = template["Resources"][function]["Properties"]["Role"]
    return str(role["Fn::GetAtt"][0])


@dataclass(frozen=True)
class RolePolicy:
    """A role's permissions as synthesized: statements of the policies attached to it."""

    role: str
    statements: tuple[dict[str, Any], ...]
    managed: tuple[Any, ...]


def role_policy(template: Mapping[str, Any], role: str) -> RolePolicy:
    """Statements of every AWS::IAM::Policy naming the role, and of its inline policies."""
    resources = template["Resources"]
    statements: list[dict[str, Any]] = []
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") and {
            "Ref": role
        } in props.get("Roles", []):
            statements += _as_list(props["PolicyDocument"]["Statement"])
    props = resources[role]["Properties"]
    for inline in props.get("Policies", []):
        statements += _as_list(inline["PolicyDocument"]["Statement"])
    return RolePolicy(role, tuple(statements), tuple(props.get("ManagedPolicyArns", [])))


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Physical:
    """What CloudFormation would return for a resource: ``Ref`` and ``Fn::GetAtt`` values."""

    ref: str
    attrs: Mapping[str, str] = field(default_factory=dict)


class Resolver:
    """Resolves intrinsics in the templates of one environment to the moto resources.

    ``physical[stack][logical id]`` is what was created for that resource; ``Fn::ImportValue``
    finds the export among the templates' outputs and resolves it in its own stack. A reference
    to a resource that was not created raises, naming it.
    """

    def __init__(
        self,
        templates: Mapping[str, Mapping[str, Any]],
        physical: Mapping[str, Mapping[str, Physical]],
        *,
        account: str,
        region: str = REGION,
    ) -> None:
        self.templates = templates
        self.physical = physical
        self.pseudo = {
            "AWS::Partition": PARTITION,
            "AWS::Region": region,
            "AWS::AccountId": account,
            "AWS::URLSuffix": "amazonaws.com",
        }
        self.exports = {
            output["Export"]["Name"]: (stack, output["Value"])
            for stack, template in templates.items()
            for output in template.get("Outputs", {}).values()
            if "Export" in output
        }

    def __call__(self, value: Any, stack: str) -> Any:
        if isinstance(value, list):
            return [self(item, stack) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((name, arg),) = value.items()
            if name == "Ref":
                return self.pseudo.get(arg) or self._physical(stack, arg).ref
            if name == "Fn::GetAtt":
                lid, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                attrs = self._physical(stack, lid).attrs
                if attr not in attrs:
                    raise LookupError(f"{stack}: {lid}.{attr} was not created in moto")
                return attrs[attr]
            if name == "Fn::Join":
                separator, items = arg
                return separator.join(str(self(item, stack)) for item in items)
            if name == "Fn::Select":
                index, items = arg
                return self(items, stack)[int(index)]
            if name == "Fn::Split":
                separator, text = arg
                return str(self(text, stack)).split(separator)
            if name == "Fn::Sub":
                text, names = (arg, {}) if isinstance(arg, str) else arg
                variables = {k: str(self(v, stack)) for k, v in names.items()}
                return re.sub(
                    r"\$\{([^}!]+)\}",
                    lambda m: variables.get(m[1]) or str(self(_sub_ref(m[1]), stack)),
                    text,
                )
            if name == "Fn::ImportValue":
                export = self(arg, stack)
                if export not in self.exports:
                    raise LookupError(f"{stack}: import {export} is no template's export")
                source, exported = self.exports[export]
                return self(exported, source)
        return {key: self(item, stack) for key, item in value.items()}

    def _physical(self, stack: str, lid: str) -> Physical:
        try:
            return self.physical[stack][lid]
        except KeyError:
            raise LookupError(f"{stack}: {lid} was not created in moto") from None


def _sub_ref(name: str) -> dict[str, Any]:
    return {"Fn::GetAtt": name.split(".", 1)} if "." in name else {"Ref": name}


# --- evaluating statements ---------------------------------------------------------------------


def _matches(patterns: Any, value: str, *, case: bool) -> bool:
    for pattern in _as_list(patterns):
        if case and fnmatch.fnmatchcase(value, pattern):
            return True
        if not case and fnmatch.fnmatchcase(value.lower(), str(pattern).lower()):
            return True
    return False


def _condition_holds(condition: Mapping[str, Any], context: Mapping[str, str]) -> bool:
    """IAM's operators this project's templates use; a missing key fails the condition."""
    for operator, tests in condition.items():
        for key, expected in tests.items():
            if key not in context:
                return False
            actual = context[key]
            if operator in ("StringEquals", "ArnEquals", "Bool"):
                if str(actual) not in [str(e) for e in _as_list(expected)]:
                    return False
            elif operator in ("StringLike", "ArnLike"):
                if not _matches(expected, actual, case=True):
                    return False
            else:
                raise NotImplementedError(f"condition operator {operator} ({key})")
    return True


def allowing(
    statements: Sequence[Mapping[str, Any]],
    action: str,
    resource: str,
    context: Mapping[str, str] | None = None,
) -> list[int]:
    """Indices of the Allow statements that grant ``action`` on ``resource``; [] when none
    does or an explicit Deny applies."""
    granted = []
    for index, statement in enumerate(statements):
        if not _matches(statement.get("Action", []), action, case=False):
            continue
        if not _matches(statement.get("Resource", []), resource, case=True):
            continue
        if "Condition" in statement and not _condition_holds(statement["Condition"], context or {}):
            continue
        if statement["Effect"] == "Deny":
            return []
        granted.append(index)
    return granted


def label(statement: Mapping[str, Any]) -> str:
    """A statement as a table cell: its Sid or actions, and what it is scoped to."""
    actions = ", ".join(_as_list(statement["Action"]))
    return f"{statement['Sid']}: {actions}" if "Sid" in statement else actions


def moto_document(statements: Sequence[Mapping[str, Any]]) -> str:
    """The user policy moto evaluates: S3/SQS statements verbatim, others on ``*`` (see above)."""
    converted = []
    for statement in statements:
        services = {a.split(":", 1)[0] for a in _as_list(statement["Action"])}
        if "Condition" in statement:
            # moto turns an Allow whose condition it cannot evaluate into a Deny; the gate
            # evaluates conditions instead.
            continue
        if services <= MOTO_CHECKS_RESOURCE:
            converted.append(dict(statement))
        else:
            converted.append({**statement, "Resource": "*"})
    if not converted:
        converted.append({"Effect": "Deny", "Action": "*", "Resource": "*"})
    return json.dumps({"Version": "2012-10-17", "Statement": converted})


# --- the gate: recording and checking each call ------------------------------------------------


@dataclass(frozen=True)
class Call:
    action: str
    resources: tuple[str, ...]
    error: str | None = None


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


def lambda_context(function_name: str) -> Any:
    """What the handlers read of Lambda's context object (typed loosely: not Powertools' class)."""
    return _LambdaContext(function_name)


@dataclass
class _LambdaContext:
    function_name: str
    memory_limit_in_mb: int = 256
    aws_request_id: str = "iam-test"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:000000000000:function:{self.function_name}"


def kinesis_event(changes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Debezium change events as Lambda receives them from a Kinesis stream."""
    records = []
    for number, change in enumerate(changes):
        sequence = f"4954{number:052d}"
        records.append(
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": json.dumps({"id": number}),
                    "sequenceNumber": sequence,
                    "data": base64.b64encode(json.dumps(change).encode()).decode(),
                    "approximateArrivalTimestamp": 1.7e9,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": f"shardId-000000000000:{sequence}",
                "eventName": "aws:kinesis:record",
                "awsRegion": REGION,
            }
        )
    return {"Records": records}


def change_event(row_id: int, lsn: int, *, padding: int = 0) -> dict[str, Any]:
    """An insert into public.orders; ``padding`` characters make it large (a claim check)."""
    return {
        "before": None,
        "after": {"id": row_id, "status": "new", "note": "x" * padding},
        "source": {
            "connector": "postgresql",
            "db": "app",
            "schema": "public",
            "table": "orders",
            "lsn": lsn,
        },
        "op": "c",
        "ts_ms": 1_700_000_000_000,
    }


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message body in a queue, deleting them."""
    bodies = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def docs_row(
    component: str,
    checked_by: str,
    run: Run,
    statements: Sequence[Mapping[str, Any]],
    needed: Mapping[int, Run],
) -> str:
    """The component's row of docs/iam.md's table, from a run and the removals that failed."""
    actions = sorted({c.action for c in run.calls})
    cells = [
        component,
        ", ".join(f"`{a}`" for a in actions),
        "<br>".join(f"`{label(statements[i])}`" for i in sorted(needed)),
        checked_by,
    ]
    return "| " + " | ".join(cells) + " |"


# --- runs under a set of statements ------------------------------------------------------------


@dataclass
class Run:
    """One component run: whether it did its work, and every AWS call it made."""

    ok: bool
    calls: list[Call]
    detail: Any = None

    @property
    def denied(self) -> list[Call]:
        return [c for c in self.calls if c.error in ACCESS_DENIED]


def needed_statements(
    run: Callable[[Sequence[Mapping[str, Any]]], Run], statements: Sequence[Mapping[str, Any]]
) -> dict[int, Run]:
    """Found by trying: the statements without which the run fails, with that failed run."""
    needed = {}
    for index in range(len(statements)):
        without = [s for i, s in enumerate(statements) if i != index]
        result = run(without)
        if not result.ok:
            needed[index] = result
    return needed


def connector_store(connectors: Mapping[str, dict[str, str]]) -> Responder:
    """MSK Connect's DescribeConnector/UpdateConnector over an in-memory configuration per ARN
    (moto has no MSK Connect); the version moves on every update, as the service's does."""
    versions = {arn: 1 for arn in connectors}

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
        if operation == "DescribeConnector":
            return {
                "connectorArn": arn,
                "currentVersion": f"V{versions[arn]}",
                "connectorConfiguration": dict(connectors[arn]),
                "connectorState": "RUNNING",
            }
        if operation == "UpdateConnector":
            if params["currentVersion"] != f"V{versions[arn]}":
                return {"Error": {"Code": "BadRequestException", "Message": "stale version"}}
            connectors[arn].clear()
            connectors[arn].update(params["connectorConfiguration"])
            versions[arn] += 1
            return {"connectorArn": arn, "connectorState": "UPDATING"}
        raise NotImplementedError(f"kafkaconnect {operation}")

    return answer


# --- resource policies -------------------------------------------------------------------------


class _EveryAttribute(dict[str, str]):
    def __init__(self, value: str) -> None:
        super().__init__()
        self.value = value

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return f"{self.value}.{key}"


def symbolic_arn(stack: str, lid: str) -> str:
    """The stand-in ARN of a resource no service created (template checks only)."""
    return f"arn:aws:template:{stack}:{lid}"


def symbolic_resolver(templates: Mapping[str, Mapping[str, Any]], account: str) -> Resolver:
    """A resolver naming every resource by :func:`symbolic_arn` (``.Arn`` etc. for attributes)."""
    physical = {
        stack: {
            lid: Physical(symbolic_arn(stack, lid), _EveryAttribute(symbolic_arn(stack, lid)))
            for lid in template["Resources"]
        }
        for stack, template in templates.items()
    }
    return Resolver(templates, physical, account=account)


def service_statements(
    statements: Sequence[Mapping[str, Any]], service: str
) -> list[dict[str, Any]]:
    """The statements of a resource policy that apply to an AWS service principal."""
    applying = []
    for statement in statements:
        principal = statement.get("Principal")
        services = _as_list(principal.get("Service", [])) if isinstance(principal, Mapping) else []
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
            statements += _as_list(props["PolicyDocument"]["Statement"])
    return statements


def granting_statements(run: Run, statements: Sequence[Mapping[str, Any]]) -> set[int]:
    """The statements that grant some call the run made."""
    return {
        index
        for call in run.calls
        for resource in call.resources
        for index in allowing(statements, call.action, resource)
    }


def assert_each_removal_denied(
    needed: Mapping[int, Run], statements: Sequence[Mapping[str, Any]]
) -> None:
    """Each needed statement, removed, ends the run in AccessDenied on a call it grants."""
    for index, failed in needed.items():
        assert not failed.ok
        assert failed.denied, f"statement {index} removed: failed without AccessDenied"
        assert any(
            allowing([statements[index]], call.action, resource)
            for call in failed.denied
            for resource in call.resources
        ), f"statement {index} removed: a call it does not grant was denied"


def sqs_queue(sqs: Any, name: str) -> Physical:
    """A queue created in moto, as CloudFormation would name it: URL as Ref, its Arn."""
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return Physical(url, {"Arn": attributes["Attributes"]["QueueArn"]})


# --- recorded requests: what moto cannot enforce, checked against the statements ---------------
#
# Spark's S3A client (AWS SDK v1) gets 403 from a moto server that enforces IAM, whatever the
# policy (docs/iam.md). The merge job therefore runs against a moto server that records every
# request (moto's own recorder: method, URL, headers, body) and enforces nothing; each recorded
# request is then mapped to the IAM action, resource and condition keys AWS authorizes it with,
# and checked against the role's verbatim statements, conditions included.


@contextmanager
def recording_moto_server(log: Path, recording: Path, account: str) -> Iterator[str]:
    """``python -m moto.server`` without IAM enforcement, recording every request to
    ``recording`` (``MOTO_ENABLE_RECORDING``); the endpoint."""
    port = processes.free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "MOTO_ACCOUNT_ID": account,
        "MOTO_ENABLE_RECORDING": "true",
        "MOTO_RECORDER_FILEPATH": str(recording),
    }
    proc = processes.spawn(
        "moto-recording",
        [sys.executable, "-c", _LOCKED_RECORDER, "-H", "127.0.0.1", "-p", str(port)],
        log=log,
        env=env,
    )
    try:
        processes.wait_for("moto", lambda: processes.port_open(port), timeout=60, proc=proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        processes.stop(proc)


#: ``moto.server`` whose recorder appends one request at a time: moto's appends from every
#: server thread unlocked, and S3A's concurrent uploads interleaved two entries in one line.
_LOCKED_RECORDER = """
import sys, threading
from moto.moto_api._internal.recorder.models import Recorder
from moto.server import main
lock, record = threading.Lock(), Recorder._record_request
def locked(self, request, body=None):
    with lock:
        record(self, request, body)
Recorder._record_request = locked
main(sys.argv[1:])
"""


def recorder(endpoint: str, command: str) -> str:
    """moto's recorder API: ``reset-recording``, ``download-recording``, ..."""
    import requests

    method = "GET" if command == "download-recording" else "POST"
    response = requests.request(method, f"{endpoint}/moto-api/recorder/{command}", timeout=60)
    response.raise_for_status()
    return response.text


@dataclass(frozen=True)
class Access:
    """One authorization AWS makes for a request: action, resource, condition keys."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...]
    request: str  # "METHOD path?query", to name it in a failure


def recorded_accesses(recording: str, account: str | None = None) -> list[Access]:
    """The IAM authorizations of every request in a moto recording (one JSON per line);
    ``account`` names the ARNs of Glue jobs."""
    accesses: list[Access] = []
    for line in recording.splitlines():
        if line.strip():
            accesses += request_accesses(json.loads(line), account)
    return accesses


#: Glue job operations and the request field naming the job they act on.
GLUE_JOB_OPERATIONS = {"GetJob": "JobName", "GetJobRuns": "JobName", "StartJobRun": "JobName"}


def request_accesses(entry: Mapping[str, Any], account: str | None = None) -> list[Access]:
    """What AWS authorizes for one recorded request (S3's REST API, CloudWatch metrics, Glue's
    job calls).

    The service is the one the request is signed for. A request of any other kind raises,
    naming it: an unmapped request must not pass unchecked.
    """
    from urllib.parse import parse_qs, unquote, urlsplit

    headers = {k.lower(): v for k, v in entry["headers"].items()}
    url = urlsplit(entry["url"])
    method = entry["method"]
    named = f"{method} {url.path}" + (f"?{url.query}" if url.query else "")
    scope = headers.get("authorization", "").partition("Credential=")[2].split(",")[0]
    service = scope.split("/")[3] if scope.count("/") >= 4 else ""
    body = base64.b64decode(entry["body"]) if entry.get("body_encoded") else entry.get("body")

    def access(action: str, resource: str, **context: str) -> Access:
        return Access(action, resource, tuple(sorted(context.items())), named)

    if service == "monitoring":
        # botocore speaks JSON (X-Amz-Target) or CBOR (the operation in the path) to CloudWatch.
        target = headers.get("x-amz-target") or url.path
        operation = target.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
        if operation == "PutMetricData":
            if "json" in headers.get("content-type", ""):
                payload = json.loads(body or "{}")
            else:
                from io import BytesIO

                from botocore.parsers import RpcV2CBORParser

                payload = RpcV2CBORParser().parse_data_item(BytesIO(body or b""))
            namespace = {"cloudwatch:namespace": payload["Namespace"]}
            return [access("cloudwatch:PutMetricData", "*", **namespace)]
    if service == "glue" and account is not None:
        operation = headers.get("x-amz-target", "").rsplit(".", 1)[-1]
        payload = json.loads(body or "{}")
        if operation == "ListJobs":  # no resource-level permission
            return [access("glue:ListJobs", "*")]
        if operation in GLUE_JOB_OPERATIONS:
            region = scope.split("/")[2]
            job = payload[GLUE_JOB_OPERATIONS[operation]]
            return [
                access(f"glue:{operation}", f"arn:{PARTITION}:glue:{region}:{account}:job/{job}")
            ]
    if service != "s3":
        raise NotImplementedError(f"no IAM mapping for {service or 'an unsigned'} request {named}")

    query = parse_qs(url.query, keep_blank_values=True)
    bucket, _, key = url.path.lstrip("/").partition("/")
    key = unquote(key)
    bucket_arn = f"arn:{PARTITION}:s3:::{bucket}"
    if not key:
        if method == "POST" and "delete" in query:
            keys = re.findall(
                r"<Key>(.*?)</Key>",
                (body or b"").decode() if isinstance(body, bytes) else body or "",
            )
            return [access("s3:DeleteObject", f"{bucket_arn}/{_xml_text(k)}") for k in keys]
        if method in ("GET", "HEAD") and "location" in query:
            return [access("s3:GetBucketLocation", bucket_arn)]
        if method == "GET" and "uploads" in query:
            return [access("s3:ListBucketMultipartUploads", bucket_arn)]
        if method == "HEAD" or (method == "GET" and not set(query) - LIST_PARAMETERS):
            # s3:prefix is in the request context only when the request has a prefix.
            prefix = {"s3:prefix": query["prefix"][0]} if "prefix" in query else {}
            return [access("s3:ListBucket", bucket_arn, **prefix)]
        raise NotImplementedError(f"no IAM mapping for bucket request {named}")
    object_arn = f"{bucket_arn}/{key}"
    if method in ("GET", "HEAD") and "uploadId" in query:
        return [access("s3:ListMultipartUploadParts", object_arn)]
    if method in ("GET", "HEAD") and not set(query) - OBJECT_READ_PARAMETERS:
        return [access("s3:GetObject", object_arn)]
    if method == "PUT" and "x-amz-copy-source" in headers:
        source = unquote(headers["x-amz-copy-source"]).lstrip("/").split("?", 1)[0]
        return [
            access("s3:PutObject", object_arn),
            access("s3:GetObject", f"arn:{PARTITION}:s3:::{source}"),
        ]
    if method in ("PUT", "POST") and set(query) <= {"uploads", "uploadId", "partNumber"}:
        return [access("s3:PutObject", object_arn)]
    if method == "DELETE" and "uploadId" in query:
        return [access("s3:AbortMultipartUpload", object_arn)]
    if method == "DELETE" and not query:
        return [access("s3:DeleteObject", object_arn)]
    raise NotImplementedError(f"no IAM mapping for object request {named}")


#: Query parameters of a ListObjects(V2) request (anything else on a bucket GET is another API).
LIST_PARAMETERS = frozenset(
    {
        "list-type",
        "prefix",
        "delimiter",
        "max-keys",
        "marker",
        "start-after",
        "continuation-token",
        "encoding-type",
        "fetch-owner",
    }
)
#: Query parameters a GetObject/HeadObject may carry without becoming another API.
OBJECT_READ_PARAMETERS = frozenset({"partNumber", "response-content-type"})


def _xml_text(text: str) -> str:
    from xml.sax.saxutils import unescape

    return unescape(text, {"&quot;": '"', "&apos;": "'"})


def sse_kms_accesses(accesses: Sequence[Access], bucket_keys: Mapping[str, str]) -> list[Access]:
    """What S3 asks KMS for, as the caller, on a bucket whose default encryption is SSE-KMS
    (``bucket_keys``: bucket name -> key ARN): ``kms:GenerateDataKey`` to write an object,
    ``kms:Decrypt`` to read one. moto does not call KMS; AWS does, with the caller's rights."""
    derived = []
    for access in accesses:
        bucket = access.resource.removeprefix(f"arn:{PARTITION}:s3:::").split("/", 1)[0]
        if bucket not in bucket_keys or "/" not in access.resource.split(":::", 1)[1]:
            continue
        if access.action == "s3:PutObject":
            derived.append(Access("kms:GenerateDataKey", bucket_keys[bucket], (), access.request))
        elif access.action == "s3:GetObject":
            derived.append(Access("kms:Decrypt", bucket_keys[bucket], (), access.request))
    return derived


def unallowed(statements: Sequence[Mapping[str, Any]], accesses: Sequence[Access]) -> list[Access]:
    """The accesses no statement allows (conditions evaluated with each access's context)."""
    return [a for a in accesses if not allowing(statements, a.action, a.resource, dict(a.context))]


def needed_for(
    statements: Sequence[Mapping[str, Any]], accesses: Sequence[Access]
) -> dict[int, list[Access]]:
    """Found by removal: each statement without which some access is no longer allowed, with
    the accesses that removal denies."""
    already = set(unallowed(statements, accesses))  # denied with every statement: no one's
    needed = {}
    for index in range(len(statements)):
        without = [s for i, s in enumerate(statements) if i != index]
        if denied := [a for a in unallowed(without, accesses) if a not in already]:
            needed[index] = denied
    return needed


@contextmanager
def spark_s3(spark: Any, endpoint: str, region: str) -> Iterator[None]:
    """The shared SparkSession's S3A client on ``endpoint`` (a JVM started before the server:
    settings go into its Hadoop configuration, S3A's cache off), then back as it was."""
    from cdclake_merge.session import s3_settings

    settings = {
        **s3_settings({"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": region}),
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": "merge-job",
        "fs.s3a.secret.key": "merge-job",
        "fs.s3.impl.disable.cache": "true",
        "fs.s3a.impl.disable.cache": "true",
    }
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    before = {key: conf.get(key) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)


# --- Kafka: the broker's authorization decisions, checked against kafka-cluster statements -----
#
# No moto service speaks Kafka. The local stack's broker runs Kafka's StandardAuthorizer, which
# allows everything (no ACLs) and logs every decision (cdclake/local/kafka.py); each decision is
# mapped to the kafka-cluster action MSK's IAM authorizer checks for it and evaluated against
# the service execution role's verbatim statements.

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
        if all(a.startswith("kafka-cluster:") for a in _as_list(s.get("Action", [])))
    ]


def unexercised_actions(
    statements: Sequence[Mapping[str, Any]], accesses: Sequence[Access]
) -> set[str]:
    """Actions (or action patterns) of the statements that allow no access."""
    used = [
        (index, access.action)
        for access in accesses
        for index in allowing(statements, access.action, access.resource)
    ]
    return {
        action
        for index, statement in enumerate(statements)
        for action in _as_list(statement["Action"])
        if not any(i == index and _matches(action, a, case=False) for i, a in used)
    }


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


def resolver_with(
    templates: Mapping[str, Mapping[str, Any]],
    account: str,
    region: str,
    created: Mapping[str, Mapping[str, Physical]],
) -> Resolver:
    """A resolver naming ``created`` resources as given and every other one symbolically."""
    base = symbolic_resolver(templates, account)
    physical = {
        stack: {**base.physical[stack], **created.get(stack, {})} for stack in base.physical
    }
    return Resolver(templates, physical, account=account, region=region)


#: Debezium Server's Kinesis sink is the AWS SDK for Java v2; the local stack's own clients and
#: the fan-out handler are boto3 ("Boto3/...").
SERVER_USER_AGENT = "aws-sdk-java/"


@dataclass(frozen=True)
class ServerRecording:
    """moto's recording of the local stack with the fan-out, and the stream of each table."""

    recording: str
    streams: Mapping[str, str]


def kinesis_accesses(
    recording: str,
    user_agent: str,
    stream_arns: Mapping[str, str],
    stream_keys: Mapping[str, str],
) -> list[Access]:
    """The IAM authorizations of the recorded requests whose User-Agent starts with
    ``user_agent``: ``kinesis:<operation>`` on the stream (by name or ARN in the JSON body),
    and for a write to an encrypted stream ``kms:GenerateDataKey`` on its key (what Kinesis
    asks KMS for with the producer's permissions). Any other request of that client, or an
    unknown stream, raises: an unmapped request must not pass unchecked."""
    accesses: list[Access] = []
    by_arn = {arn: arn for arn in stream_arns.values()}
    for line in recording.splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        headers = {k.lower(): v for k, v in entry["headers"].items()}
        if not headers.get("user-agent", "").startswith(user_agent):
            continue
        target = headers.get("x-amz-target", "")
        named = f"{entry['method']} {target or entry['url']}"
        service, _, operation = target.partition(".")
        if not service.startswith("Kinesis_"):
            raise NotImplementedError(f"no IAM mapping for {named}")
        raw = entry.get("body") or "{}"
        body = json.loads(base64.b64decode(raw) if entry.get("body_encoded") else raw)
        stream = body.get("StreamARN") or body.get("StreamName")
        arn = by_arn.get(stream) or stream_arns.get(stream)
        if arn is None:
            raise LookupError(f"{named}: unknown stream {stream!r}")
        accesses.append(Access(f"kinesis:{operation}", arn, (), named))
        if operation in ("PutRecord", "PutRecords") and arn in stream_keys:
            accesses.append(Access("kms:GenerateDataKey", stream_keys[arn], (), named))
    return accesses


# --- the Glue Data Catalog: the metastore calls of a local run, as Glue API calls -------------
#
# No moto service stands behind Hive's metastore client. Locally the metastore is Spark's
# embedded Derby one, whose handler (HiveMetaStore.HMSHandler) writes an audit line for every
# call it serves, whoever makes it (Hudi's sync or Spark's session catalog); on Glue the same
# IMetaStoreClient calls go to AWS's Glue Data Catalog client, which makes them Glue API calls
# with the job role's credentials.

#: The logger HMSHandler audits each call with ("ugi=... ip=... cmd=<call><details>").
METASTORE_AUDIT_LOGGER = "org.apache.hadoop.hive.metastore.HiveMetaStore.audit"
#: What HMSHandler also writes to the audit log when a handler thread ends: no call.
METASTORE_HOUSEKEEPING = ("Cleaning up thread local RawStore", "Done cleaning up thread local")
#: Metastore call (the audit's cmd) -> the Glue API calls AWS's client makes for it
#: (awslabs/aws-glue-data-catalog-client-for-apache-hive-metastore, GlueMetastoreClientDelegate
#: and DefaultAWSGlueMetastore). ``get_table`` also serves ``tableExists``, which checks the
#: database first (``databaseExists`` -> GetDatabase); ``create_table`` and ``alter_table``
#: check that the table exists first the same way; ``add_partitions`` reads its table;
#: ``alter_partitions`` updates one partition at a time; ``drop_partition`` reads it first.
GLUE_CATALOG_ACTIONS: dict[str, tuple[str, ...]] = {
    "get_database": ("glue:GetDatabase",),
    "create_database": ("glue:CreateDatabase",),
    "get_all_databases": ("glue:GetDatabases",),
    "get_databases": ("glue:GetDatabases",),
    "get_table": ("glue:GetDatabase", "glue:GetTable"),
    "get_tables": ("glue:GetTables",),
    "create_table": ("glue:GetDatabase", "glue:GetTable", "glue:CreateTable"),
    "alter_table": ("glue:GetDatabase", "glue:GetTable", "glue:UpdateTable"),
    "get_partitions": ("glue:GetPartitions",),
    "get_partition": ("glue:GetPartition",),
    "get_partitions_by_names": ("glue:BatchGetPartition",),
    "add_partitions": ("glue:GetTable", "glue:BatchCreatePartition"),
    "alter_partitions": ("glue:UpdatePartition",),
    "drop_partition": ("glue:GetPartition", "glue:DeletePartition"),
}
_AUDIT_CMD = re.compile(r"\tcmd=(?P<cmd>.*?)\t?$")
_AUDIT_TABLE = re.compile(r"\bdb=(?P<db>\S+) tbl=(?P<table>\S+)")


@dataclass(frozen=True)
class MetastoreCall:
    """One call the metastore served: its name, database and table (None where it has none)."""

    name: str
    database: str | None
    table: str | None
    thread: str

    def __str__(self) -> str:
        target = ".".join(p for p in (self.database, self.table) if p)
        return f"{self.name} {target}".strip()


@contextmanager
def metastore_audit(spark: Any, log: Path) -> Iterator[Callable[[], list[MetastoreCall]]]:
    """The shared SparkSession's metastore audit lines written to ``log`` (a log4j2 file
    appender added to the running JVM's configuration, the logger at INFO and not additive:
    the console stays as quiet as before), then the configuration as it was. Yields a
    function that reads the calls recorded so far."""
    jvm = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern("%t\t%m%n").build()
    appender = (
        log4j.core.appender.FileAppender.newBuilder()
        .setName(f"cdclake-iam-metastore-audit-{uuid.uuid4().hex[:8]}")
        .withFileName(str(log))
        .setLayout(layout)
        .setImmediateFlush(True)
        .setConfiguration(config)
        .build()
    )
    appender.start()
    config.addAppender(appender)
    logger = (
        log4j.core.config.LoggerConfig.newBuilder()
        .withLoggerName(METASTORE_AUDIT_LOGGER)
        .withLevel(log4j.Level.INFO)
        .withAdditivity(False)
        .withConfig(config)
        .build()
    )
    logger.addAppender(appender, log4j.Level.INFO, None)
    config.addLogger(METASTORE_AUDIT_LOGGER, logger)
    context.updateLoggers()
    try:
        yield lambda: metastore_calls(log.read_text() if log.exists() else "")
    finally:
        config.removeLogger(METASTORE_AUDIT_LOGGER)
        config.getAppenders().remove(appender.getName())
        context.updateLoggers()
        appender.stop()


def metastore_calls(audit: str) -> list[MetastoreCall]:
    """The calls of an audit log written by :func:`metastore_audit` ("<thread>\\t<line>").

    ``add_partitions`` is audited without its table: it is the table the same thread named
    last (the client reads the table before it adds partitions to it). A line that is no
    known call raises, naming it: an unmapped call must not pass unchecked."""
    calls: list[MetastoreCall] = []
    last_table: dict[str, tuple[str, str]] = {}
    for line in audit.splitlines():
        if not line.strip():
            continue
        thread, _, message = line.partition("\t")
        found = _AUDIT_CMD.search(message)
        if found is None:
            raise ValueError(f"not a metastore audit line: {line[:200]}")
        cmd = found["cmd"]
        if cmd.startswith(METASTORE_HOUSEKEEPING):
            continue
        name = re.split(r"[\s:]", cmd, maxsplit=1)[0]
        if name not in GLUE_CATALOG_ACTIONS:
            raise LookupError(f"no Glue mapping for metastore call {cmd[:200]!r}")
        database: str | None = None
        table: str | None = None
        if named := _AUDIT_TABLE.search(cmd):
            database, table = named["db"], named["table"]
        elif name == "create_table":
            created = re.search(r"Table\(tableName:(?P<t>[^,]+), dbName:(?P<d>[^,]+),", cmd)
            if created is None:
                raise ValueError(f"create_table without its table: {cmd[:200]}")
            database, table = created["d"], created["t"]
        elif name == "create_database":
            created = re.search(r"Database\(name:(?P<d>[^,]+),", cmd)
            if created is None:
                raise ValueError(f"create_database without its name: {cmd[:200]}")
            database = created["d"]
        elif name == "get_database":
            database = cmd.split(":", 1)[1].strip()
        elif name == "add_partitions":
            if thread not in last_table:
                raise LookupError(f"add_partitions on thread {thread} names no table before it")
            database, table = last_table[thread]
        if database and table:
            last_table[thread] = (database, table)
        calls.append(MetastoreCall(name, database, table, thread))
    return calls


def glue_catalog_arns(
    database: str | None, table: str | None, account: str, region: str = REGION
) -> tuple[str, ...]:
    """What Glue authorizes a call on: the catalog, the database, the table (each must be
    allowed: docs.aws.amazon.com/glue/latest/dg/glue-specifying-resource-arns.html)."""
    base = f"arn:{PARTITION}:glue:{region}:{account}"
    arns = [f"{base}:catalog"]
    if database:
        arns.append(f"{base}:database/{database}")
        if table:
            arns.append(f"{base}:table/{database}/{table}")
    return tuple(arns)


def glue_catalog_accesses(
    calls: Sequence[MetastoreCall],
    account: str,
    databases: Mapping[str, str],
    region: str = REGION,
) -> list[Access]:
    """The Glue authorizations of metastore calls (:data:`GLUE_CATALOG_ACTIONS`), each
    database renamed by ``databases`` (the test's own database -> the template's)."""
    accesses = []
    for call in calls:
        database = databases.get(call.database or "", call.database)
        arns = glue_catalog_arns(database, call.table, account, region)
        for action in GLUE_CATALOG_ACTIONS[call.name]:
            # Database calls name no table; a table's GetDatabase is on its database.
            scoped = arns[:2] if action in ("glue:GetDatabase", "glue:CreateDatabase") else arns
            accesses += [Access(action, arn, (), str(call)) for arn in scoped]
    return accesses


# --- recorded runs on the lake's buckets (the merge job's and the dispatcher's checks) ----------


def use_recording_moto(patch: pytest.MonkeyPatch, endpoint: str, user: str) -> None:
    """boto3 (and S3A, through the same variables) on ``endpoint`` with ``user``'s dummy keys,
    nothing of this machine's AWS configuration."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        patch.delenv(name)
    patch.setenv("AWS_ENDPOINT_URL", endpoint)
    patch.setenv("AWS_ACCESS_KEY_ID", user)
    patch.setenv("AWS_SECRET_ACCESS_KEY", user)
    patch.setenv("AWS_DEFAULT_REGION", REGION)
    patch.setenv("AWS_CONFIG_FILE", os.devnull)
    patch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


@dataclass(frozen=True)
class LakeWorld:
    """The lake stack's key and buckets created in moto, and how to resolve its template."""

    resolve: Resolver
    bucket_keys: dict[str, str]  # bucket -> KMS key ARN, where the template encrypts SSE-KMS


def lake_world(
    templates: Mapping[str, Mapping[str, Any]], account: str, buckets: Sequence[str], suffix: str
) -> LakeWorld:
    """The lake's key and the ``buckets`` (logical id prefixes) in the current moto, named
    ``<env>-<name>-<suffix>``. The template's default encryption is not set in moto: S3A (SDK
    v1) refuses to copy an object moto reports as SSE-KMS over plain HTTP; what it costs in
    KMS rights is derived from the template instead (:func:`sse_kms_accesses`)."""
    lake = templates["lake"]
    physical: dict[str, Physical] = {}
    key_id = logical_id(lake, "AWS::KMS::Key", "StorageKey")
    key_arn = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    physical[key_id] = Physical(key_arn, {"Arn": key_arn})
    resolve = Resolver(
        templates, {"lake": physical, **{r: {} for r in templates if r != "lake"}}, account=account
    )
    s3 = boto3.client("s3", region_name=REGION)
    bucket_keys: dict[str, str] = {}
    for prefix in buckets:
        lid = logical_id(lake, "AWS::S3::Bucket", prefix)
        bucket = f"dev-{prefix.removeprefix('Storage').lower()}-{suffix}"
        physical[lid] = Physical(bucket, {"Arn": f"arn:aws:s3:::{bucket}"})
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
        encryption = resolve(lake["Resources"][lid]["Properties"]["BucketEncryption"], "lake")
        (rule,) = encryption["ServerSideEncryptionConfiguration"]
        default = rule["ServerSideEncryptionByDefault"]
        if default["SSEAlgorithm"] == "aws:kms":
            bucket_keys[bucket] = default["KMSMasterKeyID"]
    return LakeWorld(resolve, bucket_keys)


def denied_lines(denied: Sequence[Access]) -> str:
    return "\n".join(f"{a.action} {a.resource} {a.context} ({a.request})" for a in denied)


def sid(statement: Mapping[str, Any]) -> str:
    return str(statement.get("Sid") or label(statement))


def needed_sids(
    statements: Sequence[Mapping[str, Any]], needed: Mapping[int, list[Access]]
) -> set[str]:
    """The needed statements by Sid, after checking that each one's removal denies only
    accesses that statement itself grants."""
    for index, denied in needed.items():
        assert all(
            allowing([statements[index]], a.action, a.resource, dict(a.context)) for a in denied
        ), sid(statements[index])
    return {sid(statements[i]) for i in needed}


#: The lake tables of config/local.yaml the Kafka recording creates and writes (conftest.py's
#: kafka_recording); the others (tests/query's) are configured but not created there.
KAFKA_RECORDED_TABLES = ("public.customers", "public.orders")
