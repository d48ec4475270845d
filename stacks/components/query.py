"""The Athena workgroup users query the Hudi tables with."""

from __future__ import annotations

from aws_cdk import aws_athena as athena
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct


class Query(Construct):
    """An Athena engine v3 workgroup with enforced, KMS-encrypted results.

    Enforcing the workgroup configuration means a client cannot send results elsewhere or
    unencrypted. The per-query scan cutoff keeps a runaway query from scanning the whole lake.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        results_bucket: s3.IBucket,
        encryption_key: kms.IKey,
        bytes_scanned_cutoff: int = 100 * 1024**3,
    ) -> None:
        super().__init__(scope, construct_id)

        # Workgroup: results under athena-results/, SSE-KMS, settings enforced, metrics on.
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=name,
            description="cdc-lake: query the Hudi tables in the Glue catalog",
            recursive_delete_option=True,
            state="ENABLED",
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=bytes_scanned_cutoff,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                    selected_engine_version="Athena engine version 3"
                ),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=results_bucket.s3_url_for_object("athena-results/"),
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_KMS", kms_key=encryption_key.key_arn
                    ),
                ),
            ),
        )
        #: Name of the Athena workgroup.
        self.workgroup_name = name
