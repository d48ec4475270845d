"""The shape the Python Lambdas with Powertools share: ARM, the pinned public Powertools layer,
the runtime that layer is built for, an asset of one lambdas/ folder, and their nag findings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from environment.paths import REPO_ROOT
from stacks.components.nag import LAMBDA_LOGS_FINDING, acknowledge
from stacks.components.python_bundling import code_with_libraries

LAMBDAS_DIR = REPO_ROOT / "lambdas"
RUNTIME = lambda_.Runtime.PYTHON_3_13
# AWS-managed public layer; bump the version deliberately (it tracks Powertools releases).
POWERTOOLS_LAYER = (
    "arn:aws:lambda:{region}:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:27"
)


def powertools_function(
    scope: Construct,
    *,
    package: str,
    description: str,
    service: str,
    log_group: logs.ILogGroup,
    timeout: cdk.Duration,
    environment: Mapping[str, str],
    memory_size: int | None = None,
    libraries: Sequence[Path] = (),
    function_name: str | None = None,
) -> lambda_.Function:
    """``lambdas/<package>/handler.handler`` as ``scope``'s ``Function``; ``libraries``:
    package folders of this repo shipped beside the handler (importable by their names);
    ``function_name``: a fixed name, for readers in other stacks (else CloudFormation's)."""
    package_dir = LAMBDAS_DIR / package
    function = lambda_.Function(
        scope,
        "Function",
        function_name=function_name,
        description=description,
        runtime=RUNTIME,
        architecture=lambda_.Architecture.ARM_64,
        handler="handler.handler",
        code=(
            code_with_libraries(package_dir, libraries, runtime=RUNTIME)
            if libraries
            else lambda_.Code.from_asset(str(package_dir), exclude=["__pycache__", "*.pyc"])
        ),
        layers=[
            lambda_.LayerVersion.from_layer_version_arn(
                scope, "Powertools", POWERTOOLS_LAYER.format(region=cdk.Stack.of(scope).region)
            )
        ],
        memory_size=memory_size,
        timeout=timeout,
        log_group=log_group,
        environment={**environment, "POWERTOOLS_SERVICE_NAME": service},
    )
    acknowledge(
        function,
        {
            LAMBDA_LOGS_FINDING: "the AWS managed policy only writes its own logs",
            "AwsSolutions-L1": (
                f"{RUNTIME.name} matches the pinned Powertools V3 layer build; "
                "runtime and layer are bumped together"
            ),
        },
    )
    return function
