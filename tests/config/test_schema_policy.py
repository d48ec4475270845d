"""A lake table's schema policy (issue #49): what a type change the table cannot take in place
does (``schema_changes``) and what a rebuild does with a dropped column (``drop_columns``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from environment.config import ConfigError, load_config
from tests.config.config_helpers import minimal, write_config


def _config_file(tmp_path: Path, **table: object) -> Path:
    return write_config(tmp_path, minimal(**table), "policy")


def test_table_config_schema_policy_unset_rebuilds_and_keeps_dropped_columns(
    tmp_path: Path,
) -> None:
    table = load_config(path=_config_file(tmp_path)).table("public.orders")
    assert (table.schema_changes, table.drop_columns) == ("rebuild", "keep")


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("schema_changes", "ignore", "'rebuild' or 'stop'"),
        ("drop_columns", "yes", "'keep' or 'drop'"),
    ],
)
def test_load_config_schema_policy_other_value_is_one_line_naming_file_and_field(
    tmp_path: Path, field: str, value: str, allowed: str
) -> None:
    path = _config_file(tmp_path, **{field: value})
    with pytest.raises(ConfigError) as raised:
        load_config(path=path)
    lines = str(raised.value).splitlines()
    assert lines[0] == f"invalid environment config {path}:"
    assert lines[1:] == [f"  tables.0.{field}: Input should be {allowed} (got {value!r})"]


@pytest.mark.parametrize(("field", "value"), [("schema_changes", "stop"), ("drop_columns", "keep")])
def test_load_config_schema_policy_of_a_fanout_only_table_is_rejected(
    tmp_path: Path, field: str, value: str
) -> None:
    path = _config_file(tmp_path, lake=False, fanout=True, **{field: value})
    with pytest.raises(ConfigError, match=f"{field} governs the lake table: the table has lake"):
        load_config(path=path)
