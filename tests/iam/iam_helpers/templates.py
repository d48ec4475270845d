"""The synthesized templates read as CloudFormation would deploy them: a resource's logical id,
a role's statements, a function's environment, and the resolver that turns intrinsics into the
names of the resources created in moto (or into symbolic ARNs where nothing is created).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.iam.iam_helpers.moto import PARTITION, REGION
from tests.iam.iam_helpers.statements import as_list


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
            statements += as_list(props["PolicyDocument"]["Statement"])
    props = resources[role]["Properties"]
    for inline in props.get("Policies", []):
        statements += as_list(inline["PolicyDocument"]["Statement"])
    return RolePolicy(role, tuple(statements), tuple(props.get("ManagedPolicyArns", [])))


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


def sqs_queue(sqs: Any, name: str) -> Physical:
    """A queue created in moto, as CloudFormation would name it: URL as Ref, its Arn."""
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return Physical(url, {"Arn": attributes["Attributes"]["QueueArn"]})


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
