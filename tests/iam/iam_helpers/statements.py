"""IAM statements evaluated as AWS does for the actions, resources and condition keys of this
project's templates: which statements allow a call, the user policy moto is given for them,
and which statements a set of recorded accesses needs (found by removing each in turn).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: moto authorizes these services' requests with the request's resource ARN.
MOTO_CHECKS_RESOURCE = frozenset({"s3", "sqs"})


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def matches(patterns: Any, value: str, *, case: bool) -> bool:
    for pattern in as_list(patterns):
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
                if str(actual) not in [str(e) for e in as_list(expected)]:
                    return False
            elif operator in ("StringLike", "ArnLike"):
                if not matches(expected, actual, case=True):
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
        if not matches(statement.get("Action", []), action, case=False):
            continue
        if not matches(statement.get("Resource", []), resource, case=True):
            continue
        if "Condition" in statement and not _condition_holds(statement["Condition"], context or {}):
            continue
        if statement["Effect"] == "Deny":
            return []
        granted.append(index)
    return granted


def label(statement: Mapping[str, Any]) -> str:
    """A statement as a table cell: its Sid or actions, and what it is scoped to."""
    actions = ", ".join(as_list(statement["Action"]))
    return f"{statement['Sid']}: {actions}" if "Sid" in statement else actions


def moto_document(statements: Sequence[Mapping[str, Any]]) -> str:
    """The user policy moto evaluates: S3/SQS statements verbatim, others on ``*`` (the gate
    checks their resources: :mod:`tests.iam.iam_helpers.gate`)."""
    converted = []
    for statement in statements:
        services = {a.split(":", 1)[0] for a in as_list(statement["Action"])}
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


@dataclass(frozen=True)
class Access:
    """One authorization AWS makes for a request: action, resource, condition keys."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...]
    request: str  # "METHOD path?query", to name it in a failure


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
        for action in as_list(statement["Action"])
        if not any(i == index and matches(action, a, case=False) for i, a in used)
    }


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
