"""A component's run under a set of statements: the AWS calls it made and whether it did its
work, the statements found needed by running without each in turn, and the row of
docs/iam.md's table the run gives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.iam.iam_helpers.moto import REGION
from tests.iam.iam_helpers.statements import allowing, label

#: What boto3 raises with when IAM says no, by protocol.
ACCESS_DENIED = frozenset({"AccessDenied", "AccessDeniedException"})


@dataclass(frozen=True)
class Call:
    action: str
    resources: tuple[str, ...]
    error: str | None = None


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
