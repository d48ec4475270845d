"""Queries over synthesized templates for the network, database and lake stack tests."""

from __future__ import annotations

import json
import re
from typing import Any

ASSET_HASH = re.compile(r"[0-9a-f]{64}")


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
    return dict(_stable(json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(template)))))


def _stable(value: Any, key: str = "") -> Any:
    """IAM resource lists are ordered by their (hashed) text: sort them once hashes are masked."""
    if isinstance(value, dict):
        return {k: _stable(v, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [_stable(v) for v in value]
        return sorted(items, key=json.dumps) if key == "Resource" else items
    return value


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
