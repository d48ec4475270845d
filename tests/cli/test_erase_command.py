"""``cdclake erase``'s refusals of a key not given as the table's key: each one line, exit 2,
naming the column, before any environment is reached (no AWS credentials here).

The refusals that need a table or a database are tested where those are: a key the lake
table still holds in tests/merge/test_erase.py (its module lake), a key the source still
holds in tests/bootstrap/test_erase_source.py (the session PostgreSQL)."""

from __future__ import annotations

import pytest

from tests.cli.cli_helpers import environment, run_cli, write_stopped_stack

# dev's public.order_lines has a two-column key: (order_id, line_no).
ERASE = ("erase", "--env", "dev", "--table", "public.order_lines")


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("cli-erase")
    write_stopped_stack(root)
    return environment(root)


def _error(stopped: dict[str, str], *keys: str) -> tuple[int, list[str]]:
    result = run_cli((*ERASE, *(a for k in keys for a in ("--key", k))), stopped)
    return result.returncode, [line for line in result.stderr.splitlines() if line.strip()]


def test_erase_command_missing_key_column_refused(stopped: dict[str, str]) -> None:
    code, lines = _error(stopped, "order_id=7")
    assert (code, len(lines), "--key line_no missing" in lines[0]) == (2, 1, True), lines


def test_erase_command_unknown_column_refused(stopped: dict[str, str]) -> None:
    code, lines = _error(stopped, "order_id=7", "line_no=1", "sku=A-1")
    assert (code, len(lines), "--key sku: not a key column" in lines[0]) == (2, 1, True), lines


def test_erase_command_repeated_column_refused(stopped: dict[str, str]) -> None:
    code, lines = _error(stopped, "order_id=7", "line_no=1", "order_id=8")
    assert (code, len(lines), "--key order_id given twice" in lines[0]) == (2, 1, True), lines


def test_erase_command_refusal_names_no_value(stopped: dict[str, str]) -> None:
    _, lines = _error(stopped, "order_id=secret-7", "line_no=1", "sku=secret-sku")
    assert "secret" not in " ".join(lines), lines
