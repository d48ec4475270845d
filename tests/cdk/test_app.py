"""Every environment synthesizes offline, with all stacks and cdk-nag attached."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.cdk


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_app_environment_synthesizes_every_stack(synth, env: str) -> None:  # type: ignore[no-untyped-def]
    result = synth(env)
    names = {s.stack_name for s in result.assembly.stacks}
    prefix = result.config.prefix.title().replace("-", "")
    assert names == {
        f"{prefix}{role}"
        for role in ("Network", "Database", "Lake", "Capture", "FanOut", "Operations")
    }


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_app_environment_targets_configured_account(synth, env: str) -> None:  # type: ignore[no-untyped-def]
    result = synth(env)
    for stack in result.assembly.stacks:
        assert stack.environment.account == result.config.account
        assert stack.environment.region == result.config.region


# The capture stack is another change's (its MSK cluster keeps a fixed name for now).
NAMED_ROLES = ["network", "database", "lake", "fanout"]


@pytest.mark.parametrize("env", ["dev", "prod"])
@pytest.mark.parametrize("role", NAMED_ROLES)
def test_app_retained_resources_without_fixed_names(synth, env: str, role: str) -> None:  # type: ignore[no-untyped-def]
    # A retained resource outlives its stack; a literal name would collide on the next deploy.
    template = synth(env).template(role)
    fixed = [
        f"{logical_id}.{key}={value}"
        for logical_id, resource in template["Resources"].items()
        if resource.get("DeletionPolicy") == "Retain"
        for key, value in resource.get("Properties", {}).items()
        if key.endswith("Name") and isinstance(value, str)
    ]
    assert fixed == []
