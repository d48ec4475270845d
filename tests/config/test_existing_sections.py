"""An environment attached to an existing VPC and cluster (issue #50): what config accepts
and refuses in ``network.existing`` and ``database.existing``."""

from __future__ import annotations

from pathlib import Path

import pytest

from environment.config import ConfigError, load_config
from tests.config.config_helpers import minimal as _minimal
from tests.config.config_helpers import write_config as _write


def _existing(data: dict[str, object], *, database: bool = True) -> dict[str, object]:
    """``data`` placed in an existing VPC, and on an existing cluster when ``database``."""
    data["network"] = {
        "existing": {
            "vpc_id": "vpc-0a1b2c3d4e5f60718",
            "availability_zones": ["eu-west-1a", "eu-west-1b"],
            "private_subnet_ids": ["subnet-0a1b2c3d4e5f60711", "subnet-0a1b2c3d4e5f60722"],
        }
    }
    if database:
        data["database"] = {
            "existing": {
                "cluster_identifier": "shop-aurora",
                "endpoint": "shop-aurora.cluster-abcdefghijkl.eu-west-1.rds.amazonaws.com",
                "port": 5432,
                "security_group_id": "sg-0a1b2c3d4e5f60733",
                "master_secret_arn": (
                    "arn:aws:secretsmanager:eu-west-1:123456789012:secret:shop-master-AbC123"
                ),
            }
        }
    return data


def _load_error(tmp_path: Path, data: dict[str, object]) -> str:
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=path)
    message = str(excinfo.value)
    assert message.startswith(f"invalid environment config {path}:")
    return message


def test_load_config_existing_vpc_and_cluster_load(tmp_path: Path) -> None:
    config = load_config(path=_write(tmp_path, _existing(_minimal())))
    assert config.network.existing is not None and config.database.existing is not None
    assert config.network.az_count == 2
    assert config.cluster_identifier == "shop-aurora"


def test_load_config_existing_vpc_with_created_cluster_loads(tmp_path: Path) -> None:
    config = load_config(path=_write(tmp_path, _existing(_minimal(), database=False)))
    assert config.database.existing is None
    assert config.cluster_identifier == "cdclake-test-aurora"


def test_load_config_existing_cluster_without_existing_vpc_is_rejected(tmp_path: Path) -> None:
    data = _existing(_minimal())
    del data["network"]
    assert "database.existing needs network.existing" in _load_error(tmp_path, data)


@pytest.mark.parametrize(
    ("section", "field", "value", "reason"),
    [
        ("network", "vpc_id", "vpc-xyz", "must be a VPC id, vpc- and 8 or 17 hex digits"),
        ("network", "private_subnet_ids", ["subnet-0a1b2c3d", "subnet-1"], "'subnet-1' must"),
        ("database", "security_group_id", "sg-12", "must be a security group id"),
        ("database", "master_secret_arn", "shop-master", "must be a Secrets Manager secret's"),
    ],
)
def test_load_config_existing_malformed_id_names_field_and_reason(
    tmp_path: Path, section: str, field: str, value: object, reason: str
) -> None:
    data = _existing(_minimal())
    data[section]["existing"][field] = value  # type: ignore[index]
    message = _load_error(tmp_path, data)
    assert f"{section}.existing.{field}: Value error, {reason}" in message
    assert len(message.splitlines()) == 2  # the file, then the one field


def test_load_config_existing_subnets_not_one_per_zone_is_rejected(tmp_path: Path) -> None:
    data = _existing(_minimal())
    data["network"]["existing"]["availability_zones"].append("eu-west-1c")  # type: ignore[index]
    message = _load_error(tmp_path, data)
    assert "network.existing: Value error, private_subnet_ids: 2 subnets for 3" in message


@pytest.mark.parametrize(
    ("arn", "reason"),
    [
        (
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:shop-master-AbC123",
            "region us-east-1 is not the environment's region eu-west-1",
        ),
        (
            "arn:aws:secretsmanager:eu-west-1:999999999999:secret:shop-master-AbC123",
            "account 999999999999 is not the environment's account 123456789012",
        ),
    ],
)
def test_load_config_existing_secret_of_another_region_or_account_is_rejected(
    tmp_path: Path, arn: str, reason: str
) -> None:
    data = _existing(_minimal())
    data["database"]["existing"]["master_secret_arn"] = arn  # type: ignore[index]
    assert f"database.existing.master_secret_arn: {reason}" in _load_error(tmp_path, data)


def test_load_config_existing_zone_of_another_region_is_rejected(tmp_path: Path) -> None:
    data = _existing(_minimal())
    data["network"]["existing"]["availability_zones"] = ["us-east-1a", "eu-west-1b"]  # type: ignore[index]
    message = _load_error(tmp_path, data)
    assert "['us-east-1a'] not in the environment's region eu-west-1" in message


def test_load_config_existing_vpc_with_created_vpc_settings_is_rejected(tmp_path: Path) -> None:
    data = _existing(_minimal(), database=False)
    data["network"]["nat_gateways"] = 2  # type: ignore[index]
    message = _load_error(tmp_path, data)
    assert "network: Value error, nat_gateways: only for a VPC the stack creates" in message


def test_load_config_existing_cluster_with_created_cluster_settings_is_rejected(
    tmp_path: Path,
) -> None:
    data = _existing(_minimal())
    data["database"]["instance_class"] = "r6g.xlarge"  # type: ignore[index]
    data["database"]["replication"] = {"max_wal_senders": 20}  # type: ignore[index]
    message = _load_error(tmp_path, data)
    assert (
        "database: Value error, instance_class, replication.max_wal_senders: only for a "
        "cluster the stack creates"
    ) in message


def test_load_config_existing_cluster_keeps_what_applies_to_any_cluster(tmp_path: Path) -> None:
    data = _existing(_minimal())
    data["database"].update(  # type: ignore[attr-defined]
        {"name": "shop", "tls_verify": False, "deletion_protection": True}
    )
    config = load_config(path=_write(tmp_path, data))
    assert (config.database.name, config.database.tls_verify) == ("shop", False)
