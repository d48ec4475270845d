"""Helpers of the stack tests: resources by type, IAM statements, templates normalized for
snapshots (asset hashes masked), and a second synth for config variants."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def resources(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """Logical id -> Properties of every resource of a type (ids are never asserted on)."""
    return {
        logical_id: resource.get("Properties", {})
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }


def only(template: dict[str, Any], resource_type: str) -> dict[str, Any]:
    found = list(resources(template, resource_type).values())
    assert len(found) == 1, f"expected one {resource_type}, found {len(found)}"
    return found[0]


def normalized(value: Any) -> Any:
    """Asset hashes and other stacks' export names masked, so the snapshot shows our changes."""
    if isinstance(value, dict):
        if set(value) == {"Fn::ImportValue"}:
            return {"Fn::ImportValue": "<import>"}
        return {key: normalized(item) for key, item in value.items()}
    if isinstance(value, list):
        return [normalized(item) for item in value]
    if isinstance(value, str):
        return ASSET_HASH.sub("<asset-hash>", value)
    return value


def stable(value: Any, key: str = "") -> Any:
    """IAM resource lists are ordered by their (hashed) text: sort them once hashes are masked."""
    if isinstance(value, dict):
        return {k: stable(v, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [stable(v) for v in value]
        return sorted(items, key=json.dumps) if key == "Resource" else items
    return value


def strings(value: Any) -> list[str]:
    """Every string in a (resolved) template value."""
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return [value] if isinstance(value, str) else []


def cdk_context() -> dict[str, Any]:
    """The app's context from cdk.json (feature flags, pinned AZs), as ``cdk synth`` uses it."""
    root = Path(__file__).resolve().parents[2]
    return dict(json.loads((root / "cdk.json").read_text())["context"])


def synth_variant(env: str, role: str, **connect: Any) -> dict[str, Any]:
    """One stack's template for ``env`` with ``connect`` settings overridden (a second synth,
    so only for what the shared synth of the checked-in configs cannot show)."""
    import aws_cdk as cdk

    from cdclake.config import load_config
    from stacks import build_stacks

    config = load_config(env)
    config = config.model_copy(update={"connect": config.connect.model_copy(update=connect)})
    app = cdk.App(context={**cdk_context(), "env": env})
    stacks = build_stacks(app, config)
    return dict(app.synth().get_stack_by_name(stacks[role].stack_name).template)


def of_type(template: dict[str, Any], resource_type: str) -> list[dict[str, Any]]:
    """Resources of a type, whole (Type, Properties, DeletionPolicy...); ids never used."""
    return [r for r in template["Resources"].values() if r["Type"] == resource_type]


def props(template: dict[str, Any], resource_type: str) -> list[dict[str, Any]]:
    return [r.get("Properties", {}) for r in of_type(template, resource_type)]


def single(template: dict[str, Any], resource_type: str) -> dict[str, Any]:
    found = props(template, resource_type)
    assert len(found) == 1, f"expected one {resource_type}, found {len(found)}"
    return found[0]


def masked(template: dict[str, Any]) -> dict[str, Any]:
    """The template with asset hashes masked, for syrupy snapshots."""
    return dict(stable(json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(template)))))


def policy_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every statement of every IAM policy (inline Role policies and AWS::IAM::Policy)."""
    statements: list[dict[str, Any]] = []
    for policy in props(template, "AWS::IAM::Policy"):
        statements += policy["PolicyDocument"]["Statement"]
    for role in props(template, "AWS::IAM::Role"):
        for policy in role.get("Policies", []):
            statements += policy["PolicyDocument"]["Statement"]
    return statements


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
