"""Session-wide fixtures: one synth per environment, one SparkSession, the shared samples."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


def cdk_context() -> dict[str, object]:
    return dict(json.loads((ROOT / "cdk.json").read_text())["context"])


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    """Real Debezium events from ../shared/debezium-samples (skips where that folder is absent)."""
    path = SHARED / "debezium-samples"
    if not path.is_dir():
        pytest.skip(
            f"shared Debezium samples not found at {path} (CI places shared/ beside the repo)"
        )
    return path


class Synth:
    """One environment synthesized once: templates by stack role, and the assembly folder."""

    def __init__(self, env: str, outdir: Path) -> None:
        import aws_cdk as cdk

        from cdclake.config import load_config
        from stacks import build_stacks

        self.env = env
        self.config = load_config(env)
        self.outdir = outdir
        app = cdk.App(context={**cdk_context(), "env": env}, outdir=str(outdir))
        self.stacks = build_stacks(app, self.config)
        self.assembly = app.synth()

    def template(self, role: str) -> dict[str, object]:
        """The synthesized template of a stack by role ('network', 'database', ...)."""
        stack = self.stacks[role]
        return dict(self.assembly.get_stack_by_name(stack.stack_name).template)


_SYNTHS: dict[str, Synth] = {}


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``synth("dev")`` synthesizes that environment once per test session."""

    def get(env: str) -> Synth:
        if env not in _SYNTHS:
            _SYNTHS[env] = Synth(env, tmp_path_factory.mktemp(f"cdk-{env}"))
        return _SYNTHS[env]

    return get


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The one local SparkSession (embedded Hive metastore) shared by every Spark test."""
    from cdclake_merge.session import local_session

    session = local_session(tmp_path_factory.mktemp("spark-warehouse"), app_name="cdclake-tests")
    yield session
    session.stop()
