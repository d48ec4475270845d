"""The documented changes deploy as updates: each is synthesized from a changed copy of
config/dev.yaml and compared with the checked-in dev synth, the templates deployed before.

CloudFormation refuses an update that removes or changes an export another stack still imports
("Export ... cannot be updated as it is in use"; CDK deploys the exporting stack first, while
the importing stack still holds the old template), and replaces a resource whose logical id
goes or whose replacement-only property changes: for what holds data, a new, empty resource.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cdk.stack_helpers import (
    STATEFUL_REPLACED_BY,
    exported_values,
    imported_names,
    references,
    stateful,
    synth_config_dir,
)

pytestmark = pytest.mark.cdk

ROOT = Path(__file__).resolve().parents[2]
Templates = dict[str, dict[str, Any]]


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


#: change -> (edit of the dev config, logical-id prefixes of the stateful resources the change
#: removes on purpose: a removed consumer's queues go with it).
CHANGES: dict[str, tuple[Callable[[dict[str, Any]], None], tuple[str, ...]]] = {
    "connectors_removed": (_connectors_removed, ()),
    "consumer_removed": (_consumer_removed, ("ConsumersOrderNotifications",)),
    "lake_table_removed": (_lake_table_removed, ()),
    "table_added": (_table_added, ()),
}


@pytest.fixture(scope="module")
def before(synth) -> Templates:  # type: ignore[no-untyped-def]
    built = synth("dev")
    return {role: dict(built.template(role)) for role in built.stacks}


@pytest.fixture(scope="module", params=sorted(CHANGES))
def change(request, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Templates]:  # type: ignore[no-untyped-def]
    """One documented change, synthesized once: (name, templates by role)."""
    name: str = request.param
    edit, _ = CHANGES[name]
    raw = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text())
    edit(raw)
    config_dir = tmp_path_factory.mktemp(f"config-{name}")
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return name, synth_config_dir("dev", config_dir, tmp_path_factory.mktemp(f"cdk-{name}"))


def test_updates_change_keeps_every_imported_export(
    before: Templates, change: tuple[str, Templates]
) -> None:
    name, after = change
    old, new = exported_values(before), exported_values(after)
    imported = set().union(*(imported_names(t) for t in before.values()))
    assert imported  # the stacks do share values: the check is not vacuous
    gone = sorted(n for n in imported if n not in new)
    changed = sorted(n for n in imported if n in new and new[n] != old[n])
    assert (gone, changed) == ([], []), f"{name}: exports in use removed or changed"


@pytest.mark.parametrize("role", ["network", "database", "lake", "capture", "fanout", "operations"])
def test_updates_change_replaces_no_stateful_resource(
    before: Templates, change: tuple[str, Templates], role: str
) -> None:
    name, after = change
    _, removed_on_purpose = CHANGES[name]
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
            f"{logical_id}.{prop} changes: {old_props.get(prop)!r} -> {new_props.get(prop)!r}"
            for prop in STATEFUL_REPLACED_BY[resource["Type"]]
            if old_props.get(prop) != new_props.get(prop)
        ]
    assert problems == [], f"{name} would replace stateful resources of {role}"


def test_updates_no_stack_imports_msk_connect_attributes(before: Templates) -> None:
    # Every plugin or worker upgrade replaces the connectors (new ARNs), and the upgrade's
    # first deploy removes them: nothing may import what they export.
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
    before: Templates, change: tuple[str, Templates]
) -> None:
    # Guards the fixture: each changed config did change the templates.
    name, after = change
    assert json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True), name
