"""Prod's roles hold exactly dev's statements, but for the names: so the IAM-enforced runs of
this folder, made on dev's templates, hold for prod's as well.

The runs are not repeated on prod's templates: each starts a moto server enforcing IAM (and the
merge job's a Spark session), and prod's would double their time to find, at best, a
difference this comparison already names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.cdk.stack_helpers import stable
from tests.iam.iam_helpers.templates import function_role, logical_id, role_policy

pytestmark = pytest.mark.cdk

Templates = dict[str, dict[str, Any]]


def _task_role(fanout: dict[str, Any]) -> str:
    task = logical_id(fanout, "AWS::ECS::TaskDefinition", "DebeziumServerTask")
    return str(fanout["Resources"][task]["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0])


def _job_role(lake: dict[str, Any]) -> str:
    job = logical_id(lake, "AWS::Glue::Job", "MergeJobsJobPublicOrders")
    return str(lake["Resources"][job]["Properties"]["Role"]["Fn::GetAtt"][0])


def _function(prefix: str) -> Callable[[dict[str, Any]], str]:
    def role(template: dict[str, Any]) -> str:
        return function_role(template, logical_id(template, "AWS::Lambda::Function", prefix))

    return role


#: Each role an IAM-enforced test of this folder runs under: (stack, how to find it).
ROLES: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "fan-out function": ("fanout", _function("FanOutFunction")),
    "credential refresh": ("operations", _function("CredentialRefreshFunction")),
    "replication bootstrap": ("database", _function("ReplicationBootstrapFunction")),
    "Debezium Server task": ("fanout", _task_role),
    "MSK Connect": (
        "capture",
        lambda capture: logical_id(capture, "AWS::IAM::Role", "ConnectorsServiceExecutionRole"),
    ),
    "merge dispatcher": ("lake", _function("DispatcherFunction")),
    "merge job": ("lake", _job_role),
}


def _statements(synthesized: Any, stack: str, find: Callable[[dict[str, Any]], str]) -> list[str]:
    """The role's statements with the environment's names made generic (prefix, stack ids,
    account), each as sorted JSON."""
    config = synthesized.config
    template = synthesized.template(stack)
    text = json.dumps(stable(list(role_policy(template, find(template)).statements)))
    for name, generic in (
        (config.prefix, "<prefix>"),
        (config.prefix.title().replace("-", ""), "<Prefix>"),
        (config.prefix.replace("-", "_"), "<prefix_>"),
        (config.account, "<account>"),
    ):
        text = text.replace(name, generic)
    return sorted(json.dumps(s, sort_keys=True) for s in json.loads(text))


@pytest.mark.parametrize("component", sorted(ROLES))
def test_prod_policies_role_equals_devs_but_for_names(synth, component: str) -> None:  # type: ignore[no-untyped-def]
    stack, find = ROLES[component]
    dev, prod = _statements(synth("dev"), stack, find), _statements(synth("prod"), stack, find)
    assert dev  # the role was found and has statements
    only_prod = sorted(set(prod) - set(dev))
    only_dev = sorted(set(dev) - set(prod))
    assert (only_prod, only_dev) == ([], []), f"{component}: prod's statements differ from dev's"
