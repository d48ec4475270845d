"""The changes a user makes deploy as updates: each is synthesized from a changed copy of an
environment's config and compared with the templates of the config it starts from, the
templates deployed before.

CloudFormation refuses an update that removes or changes an export another stack still imports
("Export ... cannot be updated as it is in use"; CDK deploys the exporting stack first, while
the importing stack still holds the old template), refuses to replace a resource that keeps its
custom name ("cannot update a stack when a custom-named resource requires replacing"), and
replaces a resource whose logical id goes or whose create-only property changes: for what holds
data, a new, empty resource. Create-only properties are read from the CloudFormation resource
schemas cfn-lint ships.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cdk.stack_helpers import (
    ConfigEdit,
    create_only_properties,
    custom_name,
    exported_values,
    fanout_turned_off,
    imported_names,
    property_at,
    references,
    stateful,
    synth_config_variant,
    synth_edited,
)

pytestmark = pytest.mark.cdk

ROOT = Path(__file__).resolve().parents[2]
Templates = dict[str, dict[str, Any]]
ROLES = ["network", "database", "lake", "capture", "fanout", "operations"]


def _connectors_removed(raw: dict[str, Any]) -> None:
    raw["connect"]["connectors_deployed"] = False  # the first deploy of a plugin upgrade


def _consumer_removed(raw: dict[str, Any]) -> None:
    raw["fanout"]["consumers"] = [
        c for c in raw["fanout"]["consumers"] if c["name"] != "order_notifications"
    ]


def _lake_table_removed(raw: dict[str, Any]) -> None:
    raw["tables"] = [t for t in raw["tables"] if t["name"] != "public.order_lines"]


def _table_added(raw: dict[str, Any]) -> None:
    raw["tables"].append({"name": "public.payments", "primary_key": ["id"], "fanout": True})


def _two_fanout_tables(raw: dict[str, Any]) -> None:
    # dev fans out one table: removing one of two needs a second first.
    for table in raw["tables"]:
        if table["name"] == "public.customers":
            table["fanout"] = True


def _fanout_table_removed(raw: dict[str, Any]) -> None:
    _two_fanout_tables(raw)
    for table in raw["tables"]:
        if table["name"] == "public.customers":
            table["fanout"] = False


def _lake_turned_off(raw: dict[str, Any]) -> None:
    for table in raw["tables"]:
        for lake_only in ("expected_rows", "partition_by", "hudi_table_type"):
            table.pop(lake_only, None)
        table["lake"], table["fanout"] = False, True


@dataclass(frozen=True)
class Change:
    edit: ConfigEdit
    #: The config the change starts from (dev's own when None).
    start: ConfigEdit | None = None
    #: Logical-id prefixes of the stateful resources the change removes on purpose.
    removes: tuple[str, ...] = ()


CHANGES: dict[str, Change] = {
    "connectors_removed": Change(_connectors_removed),
    "consumer_removed": Change(_consumer_removed, removes=("ConsumersOrderNotifications",)),
    "lake_table_removed": Change(_lake_table_removed),
    "table_added": Change(_table_added),
    # No table left in the lake (fan-out only): its merge jobs go, with their imports of the
    # replication bootstrap's function (the rebuild's signal) and their failures' queue.
    "lake_turned_off": Change(_lake_turned_off, removes=("MergeJobFailures",)),
    # A stream holds changes in transit only and is not retained (stacks/components/
    # change_streams.py): it goes with its table.
    "fanout_table_removed": Change(
        _fanout_table_removed, start=_two_fanout_tables, removes=("Streamspubliccustomers",)
    ),
    # Everything but the key goes; what is retained (prod's queues, the offsets, buckets) stays,
    # outside the stack.
    "fanout_turned_off": Change(
        fanout_turned_off,
        removes=("Streams", "DebeziumServer", "FanOut", "Bus", "Consumers"),
    ),
}


@pytest.fixture(scope="module")
def region(synth) -> str:  # type: ignore[no-untyped-def]
    return str(synth("dev").config.region)


@pytest.fixture(scope="module", params=sorted(CHANGES))
def change(
    request: pytest.FixtureRequest, synth: Callable[[str], Any], tmp_path_factory: Any
) -> tuple[str, Templates, Templates]:
    """One change, synthesized once: (name, templates before, templates after) by role."""
    name: str = request.param
    change = CHANGES[name]
    scratch = tmp_path_factory.mktemp(f"update-{name}")
    if change.start is None:
        dev = synth("dev")
        before = {role: dict(dev.template(role)) for role in dev.stacks}
    else:
        before = synth_edited("dev", change.start, scratch)
    return name, before, synth_edited("dev", change.edit, scratch)


def test_updates_change_keeps_every_imported_export(
    change: tuple[str, Templates, Templates],
) -> None:
    name, before, after = change
    old, new = exported_values(before), exported_values(after)
    imported = set().union(*(imported_names(t) for t in before.values()))
    assert imported  # the stacks do share values: the check is not vacuous
    gone = sorted(n for n in imported if n not in new)
    changed = sorted(n for n in imported if n in new and new[n] != old[n])
    assert (gone, changed) == ([], []), f"{name}: exports in use removed or changed"


def _replaced(old: dict[str, Any], new: dict[str, Any], region: str) -> set[str]:
    """Logical ids of ``new`` that CloudFormation replaces: a create-only property changes, or
    reads (``Ref``, ``Fn::GetAtt``) a resource that is replaced, whose id or ARN is new."""
    replaced: set[str] = set()
    grew = True
    while grew:
        grew = False
        for logical_id, resource in new.items():
            if logical_id in replaced or old.get(logical_id, {}).get("Type") != resource["Type"]:
                continue
            before, after = old[logical_id].get("Properties", {}), resource.get("Properties", {})
            for path in create_only_properties(resource["Type"], region):
                value = property_at(after, path)
                if property_at(before, path) != value or references(value) & replaced:
                    replaced.add(logical_id)
                    grew = True
                    break
    return replaced


def _custom_named_replaced(
    old_template: dict[str, Any], new_template: dict[str, Any], region: str
) -> list[str]:
    """What keeps a name of ours and would be replaced by deploying ``new_template`` over
    ``old_template``, or whose name moves to another logical id (the new one is created before
    the old one is deleted): CloudFormation refuses both. A replacement under a new name is
    not refused (a plugin named by its content)."""
    old, new = old_template["Resources"], new_template["Resources"]
    problems = []
    names_before = {
        (r["Type"], json.dumps(r["Properties"][prop])): logical_id
        for logical_id, r in old.items()
        if (prop := custom_name(r, region))
    }
    for logical_id, resource in new.items():
        prop = custom_name(resource, region)
        if prop is None:
            continue
        earlier = names_before.get((resource["Type"], json.dumps(resource["Properties"][prop])))
        if earlier is not None and earlier != logical_id:
            problems.append(f"{logical_id} takes the name of {earlier}")
    for logical_id in sorted(_replaced(old, new, region)):
        prop = custom_name(new[logical_id], region)
        if prop and old[logical_id]["Properties"].get(prop) == new[logical_id]["Properties"][prop]:
            problems.append(f"{logical_id} replaced under its name {prop}")
    return problems


@pytest.mark.parametrize("role", ROLES)
def test_updates_change_replaces_no_custom_named_resource(
    change: tuple[str, Templates, Templates], role: str, region: str
) -> None:
    name, before, after = change
    problems = _custom_named_replaced(before[role], after[role], region)
    assert problems == [], f"{name} would replace custom-named resources of {role}"


def _plugin_zip(jars: list[Path], folder: Path, mtime: int) -> Path:
    """The Debezium plugin zipped as `make plugins` zips it, from copies of ``jars``."""
    plugin = folder / "plugin" / "debezium-connector-postgres"
    plugin.mkdir(parents=True)
    for jar in jars:
        shutil.copyfile(jar, plugin / jar.name)
        os.utime(plugin / jar.name, (mtime, mtime))
    zip_file = folder / "debezium-plugin.zip"
    subprocess.run(
        [str(ROOT / "connectors" / "zip_plugin.sh"), str(plugin.parent), str(zip_file)],
        check=True,
    )
    return zip_file


def test_updates_plugin_rebuilt_replaces_no_connector(
    tmp_path_factory: pytest.TempPathFactory, region: str
) -> None:
    """Connectors redeployed with their plugin zip rebuilt from the same release (`make
    plugins` again, a fresh clone's CI) leave the plugin and the named connectors as they are."""
    jars = sorted((ROOT / "jvm" / "lib" / "debezium-postgres").glob("*.jar"))
    if not jars or shutil.which("zip") is None:
        pytest.skip("no jars in jvm/lib/debezium-postgres (`make setup`) or no zip")
    built, rebuilt = (
        _plugin_zip(jars, tmp_path_factory.mktemp(f"plugin-{n}"), mtime)
        for n, mtime in enumerate((1_700_000_000, 1_800_000_000))
    )
    before = synth_config_variant("dev", "connect", debezium_plugin=str(built))
    after = synth_config_variant("dev", "connect", debezium_plugin=str(rebuilt))
    assert _custom_named_replaced(before["capture"], after["capture"], region) == []


@pytest.mark.parametrize("role", ROLES)
def test_updates_change_replaces_no_stateful_resource(
    change: tuple[str, Templates, Templates], role: str, region: str
) -> None:
    name, before, after = change
    removed_on_purpose = CHANGES[name].removes
    new = after[role]["Resources"]
    problems = []
    for logical_id, resource in stateful(before[role]).items():
        if logical_id not in new:
            if not logical_id.startswith(removed_on_purpose or ("\0",)):
                problems.append(f"{logical_id} ({resource['Type']}) removed")
            continue
        if new[logical_id]["Type"] != resource["Type"]:
            problems.append(f"{logical_id} changes type")
            continue
        old_props, new_props = resource.get("Properties", {}), new[logical_id].get("Properties", {})
        problems += [
            f"{logical_id}.{'.'.join(path)} changes: "
            f"{property_at(old_props, path)!r} -> {property_at(new_props, path)!r}"
            for path in create_only_properties(resource["Type"], region)
            if property_at(old_props, path) != property_at(new_props, path)
        ]
    assert problems == [], f"{name} would replace stateful resources of {role}"


def test_updates_no_stack_imports_msk_connect_attributes(synth) -> None:  # type: ignore[no-untyped-def]
    # Every plugin or worker upgrade replaces the connectors (new ARNs), and the upgrade's
    # first deploy removes them: nothing may import what they export.
    dev = synth("dev")
    before = {role: dict(dev.template(role)) for role in dev.stacks}
    exported = exported_values(before)
    connect_ids = {
        logical_id
        for template in before.values()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"].startswith("AWS::KafkaConnect::")
    }
    assert connect_ids  # the dev config deploys its connectors
    imported = set().union(*(imported_names(t) for t in before.values()))
    readers = sorted(n for n in imported if references(exported[n]) & connect_ids)
    assert readers == []


def test_updates_change_is_checked_against_a_real_change(
    change: tuple[str, Templates, Templates],
) -> None:
    # Guards the fixture: each changed config did change the templates.
    name, before, after = change
    assert json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True), name
