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
        f"{prefix}{role}" for role in ("Network", "Database", "Lake", "Capture", "FanOut")
    }


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_app_environment_targets_configured_account(synth, env: str) -> None:  # type: ignore[no-untyped-def]
    result = synth(env)
    for stack in result.assembly.stacks:
        assert stack.environment.account == result.config.account
        assert stack.environment.region == result.config.region
