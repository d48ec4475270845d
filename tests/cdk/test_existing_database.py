"""An environment attached to an existing VPC and Aurora cluster (issue #50): prod's config
with both ``existing`` sections synthesizes without a database or network resource of its own,
opens the user's security group to its own groups only, and points every part at the given
cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cdk.stack_helpers import as_list, masked, strings, synth_edited
from tests.cdk.test_gates import _cfn_lint, nag_violations

pytestmark = pytest.mark.cdk

VPC_ID = "vpc-0a1b2c3d4e5f60718"
ZONES = ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
SUBNETS = ["subnet-0a1b2c3d4e5f60711", "subnet-0a1b2c3d4e5f60722", "subnet-0a1b2c3d4e5f60733"]
CLUSTER = "shop-aurora"
ENDPOINT = "shop-aurora.cluster-abcdefghijkl.eu-west-1.rds.amazonaws.com"
PORT = 5432
SECURITY_GROUP = "sg-0a1b2c3d4e5f60744"


def attach_existing(raw: dict[str, Any]) -> None:
    """The environment moved into an existing VPC and onto an existing cluster, with the
    settings of a created VPC and cluster taken out (the config refuses them next to these)."""
    raw["network"] = {
        "existing": {"vpc_id": VPC_ID, "availability_zones": ZONES, "private_subnet_ids": SUBNETS}
    }
    database = raw["database"]
    for key in ("engine_version", "instance_class", "instances", "backup_retention_days"):
        database.pop(key, None)
    replication = database.get("replication", {})
    for key in ("max_replication_slots", "max_wal_senders", "max_slot_wal_keep_size_mb"):
        replication.pop(key, None)
    database["existing"] = {
        "cluster_identifier": CLUSTER,
        "endpoint": ENDPOINT,
        "port": PORT,
        "security_group_id": SECURITY_GROUP,
        "master_secret_arn": (
            f"arn:aws:secretsmanager:{raw['region']}:{raw['account']}:secret:shop-master-AbC123"
        ),
    }


MASTER_SECRET = "arn:aws:secretsmanager:eu-west-1:222222222222:secret:shop-master-AbC123"
# What the environment must not create when the VPC and the cluster are the user's.
NOT_CREATED = (
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
    "AWS::EC2::NatGateway",
    "AWS::EC2::InternetGateway",
    "AWS::EC2::EIP",
)


@pytest.fixture(scope="session")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("existing")


@pytest.fixture(scope="session")
def existing(scratch: Path) -> dict[str, dict[str, Any]]:
    """prod's templates, by role, attached to the existing VPC and cluster (one synth)."""
    return synth_edited("prod", attach_existing, scratch)


@pytest.fixture(scope="session", params=["dev", "prod"])
def attached(request: pytest.FixtureRequest, scratch: Path) -> tuple[str, dict[str, Any]]:
    """Each environment's templates attached to the existing VPC and cluster (one synth each;
    prod's is the one the tests above read)."""
    return request.param, synth_edited(request.param, attach_existing, scratch)


def _outdir(scratch: Path, env: str = "prod") -> Path:
    """The cloud assembly of that synth (synth_edited's folder for the edit)."""
    return scratch / f"{env}-{attach_existing.__name__}" / "cdk.out"


def _all_resources(templates: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for template in templates.values() for r in template["Resources"].values()]


def _in(templates: dict[str, dict[str, Any]], resource_type: str) -> list[dict[str, Any]]:
    return [
        r.get("Properties", {}) for r in _all_resources(templates) if r["Type"] == resource_type
    ]


@pytest.mark.parametrize("role", ["database", "lake", "capture", "fanout", "operations"])
def test_existing_template_matches_snapshot(
    existing: dict[str, dict[str, Any]], role: str, snapshot: Any
) -> None:
    assert masked(existing[role]) == snapshot(name=f"prod-existing-{role}")


def test_existing_creates_no_database_or_network_resource(
    attached: tuple[str, dict[str, dict[str, Any]]],
) -> None:
    _, templates = attached
    assert "network" not in templates  # a stack of nothing: CloudFormation refuses it
    created = {r["Type"] for r in _all_resources(templates)}
    assert {t for t in created if t.startswith("AWS::RDS::")} == set()
    assert created & set(NOT_CREATED) == set()


def test_existing_security_group_gets_only_ingress_on_its_port_from_our_groups(
    existing: dict[str, dict[str, Any]],
) -> None:
    ingress = [r for r in _in(existing, "AWS::EC2::SecurityGroupIngress")]
    on_user_group = [r for r in ingress if r.get("GroupId") == SECURITY_GROUP]
    # The bootstrap, its rotation, operator access (database stack), MSK Connect, Debezium Server.
    assert len(on_user_group) == 5
    for rule in on_user_group:
        assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) == ("tcp", PORT, PORT)
        assert "CidrIp" not in rule and "SourceSecurityGroupId" in rule
        assert rule["SourceSecurityGroupId"] != SECURITY_GROUP
    egress = _in(existing, "AWS::EC2::SecurityGroupEgress")
    assert [r for r in egress if r.get("GroupId") == SECURITY_GROUP] == []


