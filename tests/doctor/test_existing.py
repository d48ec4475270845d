"""`cdclake doctor` for an environment attached to an existing VPC and cluster (issue #50),
against the moto server: each check passes on what the captures need and fails saying what to
change."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdclake.doctor import (
    check_existing_cluster,
    check_existing_cluster_parameters,
    check_existing_network,
    run_checks,
)
from environment.replication import replication_slots_needed
from tests.doctor.doctor_helpers import GOOD_PARAMETERS, ZONES, existing_environment

pytestmark = pytest.mark.moto


def test_existing_cluster_supported_engine_at_the_given_endpoint_ok(
    aws_env: None, config_dir: Path
) -> None:
    made = existing_environment(config_dir)
    check = check_existing_cluster(made.config, made.session)
    assert check.status == "ok", check.detail
    assert "aurora-postgresql 16.4" in check.detail


def test_existing_cluster_unsupported_version_fails_saying_upgrade(
    aws_env: None, config_dir: Path
) -> None:
    made = existing_environment(config_dir, engine_version="13.9")
    check = check_existing_cluster(made.config, made.session)
    assert check.status == "FAIL"
    assert "aurora-postgresql 13.9 is not a version" in check.detail
    assert "upgrade the cluster's major version" in check.detail


def test_existing_cluster_not_postgresql_fails(aws_env: None, config_dir: Path) -> None:
    made = existing_environment(config_dir, engine="aurora-mysql", engine_version="8.0.mysql")
    check = check_existing_cluster(made.config, made.session)
    assert check.status == "FAIL"
    assert "engine aurora-mysql is not PostgreSQL" in check.detail


def test_existing_cluster_unknown_identifier_fails_naming_the_field(
    aws_env: None, config_dir: Path
) -> None:
    made = existing_environment(config_dir)
    database = made.config.database
    assert database.existing is not None
    gone = database.model_copy(
        update={"existing": database.existing.model_copy(update={"cluster_identifier": "gone"})}
    )
    config = made.config.model_copy(update={"database": gone})
    check = check_existing_cluster(config, made.session)
    assert check.status == "FAIL"
    assert "DBClusterNotFoundFault" in check.detail
    assert "database.existing.cluster_identifier" in check.detail


def test_existing_cluster_other_security_group_fails_naming_the_clusters(
    aws_env: None, config_dir: Path
) -> None:
    made = existing_environment(config_dir)
    database = made.config.database
    assert database.existing is not None
    other = database.existing.model_copy(update={"security_group_id": "sg-0123456789abcdef0"})
    config = made.config.model_copy(
        update={"database": database.model_copy(update={"existing": other})}
    )
    check = check_existing_cluster(config, made.session)
    assert check.status == "FAIL"
    assert "sg-0123456789abcdef0 is not one of its security groups" in check.detail


def test_existing_cluster_parameters_set_for_the_captures_ok(
    aws_env: None, config_dir: Path
) -> None:
    made = existing_environment(config_dir)
    check = check_existing_cluster_parameters(made.config, made.session)
    assert check.status == "ok", check.detail


def test_existing_cluster_parameters_logical_replication_off_fails_saying_reboot(
    aws_env: None, config_dir: Path
) -> None:
    made = existing_environment(
        config_dir, parameters={**GOOD_PARAMETERS, "rds.logical_replication": "0"}
    )
    check = check_existing_cluster_parameters(made.config, made.session)
    assert check.status == "FAIL"
    assert f"in cluster parameter group {made.parameter_group}, " in check.detail
    assert "set rds.logical_replication = 1" in check.detail
    assert "reboot the writer" in check.detail


@pytest.mark.parametrize("parameter", ["max_replication_slots", "max_wal_senders"])
def test_existing_cluster_parameters_too_few_for_the_captures_fails_naming_the_least(
    aws_env: None, config_dir: Path, parameter: str
) -> None:
    made = existing_environment(config_dir)
    needed = replication_slots_needed(made.config)
    made = existing_environment(config_dir, parameters={**GOOD_PARAMETERS, parameter: "3"})
    check = check_existing_cluster_parameters(made.config, made.session)
    assert check.status == "FAIL"
    assert needed == 4  # dev: the lake's capture and the fan-out's, and the margin
    assert f"set {parameter} to at least {needed} (is 3)" in check.detail


def test_existing_cluster_parameters_wal_keep_size_unset_fails(
    aws_env: None, config_dir: Path
) -> None:
    parameters = {k: v for k, v in GOOD_PARAMETERS.items() if k != "max_slot_wal_keep_size"}
    made = existing_environment(config_dir, parameters=parameters)
    check = check_existing_cluster_parameters(made.config, made.session)
    assert check.status == "FAIL"
    assert "set max_slot_wal_keep_size" in check.detail


def test_existing_network_subnets_and_group_in_the_vpc_ok(aws_env: None, config_dir: Path) -> None:
    made = existing_environment(config_dir)
    check = check_existing_network(made.config, made.session)
    assert check.status == "ok", check.detail


def test_existing_network_subnet_of_another_vpc_fails(aws_env: None, config_dir: Path) -> None:
    made = existing_environment(config_dir, subnet_vpc="other")
    check = check_existing_network(made.config, made.session)
    assert check.status == "FAIL"
    network = made.config.network.existing
    assert network is not None
    assert f"not {network.vpc_id}" in check.detail and "fix network.existing" in check.detail


def test_existing_network_subnets_listed_in_other_zones_fail(
    aws_env: None, config_dir: Path
) -> None:
    made = existing_environment(config_dir, subnet_zones=list(reversed(ZONES)))
    check = check_existing_network(made.config, made.session)
    assert check.status == "FAIL"
    assert f"listed for {ZONES[0]}" in check.detail


def test_existing_run_checks_checks_what_exists_not_what_is_created(
    aws_env: None, config_dir: Path
) -> None:
    made = existing_environment(config_dir)
    names = [c.name for c in run_checks(made.config, made.session)]
    assert {"existing cluster", "existing cluster parameters", "existing network"} <= set(names)
    assert not {"Aurora engine version", "cluster parameters", "quota: VPCs"} & set(names)


@pytest.mark.skip(
    reason="moto 5.2.5 (the newest release in the package lists) answers DescribeDBClusters with "
    "DBClusterParameterGroupStatus 'in-sync' for every member, hard-coded in "
    "moto/rds/models.py; a parameter change left pending-reboot cannot be made there"
)
def test_existing_cluster_parameters_set_but_pending_reboot_fails_naming_the_writer() -> None:
    """A group set right but not applied (its writer not rebooted since) must FAIL saying to
    reboot the writer; cdclake.doctor.check_existing_cluster_parameters does, untested here."""
