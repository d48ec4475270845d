"""The two shapes every component repeats for logs: a CloudWatch log group and an S3
access-log bucket. One definition each, so retention, deletion and encryption are decided once."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.components.nag import acknowledge

#: Long enough to investigate last month's incident; logs are not the system of record.
DEFAULT_RETENTION = logs.RetentionDays.ONE_MONTH


def log_group(
    scope: Construct,
    construct_id: str,
    *,
    retention: logs.RetentionDays = DEFAULT_RETENTION,
    log_group_name: str | None = None,
    encryption_key: kms.IKey | None = None,
) -> logs.LogGroup:
    """A log group with bounded retention, deleted with its stack (it holds no data the lake
    needs), so a redeploy after a delete does not collide with an orphaned name."""
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=log_group_name,
        retention=retention,
        encryption_key=encryption_key,
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )


def handler_log_groups(stack: cdk.Stack) -> list[logs.LogGroup]:
    """A log group for each Lambda function CDK writes on its own in ``stack`` (a custom-resource
    provider's handler, e.g. the VPC's default-security-group one: a plain ``CfnResource`` with
    no logging settings), which Lambda would otherwise create on first use and keep forever.
    The stack's custom resources wait for them: a handler run before its group exists would
    create the group, and the group's creation would then fail."""
    handlers = [
        child
        for child in stack.node.find_all()
        if isinstance(child, cdk.CfnResource)
        and not isinstance(child, lambda_.CfnFunction)
        and child.cfn_resource_type == "AWS::Lambda::Function"
    ]
    groups = [
        log_group(
            stack,
            # Named from the handler's path within the stack: one id per handler, every deploy.
            "".join(c for c in handler.node.path.removeprefix(stack.node.path) if c.isalnum())
            + "Logs",
            log_group_name=cdk.Fn.join("", ["/aws/lambda/", handler.ref]),
        )
        for handler in handlers
    ]
    if groups:
        for child in stack.node.find_all():
            if isinstance(child, cdk.CfnResource) and (
                child.cfn_resource_type.startswith("Custom::")
                or child.cfn_resource_type == "AWS::CloudFormation::CustomResource"
            ):
                child.node.add_dependency(*groups)
    return groups


def access_log_bucket(
    scope: Construct, construct_id: str, *, expiration: cdk.Duration
) -> s3.Bucket:
    """A bucket for S3 server access logs. S3 cannot deliver access logs to a KMS-encrypted
    bucket, hence SSE-S3; it is retained because access logs are the audit trail."""
    bucket = s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        lifecycle_rules=[s3.LifecycleRule(id="expire", expiration=expiration)],
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    acknowledge(bucket, {"AwsSolutions-S1": "the access-log bucket; logging it to itself loops"})
    return bucket
