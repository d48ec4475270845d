"""Helpers of the stack tests: resources by type, IAM statements, templates normalized for
snapshots (asset hashes masked), and a second synth for config variants."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from connectors import versions

ASSET_HASH = re.compile(r"[0-9a-f]{64}")
# Plugin locations for the tests' synths, as `cdk synth -c debezium_plugin=...` gives them: CI
# has no `make plugins` zips, and a real environment's synth refuses to run without them.
PLUGIN_CONTEXT = {
    "debezium_plugin": f"s3://cdclake-test-plugins/plugins/{versions.DEBEZIUM_PLUGIN_ZIP}",
    "s3_sink_plugin": f"s3://cdclake-test-plugins/plugins/{versions.S3_SINK_PLUGIN_ZIP}",
}


def resources(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """Logical id -> Properties of every resource of a type (ids are never asserted on)."""
    return {
        logical_id: resource.get("Properties", {})
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }


#: The alarms stacks.components.lake_alarms.LakeAlarms makes for each lake table, by the name
#: of their construct (Lag and ChangeFilesExpiring both watch LagSeconds, so only the construct
#: tells them apart).
LAKE_ALARM_KINDS = ("Lag", "ChangeFilesExpiring", "Quarantined")


def lake_alarms(template: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """A template's lake alarms by kind (:data:`LAKE_ALARM_KINDS`), each kind's by the table its
    Table dimension names: the alarms' properties. A kind's construct is ``<kind><table>``
    under the LakeAlarms construct, whatever that one's id (``LakeAlarms`` in the operations
    stack)."""
    found: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in LAKE_ALARM_KINDS}
    for logical_id, alarm in resources(template, "AWS::CloudWatch::Alarm").items():
        for kind in LAKE_ALARM_KINDS:
            if f"Alarms{kind}" in logical_id:
                dims = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
                found[kind][dims["Table"]] = alarm
    return found


def only(template: dict[str, Any], resource_type: str) -> dict[str, Any]:
    found = list(resources(template, resource_type).values())
    assert len(found) == 1, f"expected one {resource_type}, found {len(found)}"
    return found[0]


def stable(value: Any, key: str = "") -> Any:
    """IAM resource lists are ordered by their (hashed) text: sort them once hashes are masked."""
    if isinstance(value, dict):
        return {k: stable(v, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [stable(v) for v in value]
        return sorted(items, key=json.dumps) if key == "Resource" else items
    return value


def strings(value: Any) -> list[str]:
    """Every string in a (resolved) template value."""
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return [value] if isinstance(value, str) else []


def cdk_context() -> dict[str, Any]:
    """The app's context from cdk.json (feature flags, pinned AZs), as ``cdk synth`` uses it,
    and the tests' plugin locations."""
    root = Path(__file__).resolve().parents[2]
    return {**json.loads((root / "cdk.json").read_text())["context"], **PLUGIN_CONTEXT}


_VARIANTS: dict[str, dict[str, dict[str, Any]]] = {}


def synth_config_variant(env: str, section: str, **updates: Any) -> dict[str, dict[str, Any]]:
    """Every stack's template, by role, of ``env`` with ``updates`` to one config section (a
    second synth, so only for what the shared synth of the checked-in configs cannot show);
    each variant is synthesized once per session, whichever test modules ask for it."""
    key = json.dumps([env, section, updates], sort_keys=True)
    if key not in _VARIANTS:
        import aws_cdk as cdk

        from environment.config import load_config
        from stacks import build_stacks

        config = load_config(env)
        changed = getattr(config, section).model_copy(update=updates)
        config = config.model_copy(update={section: changed})
        # A plugin location given here wins over the tests' context, which would override it.
        context = {k: v for k, v in cdk_context().items() if k not in updates}
        app = cdk.App(context={**context, "env": env})
        stacks = build_stacks(app, config)
        assembly = app.synth()
        _VARIANTS[key] = {
            role: dict(assembly.get_stack_by_name(stack.stack_name).template)
            for role, stack in stacks.items()
        }
    return _VARIANTS[key]


def synth_variant(env: str, role: str, **connect: Any) -> dict[str, Any]:
    """One stack's template for ``env`` with ``connect`` settings overridden."""
    return synth_config_variant(env, "connect", **connect)[role]


def file_asset_locations(outdir: Path, artifact_id: str, content: bytes) -> list[str]:
    """``bucket/key`` of each file asset of a stack (its assets manifest in the cloud assembly
    ``outdir``) whose staged file holds exactly ``content``."""
    manifest = json.loads((outdir / f"{artifact_id}.assets.json").read_text())
    return [
        f"{destination['bucketName']}/{destination['objectKey']}"
        for asset in manifest.get("files", {}).values()
        if asset["source"].get("packaging") == "file"
        and (outdir / asset["source"]["path"]).is_file()
        and (outdir / asset["source"]["path"]).read_bytes() == content
        for destination in asset["destinations"].values()
    ]


