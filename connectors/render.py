"""Write the generated connector configurations under ``connectors/generated/<env>/``.

``python -m connectors.render`` (all environments) or ``python -m connectors.render dev``.
The files are for people to read and review in diffs; the stacks generate the same settings
with deploy-time values, and a test keeps the committed files equal to the functions' output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from connectors.configs import (
    DatabaseEndpoint,
    debezium_server_properties,
    debezium_source_config,
    render_properties,
    replication_factor,
    s3_import_reference,
    s3_sink_config,
    worker_properties,
)
from environment.config import EnvironmentConfig, load_config
from environment.paths import CONFIG_DIR

GENERATED_DIR = Path(__file__).resolve().parent / "generated"
# Deploy-time values appear as placeholders; the stacks fill them in.
DEBEZIUM_SERVER_OFFSETS_FILE = "/debezium/data/offsets.dat"


def placeholder_database(config: EnvironmentConfig) -> DatabaseEndpoint:
    return DatabaseEndpoint(
        hostname="<aurora-cluster-endpoint>",
        port=5432,
        dbname=config.database.name,
        secret_arn=(
            f"arn:aws:secretsmanager:{config.region}:{config.account}:secret:<replication-secret>"
        ),
    )


def render(config: EnvironmentConfig) -> dict[str, str]:
    """File name -> text of every generated file for one environment."""
    database = placeholder_database(config)
    source = debezium_source_config(
        config,
        database=database,
        replication_factor=replication_factor(config),
        # The capture stack uploads the RDS CA bundle as an asset; the workers fetch it.
        rds_ca=s3_import_reference(config.region, "<cdk-assets-bucket>", "<rds-ca-asset-key>"),
    )
    worker = worker_properties(config, s3_import=config.database.tls_verify)
    sink = s3_sink_config(
        config, bucket_name="<change-file-bucket>", kms_key_arn="<lake-kms-key-arn>"
    )
    server = debezium_server_properties(
        config, database=database, offsets_file=DEBEZIUM_SERVER_OFFSETS_FILE
    )
    return {
        "debezium-source.json": json.dumps(source, indent=2, sort_keys=True) + "\n",
        "s3-sink.json": json.dumps(sink, indent=2, sort_keys=True) + "\n",
        "worker.properties": render_properties(worker),
        "debezium-server.properties": render_properties(server),
    }


def write(env: str, out_dir: Path = GENERATED_DIR) -> list[Path]:
    target = out_dir / env
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render(load_config(env)).items():
        path = target / name
        path.write_text(text)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    envs = (argv if argv is not None else sys.argv[1:]) or sorted(
        p.stem for p in CONFIG_DIR.glob("*.yaml")
    )
    for env in envs:
        for path in write(env):
            print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
