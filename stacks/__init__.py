"""The environment's stacks, composed from constructs in ``stacks/components``."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from environment.config import EnvironmentConfig
from stacks.capture_stack import CaptureStack
from stacks.components.log_storage import handler_log_groups
from stacks.database_stack import DatabaseStack
from stacks.fanout_stack import FanOutStack
from stacks.lake_stack import LakeStack
from stacks.network_stack import NetworkStack
from stacks.operations_stack import OperationsStack


def build_stacks(app: cdk.App, config: EnvironmentConfig) -> dict[str, cdk.Stack]:
    """Add one environment's stacks to ``app``, wired together, with cdk-nag attached."""
    env = cdk.Environment(account=config.account, region=config.region)
    for key, value in {"project": "cdc-lake", **config.tags}.items():
        cdk.Tags.of(app).add(key, value)

    def stack_id(name: str) -> str:
        return f"{config.prefix.title().replace('-', '')}{name}"

    # With network.existing there is nothing to create: no network stack, whose empty template
    # CloudFormation would refuse; the database stack imports the VPC for every stack.
    network = (
        NetworkStack(app, stack_id("Network"), config=config, env=env)
        if config.network.existing is None
        else None
    )
    database = DatabaseStack(
        app,
        stack_id("Database"),
        config=config,
        vpc=network.vpc if network is not None else None,
        env=env,
    )
    vpc = database.vpc
    lake = LakeStack(
        app,
        stack_id("Lake"),
        config=config,
        vpc=vpc,
        alarm_topic=database.alarm_topic,
        signal_function=database.bootstrap.function,
        env=env,
    )
    capture = CaptureStack(
        app,
        stack_id("Capture"),
        config=config,
        vpc=vpc,
        database=database,
        lake=lake,
        env=env,
    )
    fanout = FanOutStack(
        app, stack_id("FanOut"), config=config, vpc=vpc, database=database, env=env
    )
    operations = OperationsStack(
        app,
        stack_id("Operations"),
        config=config,
        database=database,
        lake=lake,
        capture=capture,
        fanout=fanout,
        env=env,
    )

    stacks: dict[str, cdk.Stack] = {
        **({"network": network} if network is not None else {}),
        "database": database,
        "lake": lake,
        "capture": capture,
        "fanout": fanout,
        "operations": operations,
    }
    # The functions CDK adds on its own (custom-resource handlers) get log groups that expire.
    for stack in stacks.values():
        handler_log_groups(stack)

    # Security gate: every AwsSolutions finding fails synth unless suppressed with a reason.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return stacks