def flat(value: Any) -> str:
    """A template value as text: ``Fn::Join`` joined, ``Ref`` shown as ``<name>``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        return str(delimiter).join(flat(part) for part in parts)
    if isinstance(value, dict) and isinstance(value.get("Ref"), str):
        return f"<{value['Ref']}>"
    return json.dumps(value, sort_keys=True)


def of_type(template: dict[str, Any], resource_type: str) -> list[dict[str, Any]]:
    """Resources of a type, whole (Type, Properties, DeletionPolicy...); ids never used."""
    return [r for r in template["Resources"].values() if r["Type"] == resource_type]


def props(template: dict[str, Any], resource_type: str) -> list[dict[str, Any]]:
    return [r.get("Properties", {}) for r in of_type(template, resource_type)]


def single(template: dict[str, Any], resource_type: str) -> dict[str, Any]:
    found = props(template, resource_type)
    assert len(found) == 1, f"expected one {resource_type}, found {len(found)}"
    return found[0]


def masked(template: dict[str, Any]) -> dict[str, Any]:
    """The template with asset hashes masked, for syrupy snapshots; logical IDs and the other
    stacks' export names stay as they are (a changed one replaces a resource or a reference)."""
    return dict(stable(json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(template)))))


def policy_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every statement of every IAM policy (inline Role policies and AWS::IAM::Policy)."""
    statements: list[dict[str, Any]] = []
    for policy in props(template, "AWS::IAM::Policy"):
        statements += policy["PolicyDocument"]["Statement"]
    for role in props(template, "AWS::IAM::Role"):
        for policy in role.get("Policies", []):
            statements += policy["PolicyDocument"]["Statement"]
    return statements


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def synth_config_dir(env: str, config_dir: Path, outdir: Path) -> dict[str, dict[str, Any]]:
    """Every stack's template, by role, of ``env`` read from ``config_dir``: what
    ``cdk synth -c env=<env> -c config_dir=<dir>`` builds (app.py), one synth."""
    import aws_cdk as cdk

    from environment.config import load_config
    from stacks import build_stacks

    app = cdk.App(
        context={**cdk_context(), "env": env, "config_dir": str(config_dir)}, outdir=str(outdir)
    )
    stacks = build_stacks(app, load_config(env, config_dir=config_dir))
    assembly = app.synth()
    return {
        role: dict(assembly.get_stack_by_name(stack.stack_name).template)
        for role, stack in stacks.items()
    }


#: An edit a user makes to an environment's config file, on its YAML as a dict.
ConfigEdit = Callable[[dict[str, Any]], None]
_EDITED: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}


def fanout_turned_off(raw: dict[str, Any]) -> None:
    """Every table out of the fan-out and its consumers removed, as the config's validation
    asks (a consumer names fan-out tables only)."""
    for table in raw["tables"]:
        table["fanout"] = False
    raw["fanout"]["consumers"] = []


def synth_edited(env: str, edit: ConfigEdit, scratch: Path) -> dict[str, dict[str, Any]]:
    """Every stack's template, by role, of ``env``'s checked-in config with ``edit`` applied
    (written to a folder under ``scratch``, as ``-c config_dir`` reads it); each edit is
    synthesized once per session, whichever test modules ask for it."""
    key = (env, f"{edit.__module__}.{edit.__qualname__}")
    if key not in _EDITED:
        root = Path(__file__).resolve().parents[2]
        raw = yaml.safe_load((root / "config" / f"{env}.yaml").read_text())
        edit(raw)
        folder = scratch / f"{env}-{edit.__name__}"
        (folder / "config").mkdir(parents=True)
        (folder / "config" / f"{env}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        _EDITED[key] = synth_config_dir(env, folder / "config", folder / "cdk.out")
    return _EDITED[key]


def imported_names(value: Any) -> set[str]:
    """Names of every ``Fn::ImportValue`` in a template (CDK writes cross-stack references so)."""
    if isinstance(value, dict):
        found = {json.dumps(value["Fn::ImportValue"])} if "Fn::ImportValue" in value else set()
        return found.union(*(imported_names(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(imported_names(item) for item in value))
    return set()


def exported_values(templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Export name (as ``imported_names`` spells it) -> the exported value, of all stacks."""
    return {
        json.dumps(output["Export"]["Name"]): output["Value"]
        for template in templates.values()
        for output in template.get("Outputs", {}).values()
        if "Export" in output
    }


