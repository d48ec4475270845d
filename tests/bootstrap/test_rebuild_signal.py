"""A rebuild's snapshot signal through the bootstrap function (issue #49), against a real
PostgreSQL: the table's Glue run in rebuild mode has no route to the database, so it invokes
the function with ``{"RequestType": "Signal", "Table": …, "SignalId": …}``, having recorded the
id; one row with that id lands in the lake capture's signal table, none in the fan-out's."""

from __future__ import annotations

import json

import pytest

from lambdas.bootstrap import handler
from lambdas.bootstrap.sql import TableSpec
from tests.bootstrap.bootstrap_helpers import (
    CONTEXT,
    FANOUT_SIGNAL,
    LAKE_SIGNAL,
    Database,
)

pytestmark = pytest.mark.postgres
# The fan-out's first: the lake's is the one with a connector, not the first listed.
CAPTURES = [
    {"slot": "cdclake_fanout", "signal_table": FANOUT_SIGNAL, "cluster": "c", "service": "s"},
    {"slot": "cdclake_msk", "signal_table": LAKE_SIGNAL, "connector": "cdc-source"},
]
SIGNAL_ID = "6f1c2d8e-rebuild"


@pytest.fixture
def deployed(database: Database, monkeypatch: pytest.MonkeyPatch) -> Database:
    """The bootstrap created, and the function's environment as the stack sets it."""
    props = database.props(database.spec())
    handler.create(props)
    monkeypatch.setenv("CAPTURES", json.dumps(CAPTURES))
    monkeypatch.setenv("BOOTSTRAP_PROPERTIES", json.dumps(props))
    return database


def _signal(table: str) -> dict[str, object]:
    event = {"RequestType": "Signal", "Table": table, "SignalId": SIGNAL_ID}
    return handler.on_event(event, CONTEXT)


def test_rebuild_signal_lake_table_one_row_with_the_id_in_the_lake_signal_table(
    deployed: Database,
) -> None:
    # public.orders is carried by both captures: only the lake's is asked to snapshot it.
    assert _signal("public.orders") == {"Table": "public.orders", "SignalId": SIGNAL_ID}

    rows = deployed.owner.run(f"SELECT id, type, data FROM {LAKE_SIGNAL}")
    assert [(r[0], r[1], json.loads(r[2])) for r in rows] == [
        (
            SIGNAL_ID,
            "execute-snapshot",
            {"data-collections": ["public.orders"], "type": "incremental"},
        )
    ]
    assert deployed.signals(FANOUT_SIGNAL) == []


def test_rebuild_signal_same_id_again_leaves_one_row(deployed: Database) -> None:
    # A rebuild killed after the row landed, before it marked the signal sent, sends it again.
    _signal("public.orders")
    assert _signal("public.orders") == {"Table": "public.orders", "SignalId": SIGNAL_ID}

    assert [r[0] for r in deployed.owner.run(f"SELECT id FROM {LAKE_SIGNAL}")] == [SIGNAL_ID]


def test_rebuild_signal_table_the_lake_does_not_capture_refused(deployed: Database) -> None:
    with pytest.raises(ValueError, match=r"public\.payments is not a table the lake captures"):
        _signal("public.payments")

    assert deployed.signals(LAKE_SIGNAL) == []


def test_rebuild_signal_table_outside_the_publication_refused(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Configured, not created by the application yet: never streamed, so never snapshotted.
    spec = database.spec(
        [*database.spec().tables, TableSpec("public.later", "DEFAULT", (LAKE_SIGNAL,))]
    )
    props = database.props(spec)
    handler.create(props)
    monkeypatch.setenv("CAPTURES", json.dumps(CAPTURES))
    monkeypatch.setenv("BOOTSTRAP_PROPERTIES", json.dumps(props))

    with pytest.raises(LookupError, match=r"public\.later is not in publication"):
        _signal("public.later")

    assert database.signals(LAKE_SIGNAL) == []
