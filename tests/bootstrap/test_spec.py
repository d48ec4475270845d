"""The bootstrap's spec without a database: what the stack hands the custom resource, how it
travels as JSON, and the names it derives (test_replication_bootstrap.py applies it to a server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from environment.config import load_config
from environment.paths import CONFIG_DIR
from environment.replication import bootstrap_spec
from lambdas.bootstrap.sql import BootstrapSpec, TableSpec, qualified
from tests.bootstrap.bootstrap_helpers import LAKE_SIGNAL

SPEC = BootstrapSpec(
    replication_user="replicator",
    publication="pub",
    heartbeat_table="cdclake.heartbeat",
    signal_tables=("cdclake.signal", "cdclake.signal_fanout"),
    tables=(
        TableSpec("public.customers", "FULL", ("cdclake.signal",)),
        TableSpec("public.orders", "DEFAULT", ("cdclake.signal", "cdclake.signal_fanout")),
    ),
    slots=("slot_lake", "slot_fanout"),
    retired_slots=("slot_old",),
    drop_objects_on_delete=True,
)


def test_bootstrap_spec_json_round_trip_keeps_every_field() -> None:
    assert BootstrapSpec.from_dict(json.loads(json.dumps(SPEC.to_dict()))) == SPEC


def test_bootstrap_spec_to_dict_is_plain_json_with_field_names() -> None:
    assert SPEC.to_dict() == {
        "replication_user": "replicator",
        "publication": "pub",
        "heartbeat_table": "cdclake.heartbeat",
        "signal_tables": ["cdclake.signal", "cdclake.signal_fanout"],
        "tables": [
            {
                "name": "public.customers",
                "replica_identity": "FULL",
                "signal_tables": ["cdclake.signal"],
            },
            {
                "name": "public.orders",
                "replica_identity": "DEFAULT",
                "signal_tables": ["cdclake.signal", "cdclake.signal_fanout"],
            },
        ],
        "slots": ["slot_lake", "slot_fanout"],
        "retired_slots": ["slot_old"],
        "drop_objects_on_delete": True,
    }


def test_bootstrap_spec_from_dict_previous_deploy_properties_take_defaults() -> None:
    # A rollback replays the previous deploy's properties: one signal table, fewer keys.
    previous = {
        "replication_user": "replicator",
        "publication": "pub",
        "heartbeat_table": "cdclake.heartbeat",
        "signal_table": "cdclake.signal",
        "tables": [{"name": "public.orders"}],
    }
    assert BootstrapSpec.from_dict(previous) == BootstrapSpec(
        replication_user="replicator",
        publication="pub",
        heartbeat_table="cdclake.heartbeat",
        signal_tables=("cdclake.signal",),
        tables=(TableSpec("public.orders", "DEFAULT", ()),),
        slots=(),
        drop_objects_on_delete=False,
    )


def test_bootstrap_spec_published_tables_add_heartbeat_and_signal_tables() -> None:
    assert SPEC.published_tables == [
        "public.customers",
        "public.orders",
        "cdclake.heartbeat",
        "cdclake.signal",
        "cdclake.signal_fanout",
    ]
    assert SPEC.cdc_tables == ["cdclake.heartbeat", "cdclake.signal", "cdclake.signal_fanout"]


def test_qualified_quotes_schema_and_table_separately() -> None:
    assert qualified("public.orders") == '"public"."orders"'
    assert qualified('Sales.Order "Lines"') == '"Sales"."Order ""Lines"""'


def test_qualified_name_without_schema_is_rejected_naming_it() -> None:
    with pytest.raises(ValueError, match=r"table name 'orders' is not schema\.table"):
        qualified("orders")


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_bootstrap_spec_of_config_carries_every_table_with_its_captures(env: str) -> None:
    config = load_config(env)
    replication = config.database.replication
    spec = BootstrapSpec.from_dict(bootstrap_spec(config))
    assert (spec.replication_user, spec.publication, spec.heartbeat_table) == (
        replication.user,
        replication.publication,
        replication.heartbeat_table,
    )
    assert spec.signal_tables == (replication.signal_table, replication.fanout_signal_table)
    assert spec.slots == (replication.slot, replication.fanout_slot)
    assert spec.retired_slots == ()  # both captures carry tables
    assert spec.drop_objects_on_delete == replication.drop_objects_on_delete
    assert [(t.name, t.replica_identity) for t in spec.tables] == [
        (t.name, t.replica_identity) for t in config.tables
    ]
    for table, configured in zip(spec.tables, config.tables, strict=True):
        wanted = [replication.signal_table] * configured.lake
        wanted += [replication.fanout_signal_table] * configured.fanout
        assert list(table.signal_tables) == wanted, table.name


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_bootstrap_spec_of_config_is_what_the_lambda_reads_back(env: str) -> None:
    payload = bootstrap_spec(load_config(env))
    assert BootstrapSpec.from_dict(json.loads(json.dumps(payload))).to_dict() == payload


def test_bootstrap_spec_of_config_fanout_turned_off_retires_its_slot(tmp_path: Path) -> None:
    raw = yaml.safe_load((CONFIG_DIR / "dev.yaml").read_text())
    raw["tables"] = [{**t, "fanout": False} for t in raw["tables"] if t.get("lake", True)]
    raw.setdefault("fanout", {})["consumers"] = []
    path = tmp_path / "no-fanout.yaml"
    path.write_text(yaml.safe_dump(raw))
    config = load_config(path=path)
    assert bootstrap_spec(config)["retired_slots"] == [config.database.replication.fanout_slot]


def test_bootstrap_spec_of_config_keeps_drop_objects_on_delete(tmp_path: Path) -> None:
    raw = yaml.safe_load((CONFIG_DIR / "dev.yaml").read_text())
    raw["database"]["replication"]["drop_objects_on_delete"] = True
    path = tmp_path / "dropping.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert bootstrap_spec(load_config(path=path))["drop_objects_on_delete"] is True


def test_spec_previous_deploy_single_signal_table_still_read() -> None:
    # A rollback replays the previous deploy's properties against the new code.
    spec = BootstrapSpec.from_dict(
        {
            "replication_user": "r",
            "publication": "p",
            "heartbeat_table": "cdclake.heartbeat",
            "signal_table": LAKE_SIGNAL,
            "tables": [{"name": "public.orders"}],
        }
    )

    assert spec.signal_tables == (LAKE_SIGNAL,)
    assert spec.tables[0].signal_tables == ()
