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
from collections.abc import Callable
from dataclasses import dataclass
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
    synth_edited,
)

pytestmark = pytest.mark.cdk

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


@pytest.mark.parametrize("role", ROLES)
def test_updates_change_replaces_no_custom_named_resource(
    change: tuple[str, Templates, Templates], role: str, region: str
) -> None:
    """A resource with a name of ours whose create-only property changes, or whose name moves
    to another logical id (created before the old one is deleted), fails the deploy."""
    name, before, after = change
    old, new = before[role]["Resources"], after[role]["Resources"]
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
        if logical_id not in old or old[logical_id]["Type"] != resource["Type"]:
            continue
        problems += [
            f"{logical_id}.{'.'.join(path)} changes"
            for path in create_only_properties(resource["Type"], region)
            if property_at(old[logical_id].get("Properties", {}), path)
            != property_at(resource.get("Properties", {}), path)
        ]
    assert problems == [], f"{name} would replace custom-named resources of {role}"


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