def test_existing_bootstrap_reads_the_given_master_secret_only(
    existing: dict[str, dict[str, Any]],
) -> None:
    database = existing["database"]
    (bootstrap,) = [
        r["Properties"]
        for r in database["Resources"].values()
        if r["Type"] == "Custom::ReplicationBootstrap"
    ]
    assert bootstrap["MasterSecretArn"] == MASTER_SECRET
    on_master = [
        action
        for policy in _in(existing, "AWS::IAM::Policy")
        for statement in policy["PolicyDocument"]["Statement"]
        if MASTER_SECRET in strings(statement.get("Resource"))
        for action in as_list(statement["Action"])
    ]
    assert on_master and set(on_master) <= {
        "secretsmanager:GetSecretValue",
        "secretsmanager:DescribeSecret",
    }
    assert _in(existing, "AWS::SecretsManager::RotationSchedule")  # ours, the replication role's
    assert [r["SecretId"] for r in _in(existing, "AWS::SecretsManager::RotationSchedule")] != [
        MASTER_SECRET
    ]


def test_existing_bootstrap_and_snapshot_signal_connect_to_the_given_endpoint(
    existing: dict[str, dict[str, Any]],
) -> None:
    # The master secret may hold no host (one RDS manages holds a username and password).
    custom = _in(existing, "Custom::ReplicationBootstrap") + _in(existing, "Custom::SnapshotSignal")
    assert len(custom) == 2
    for properties in custom:
        assert (properties["Host"], properties["Port"]) == (ENDPOINT, str(PORT))


def test_existing_replication_secret_attached_to_the_given_cluster(
    existing: dict[str, dict[str, Any]],
) -> None:
    (attachment,) = _in(existing, "AWS::SecretsManager::SecretTargetAttachment")
    assert (attachment["TargetId"], attachment["TargetType"]) == (
        CLUSTER,
        "AWS::RDS::DBCluster",
    )


def test_existing_captures_connect_to_the_given_endpoint_and_port(
    existing: dict[str, dict[str, Any]],
) -> None:
    (connector,) = [
        c["ConnectorConfiguration"]
        for c in _in(existing, "AWS::KafkaConnect::Connector")
        if "database.hostname" in c["ConnectorConfiguration"]
    ]
    assert (connector["database.hostname"], connector["database.port"]) == (ENDPOINT, str(PORT))
    (task,) = _in(existing, "AWS::ECS::TaskDefinition")
    environment = {e["Name"]: e["Value"] for e in task["ContainerDefinitions"][0]["Environment"]}
    assert environment["DEBEZIUM_SOURCE_DATABASE_HOSTNAME"] == ENDPOINT
    assert environment["DEBEZIUM_SOURCE_DATABASE_PORT"] == str(PORT)


def test_existing_slot_lag_and_disk_alarms_watch_the_given_cluster(
    existing: dict[str, dict[str, Any]],
) -> None:
    watched = {
        alarm["MetricName"]: {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
        for alarm in _in({"database": existing["database"]}, "AWS::CloudWatch::Alarm")
        if alarm.get("Namespace") == "AWS/RDS"
    }
    assert set(watched) == {"OldestReplicationSlotLag", "TransactionLogsDiskUsage"}
    assert {d["DBClusterIdentifier"] for d in watched.values()} == {CLUSTER}


def test_existing_vpc_places_brokers_and_functions_in_the_given_subnets(
    existing: dict[str, dict[str, Any]],
) -> None:
    (msk,) = _in(existing, "AWS::MSK::Cluster")
    assert msk["BrokerNodeGroupInfo"]["ClientSubnets"] == SUBNETS
    assert msk["NumberOfBrokerNodes"] == len(ZONES)
    placed = [
        set(function["VpcConfig"]["SubnetIds"])
        for function in _in(existing, "AWS::Lambda::Function")
        if "VpcConfig" in function
    ]
    assert placed and all(subnets <= set(SUBNETS) for subnets in placed)
    groups = _in(existing, "AWS::EC2::SecurityGroup")
    assert groups and {g["VpcId"] for g in groups} == {VPC_ID}


def test_existing_gates_cdk_nag_no_unacknowledged_findings(
    attached: tuple[str, dict[str, dict[str, Any]]], scratch: Path
) -> None:
    assert nag_violations(_outdir(scratch, attached[0])) == []


def test_existing_gates_cfn_lint_no_errors(
    attached: tuple[str, dict[str, dict[str, Any]]], scratch: Path
) -> None:
    env, synthesized = attached
    templates = sorted(_outdir(scratch, env).glob("*.template.json"))
    assert len(templates) == len(synthesized)
    errors = [
        f"{m['Rule']['Id']} {m['Filename']}: {m['Message']}"
        for m in _cfn_lint(templates)
        if m["Level"] == "Error"
    ]
    assert errors == []


def existing_vpc_only(raw: dict[str, Any]) -> None:
    """The environment moved into an existing VPC, its cluster still created."""
    attach_existing(raw)
    database = raw["database"]
    del database["existing"]


def test_existing_vpc_with_created_cluster_places_it_in_the_given_subnets(
    scratch: Path,
) -> None:
    templates = synth_edited("prod", existing_vpc_only, scratch)
    created = {r["Type"] for r in _all_resources(templates)}
    assert "AWS::RDS::DBCluster" in created and created & set(NOT_CREATED) == set()
    (subnet_group,) = _in(templates, "AWS::RDS::DBSubnetGroup")
    assert subnet_group["SubnetIds"] == SUBNETS
