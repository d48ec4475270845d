"""Release gates: cdk-nag AwsSolutions and cfn-lint on every stack of dev and prod, and the
pinned CDK CLI synthesizing offline without AWS credentials."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.cdk

ENVS = ["dev", "prod"]
# Stacks of this issue that carry acknowledgments (the network stack needs none).
ACKNOWLEDGING_ROLES = ["database", "lake"]


def nag_violations(outdir: Path) -> list[str]:
    """AwsSolutions findings left in a cloud assembly's validation report (any severity)."""
    report = outdir / "validation-report.json"
    if not report.exists():
        return []
    found = []
    for plugin in json.loads(report.read_text())["pluginReports"]:
        for violation in plugin["violations"]:
            if "AwsSolutions" in plugin["pluginName"] or "AwsSolutions" in violation["ruleName"]:
                paths = [c["constructPath"] for c in violation["violatingConstructs"]]
                found.append(f"{violation['ruleName']}: {paths}")
    return found


@pytest.mark.parametrize("env", ENVS)
def test_gates_cdk_nag_no_unacknowledged_findings(synth, env: str) -> None:  # type: ignore[no-untyped-def]
    # The session synth raises on an unacknowledged error; warnings would land in the report.
    assert nag_violations(synth(env).outdir) == []


@pytest.mark.slow
def test_gates_cdk_nag_insecure_resource_fails_synth(tmp_path: Path) -> None:
    """Proves the gate is live: the app's own wiring rejects an unencrypted, unlogged bucket."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3

    from environment.config import load_config
    from stacks import build_stacks
    from tests.cdk.stack_helpers import cdk_context

    app = cdk.App(context={**cdk_context(), "env": "dev"}, outdir=str(tmp_path))
    stacks = build_stacks(app, load_config("dev"))
    s3.Bucket(stacks["network"], "Insecure")
    with pytest.raises(Exception, match="AwsSolutions-S10"):
        app.synth()


@pytest.mark.parametrize("env", ENVS)
@pytest.mark.parametrize("role", ACKNOWLEDGING_ROLES)
def test_gates_acknowledgments_narrow_with_reasons(synth, env: str, role: str) -> None:  # type: ignore[no-untyped-def]
    result = synth(env)
    stack = result.stacks[role]
    metadata = json.loads((Path(result.outdir) / f"{stack.artifact_id}.metadata.json").read_text())
    acknowledged = {
        path: rules
        for path, entries in metadata.items()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        # CDK's own CloudFormation-Validate acknowledgments are not ours to police.
        if (rules := {k: v for k, v in entry["data"].items() if "AwsSolutions-" in k})
    }
    assert acknowledged  # this stack has a few, each placed on one construct
    for path, rules in acknowledged.items():
        assert path.count("/") >= 2, f"acknowledged on a whole stack: {path}"
        for rule, reason in rules.items():
            assert len(reason) >= 20, f"{path} {rule}: reason too thin"


def _cfn_lint(templates: list[Path]) -> list[dict[str, Any]]:
    executable = Path(sys.executable).with_name("cfn-lint")
    completed = subprocess.run(
        [str(executable), "--format", "json", *map(str, templates)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.stdout.strip(), completed.stderr
    return list(json.loads(completed.stdout))


def test_gates_cfn_lint_no_errors_both_envs(synth) -> None:  # type: ignore[no-untyped-def]
    templates = [
        path for env in ENVS for path in sorted(Path(synth(env).outdir).glob("*.template.json"))
    ]
    assert len(templates) >= 2 * 5
    errors = [
        f"{m['Rule']['Id']} {m['Filename']}: {m['Message']}"
        for m in _cfn_lint(templates)
        if m["Level"] == "Error"
    ]
    assert errors == []


def test_gates_cfn_lint_reports_a_broken_template(tmp_path: Path) -> None:
    """The linter call above really reports errors (so an empty list means something)."""
    broken = tmp_path / "broken.template.json"
    broken.write_text(
        json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"Nope": 1}}}})
    )
    assert any(m["Level"] == "Error" for m in _cfn_lint([broken]))


def test_gates_cdk_cli_version_pinned(repo_root: Path) -> None:
    version = json.loads((repo_root / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert version[0].isdigit(), f"aws-cdk CLI must be pinned exactly, got {version}"


@pytest.mark.slow
def test_gates_cdk_cli_synth_prod_without_credentials(repo_root: Path, tmp_path: Path) -> None:
    if shutil.which("npx") is None or not (repo_root / "node_modules" / "aws-cdk").is_dir():
        pytest.skip("the pinned CDK CLI is not installed (make setup runs npm ci)")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and k not in {"CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"}
    }
    env.update(
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1",
    )
    from tests.cdk.stack_helpers import PLUGIN_CONTEXT

    out = tmp_path / "cdk.out"
    # CI builds no plugin zips: the same s3:// locations the other synths use.
    context = ["-c", "env=prod"]
    context += [arg for key, value in PLUGIN_CONTEXT.items() for arg in ("-c", f"{key}={value}")]
    completed = subprocess.run(
        ["npx", "--no-install", "cdk", "synth", *context, "--quiet", "-o", str(out)],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert len(list(out.glob("*.template.json"))) == 6  # operations is the sixth
