"""The network stack: three subnet tiers, NAT per config, flow logs, endpoints, no SSH."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cdk.stack_helpers import masked, of_type, props, single

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module", params=["dev", "prod"])
def env(request: pytest.FixtureRequest, synth) -> Any:  # type: ignore[no-untyped-def]
    return synth(request.param)


def test_network_template_matches_snapshot(env: Any, snapshot: Any) -> None:
    assert masked(env.template("network")) == snapshot(name=env.env)


def test_network_subnets_three_tiers_per_az(env: Any) -> None:
    template = env.template("network")
    subnets = props(template, "AWS::EC2::Subnet")
    azs = env.config.network.max_azs
    assert len(subnets) == 3 * azs
    assert len({s["AvailabilityZone"] for s in subnets}) == azs
    tiers = [
        next(t["Value"] for t in s["Tags"] if t["Key"] == "aws-cdk:subnet-name") for s in subnets
    ]
    assert sorted(set(tiers)) == ["isolated", "private", "public"]
    # Only the public tier maps public IPs.
    for subnet, tier in zip(subnets, tiers, strict=True):
        assert subnet["MapPublicIpOnLaunch"] is (tier == "public")


def test_network_nat_gateways_count_from_config(env: Any) -> None:
    template = env.template("network")
    assert len(of_type(template, "AWS::EC2::NatGateway")) == env.config.network.nat_gateways


def test_network_nat_gateways_one_in_dev_one_per_az_in_prod(synth) -> None:  # type: ignore[no-untyped-def]
    assert len(of_type(synth("dev").template("network"), "AWS::EC2::NatGateway")) == 1
    prod = synth("prod")
    assert (
        len(of_type(prod.template("network"), "AWS::EC2::NatGateway"))
        == prod.config.network.max_azs
    )


def test_network_flow_logs_capture_all_traffic_to_logs(env: Any) -> None:
    template = env.template("network")
    flow_log = single(template, "AWS::EC2::FlowLog")
    assert flow_log["TrafficType"] == "ALL"
    assert flow_log["LogDestinationType"] == "cloud-watch-logs"
    assert flow_log["ResourceType"] == "VPC"


def test_network_endpoints_cover_glue_lambda_and_msk_connect_needs(env: Any) -> None:
    template = env.template("network")
    endpoints = props(template, "AWS::EC2::VPCEndpoint")
    services = {
        "".join(str(p) for p in e["ServiceName"]["Fn::Join"][1]).split(".")[-1]
        if isinstance(e["ServiceName"], dict)
        else e["ServiceName"].split(".")[-1]
        for e in endpoints
    }
    assert {"s3", "secretsmanager", "glue", "sts", "logs", "kms"} <= services
    assert {"ssm", "ssmmessages", "ec2messages"} <= services
    interface = [e for e in endpoints if e.get("VpcEndpointType") == "Interface"]
    assert interface and all(e["PrivateDnsEnabled"] is True for e in interface)
    gateway = [e for e in endpoints if e.get("VpcEndpointType") == "Gateway"]
    assert len(gateway) == 1


def test_network_endpoint_security_group_allows_only_https_from_vpc(env: Any) -> None:
    template = env.template("network")
    groups = [
        g for g in props(template, "AWS::EC2::SecurityGroup") if "endpoint" in g["GroupDescription"]
    ]
    assert len(groups) == 1
    assert groups[0]["SecurityGroupIngress"] == [
        {
            "CidrIp": env.config.network.cidr,
            "Description": "HTTPS from the VPC",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]


@pytest.mark.parametrize("role", ["network", "database", "lake"])
def test_network_no_ssh_and_no_key_pairs(env: Any, role: str) -> None:
    template = env.template(role)
    assert not of_type(template, "AWS::EC2::KeyPair")
    for instance in props(template, "AWS::EC2::Instance"):
        assert "KeyName" not in instance
    rules = [
        *props(template, "AWS::EC2::SecurityGroupIngress"),
        *(
            rule
            for group in props(template, "AWS::EC2::SecurityGroup")
            for rule in group.get("SecurityGroupIngress", [])
        ),
    ]
    for rule in rules:
        low, high = rule.get("FromPort", 0), rule.get("ToPort", 65535)
        if isinstance(low, int) and isinstance(high, int):  # else the cluster's own port
            assert not low <= 22 <= high, rule
        assert rule.get("CidrIp") != "0.0.0.0/0", rule