def references(value: Any) -> set[str]:
    """Logical ids a template value reads (``Ref`` and ``Fn::GetAtt``)."""
    if isinstance(value, dict):
        found = set()
        if isinstance(value.get("Ref"), str):
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            found.add(value["Fn::GetAtt"][0])
        return found.union(*(references(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(references(item) for item in value))
    return set()


#: Resources that hold data: replacing one is a new, empty resource. Log groups count only
#: when retained.
STATEFUL_TYPES = frozenset(
    {
        "AWS::S3::Bucket",
        "AWS::MSK::Cluster",
        "AWS::RDS::DBCluster",
        "AWS::RDS::DBInstance",
        "AWS::Kinesis::Stream",
        "AWS::KMS::Key",
        "AWS::SecretsManager::Secret",
        "AWS::SQS::Queue",
        "AWS::DynamoDB::Table",
        "AWS::EFS::FileSystem",
        "AWS::Logs::LogGroup",
    }
)


def stateful(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id -> resource, of the resources of ``STATEFUL_TYPES``."""
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in STATEFUL_TYPES
        and (
            resource["Type"] != "AWS::Logs::LogGroup" or resource.get("DeletionPolicy") == "Retain"
        )
    }


def create_only_properties(resource_type: str, region: str) -> list[tuple[str, ...]]:
    """The properties whose change makes CloudFormation replace a resource, as paths under
    ``Properties``: the ``createOnlyProperties`` of the type's CloudFormation resource schema
    as cfn-lint ships it (not a list kept by hand)."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, resource_type).schema
    return [
        tuple(path.split("/")[2:])
        for path in schema.get("createOnlyProperties", [])
        if path.startswith("/properties/")
    ]


def property_at(properties: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` (``*`` for every item of a list, compared whole), else None."""
    value: Any = properties
    for part in path:
        if part == "*" or not isinstance(value, dict):
            return value
        value = value.get(part)
    return value


def custom_name(resource: dict[str, Any], region: str) -> str | None:
    """The create-only property that names a resource (``Name``, or ``<Kind>Name`` /
    ``<Kind>Identifier`` after the type's last part: ``QueueName``, ``DBClusterIdentifier``)
    when the template sets it, else None: CloudFormation names the resource itself."""
    kind = resource["Type"].rsplit("::", 1)[-1]
    candidates = {"Name", f"{kind}Name", f"{kind}Identifier"}
    for path in create_only_properties(resource["Type"], region):
        named = resource.get("Properties", {}).get(path[0]) is not None
        if len(path) == 1 and path[0] in candidates and named:
            return path[0]
    return None


def assert_rule_dead_letters(template: dict[str, Any], queue_id: str) -> None:
    """The queue is encrypted, refuses plain HTTP and accepts messages from one rule only."""
    queue = template["Resources"][queue_id]
    assert queue["Type"] == "AWS::SQS::Queue"
    assert queue["Properties"].get("SqsManagedSseEnabled", True) is not False
    (policy,) = [
        p
        for p in resources(template, "AWS::SQS::QueuePolicy").values()
        if p["Queues"] == [{"Ref": queue_id}]
    ]
    statements = policy["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
    (send,) = [s for s in statements if s["Effect"] == "Allow"]
    assert send["Principal"] == {"Service": "events.amazonaws.com"}
    assert "aws:SourceArn" in json.dumps(send["Condition"])


def rds_ca_object(synthesized: Any, role: str) -> str:
    """``bucket/key`` of the stack's asset that holds the session's RDS CA bundle."""
    bundle = Path(os.environ["CDCLAKE_RDS_CA_BUNDLE"]).read_bytes()
    stack = synthesized.stacks[role]
    (location,) = file_asset_locations(synthesized.outdir, stack.artifact_id, bundle)
    return str(location)


def assert_reads_exactly(statements: list[dict[str, Any]], location: str) -> None:
    """Of the statements on ``location``'s bucket, one: s3:GetObject on that object alone."""
    bucket = location.split("/", 1)[0]
    on_bucket = [s for s in statements if any(bucket in flat(r) for r in as_list(s["Resource"]))]
    assert len(on_bucket) == 1
    assert as_list(on_bucket[0]["Action"]) == ["s3:GetObject"]
    assert [flat(r) for r in as_list(on_bucket[0]["Resource"])] == [
        f"arn:<AWS::Partition>:s3:::{location}"
    ]


def every_resource(synthesized: Any) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(stack name, logical id, resource, its template) of every resource of a synth's stacks."""
    found = []
    for role, stack in synthesized.stacks.items():
        template = synthesized.template(role)
        for logical_id, resource in template["Resources"].items():
            found.append((stack.stack_name, logical_id, resource, template))
    return found


def get_att_id(value: Any) -> str | None:
    """The logical id a ``{"Fn::GetAtt": [id, ...]}`` or ``{"Ref": id}`` names, else None."""
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
        if isinstance(value.get("Ref"), str):
            return str(value["Ref"])
    return None
