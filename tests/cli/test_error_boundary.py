"""Issue 27: every operator error of every command ends in one line on stderr and an exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.cli_helpers import (
    COMMANDS,
    ROOT,
    SCENARIOS,
    Case,
    cases,
    command_paths,
    environment,
    run_cli,
    write_stopped_stack,
)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("cli-errors")
    write_stopped_stack(root)
    return environment(root)


def test_error_boundary_every_command_listed_covered() -> None:
    assert command_paths() == set(COMMANDS), "a command without error cases: add it to COMMANDS"
    for command, row in COMMANDS.items():
        assert set(row) == set(SCENARIOS), f"{command}: give a case or a reason for each"


@pytest.mark.parametrize(
    ("command", "scenario", "case"), cases(), ids=[f"{c}-{s}" for c, s, _ in cases()]
)
def test_error_boundary_operator_error_one_line(
    command: str, scenario: str, case: Case, stopped: dict[str, str], tmp_path: Path
) -> None:
    args = tuple(a.replace("{tmp}", str(tmp_path)) for a in case.args)
    result = run_cli(args, stopped)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"{' '.join(args)}: {result.stderr}"
    assert lines[0].startswith("error: "), lines[0]
    assert case.says in lines[0]
    assert result.returncode == case.exit_code, lines[0]
    assert "Traceback" not in result.stdout


def test_error_boundary_invalid_config_names_field_and_reason(
    stopped: dict[str, str], tmp_path: Path
) -> None:
    dev = (ROOT / "config" / "dev.yaml").read_text()
    (tmp_path / "dev.yaml").write_text(dev.replace("max_azs: 2", "max_azs: two"))
    result = run_cli(("doctor", "--env", "dev", "--config-dir", str(tmp_path)), stopped)
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert "network.max_azs" in line and "'two'" in line, line
    assert result.returncode == 2, line


def test_error_boundary_debug_shows_traceback(stopped: dict[str, str]) -> None:
    result = run_cli(("status", "--env", "dev", "--debug"), stopped)
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert "NoCredentialsError" in result.stderr


def test_error_boundary_unreachable_endpoint_one_line(stopped: dict[str, str]) -> None:
    env = {
        **stopped,
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_MAX_ATTEMPTS": "1",
    }
    result = run_cli(("quarantine", "list", "--env", "dev", "--table", "public.orders"), env)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot reach http://127.0.0.1:9")
    assert result.returncode == 1
