"""An existing VPC and cluster on the moto server, and dev's config attached to them
(``network.existing``, ``database.existing``), for the doctor's checks of what exists."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import boto3

from environment.config import (
    EnvironmentConfig,
    ExistingDatabase,
    ExistingNetwork,
    load_config,
)

# A region no other doctor test counts VPCs in: each test here adds its own.
REGION = "eu-north-1"
ZONES = [f"{REGION}a", f"{REGION}b"]
PORT = 5432
# What the captures need, set: the check passes on these.
GOOD_PARAMETERS = {
    "rds.logical_replication": "1",
    "max_replication_slots": "10",
    "max_wal_senders": "10",
    "max_slot_wal_keep_size": "20480",
}
_names = itertools.count()


@dataclass(frozen=True)
class Existing:
    """What a test made on moto, and dev's config pointing at it."""

    config: EnvironmentConfig
    parameter_group: str

    @property
    def session(self) -> boto3.Session:
        return boto3.Session(region_name=REGION)


def existing_environment(
    config_dir: Path,
    *,
    parameters: dict[str, str] | None = None,
    engine: str = "aurora-postgresql",
    engine_version: str = "16.4",
    subnet_zones: list[str] | None = None,
    subnet_vpc: str = "own",
) -> Existing:
    """A VPC with one subnet per zone (in ``subnet_zones``, default the listed zones; in
    another VPC with ``subnet_vpc="other"``), a security group, a cluster parameter group set
    to ``parameters`` (default :data:`GOOD_PARAMETERS`) and a cluster using both; dev's
    config attached to them (not re-validated: a test may give what validation refuses)."""
    session = boto3.Session(region_name=REGION)
    ec2, rds = session.client("ec2"), session.client("rds")
    index = next(_names)
    vpc = ec2.create_vpc(CidrBlock=f"10.{index}.0.0/16")["Vpc"]["VpcId"]
    other = ec2.create_vpc(CidrBlock=f"10.{index + 100}.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(
            VpcId=vpc if subnet_vpc == "own" else other,
            CidrBlock=f"10.{index if subnet_vpc == 'own' else index + 100}.{n}.0/24",
            AvailabilityZone=zone,
        )["Subnet"]["SubnetId"]
        for n, zone in enumerate(subnet_zones or ZONES)
    ]
    group = ec2.create_security_group(
        GroupName=f"db-{index}", Description="the database", VpcId=vpc
    )["GroupId"]
    parameter_group = f"shop-{index}"
    rds.create_db_cluster_parameter_group(
        DBClusterParameterGroupName=parameter_group,
        DBParameterGroupFamily=f"{engine}{engine_version.split('.')[0]}",
        Description="the shop's cluster",
    )
    values = GOOD_PARAMETERS if parameters is None else parameters
    if values:
        rds.modify_db_cluster_parameter_group(
            DBClusterParameterGroupName=parameter_group,
            Parameters=[
                {"ParameterName": k, "ParameterValue": v, "ApplyMethod": "pending-reboot"}
                for k, v in values.items()
            ],
        )
    cluster = rds.create_db_cluster(
        DBClusterIdentifier=f"shop-{index}",
        Engine=engine,
        EngineVersion=engine_version,
        MasterUsername="shop_admin",
        MasterUserPassword="not-a-real-password",
        DBClusterParameterGroupName=parameter_group,
        VpcSecurityGroupIds=[group],
        Port=PORT,
    )["DBCluster"]
    config = load_config("dev", config_dir=config_dir)
    network = ExistingNetwork.model_construct(
        vpc_id=vpc, availability_zones=ZONES, private_subnet_ids=subnets
    )
    database = ExistingDatabase.model_construct(
        cluster_identifier=cluster["DBClusterIdentifier"],
        endpoint=cluster["Endpoint"],
        port=PORT,
        security_group_id=group,
        master_secret_arn=(
            f"arn:aws:secretsmanager:{REGION}:{config.account}:secret:shop-master-AbC123"
        ),
    )
    config = config.model_copy(
        update={
            "region": REGION,
            "network": config.network.model_copy(update={"existing": network}),
            "database": config.database.model_copy(update={"existing": database}),
        }
    )
    return Existing(config=config, parameter_group=parameter_group)
