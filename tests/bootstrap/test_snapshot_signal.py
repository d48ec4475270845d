"""`cdclake snapshot`: which captures a table's signal goes to, and the rows it writes."""

from __future__ import annotations

import pytest

from cdclake.snapshot import send_signal, signal_tables_for
from environment.config import load_config
from lambdas.bootstrap import handler
from tests.bootstrap.bootstrap_helpers import FANOUT_SIGNAL, LAKE_SIGNAL, Database


def test_snapshot_table_of_both_captures_signals_both() -> None:
    assert signal_tables_for(load_config("dev"), "public.orders", None) == {
        "lake": LAKE_SIGNAL,
        "fanout": FANOUT_SIGNAL,
    }


def test_snapshot_capture_option_narrows_to_that_capture() -> None:
    assert signal_tables_for(load_config("dev"), "public.orders", "fanout") == {
        "fanout": FANOUT_SIGNAL
    }


def test_snapshot_capture_that_does_not_carry_table_refused() -> None:
    with pytest.raises(ValueError, match=r"public\.customers has fanout: false in dev"):
        signal_tables_for(load_config("dev"), "public.customers", "fanout")


def test_snapshot_send_signal_one_id_for_two_signal_tables_refused() -> None:
    with pytest.raises(ValueError, match="one signal id names one signal"):
        send_signal(
            None,  # type: ignore[arg-type]  # refused before the database is asked
            signal_tables=[LAKE_SIGNAL, FANOUT_SIGNAL],
            publication="p",
            table="public.orders",
            signal_id="s-1",
        )


def test_snapshot_unknown_capture_refused() -> None:
    with pytest.raises(ValueError, match="choose one of lake, fanout"):
        signal_tables_for(load_config("dev"), "public.orders", "kinesis")


@pytest.mark.postgres
def test_snapshot_send_signal_writes_one_row_per_signal_table(database: Database) -> None:
    props = database.props(database.spec())
    handler.create(props)

    ids = send_signal(
        database.owner,
        signal_tables=[LAKE_SIGNAL, FANOUT_SIGNAL],
        publication=database.publication,
        table="public.orders",
    )

    expected = ("execute-snapshot", {"data-collections": ["public.orders"], "type": "incremental"})
    assert database.signals(LAKE_SIGNAL) == [expected]
    assert database.signals(FANOUT_SIGNAL) == [expected]
    assert len(set(ids)) == 2
