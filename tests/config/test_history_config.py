"""A lake table's ``history`` (issue #51): off unless set, refused on a table with no lake, and
handed to the merge (its job's argument, the local merge's sink) only where it is on."""

from __future__ import annotations

from pathlib import Path

import pytest

from environment.config import ConfigError, load_config
from tests.config.config_helpers import minimal, write_config


def test_table_config_history_unset_is_off_and_no_service(tmp_path: Path) -> None:
    config = load_config(path=write_config(tmp_path, minimal()))
    orders = config.table("public.orders")
    assert orders.history is False
    assert "history" not in config.lake.services_of(orders)


def test_services_of_a_table_with_history_hands_it_to_the_sink(tmp_path: Path) -> None:
    config = load_config(path=write_config(tmp_path, minimal(history=True)))
    assert config.lake.services_of(config.table("public.orders"))["history"] == 1


def test_load_config_history_of_a_fanout_only_table_is_one_line_naming_file_and_field(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, minimal(lake=False, fanout=True, history=True))
    with pytest.raises(ConfigError) as raised:
        load_config(path=path)
    lines = str(raised.value).splitlines()
    assert lines[0] == f"invalid environment config {path}:"
    assert lines[1:] == [
        "  tables.0: Value error, history is kept beside the lake table: the table has lake: false"
    ]
