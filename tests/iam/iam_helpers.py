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
