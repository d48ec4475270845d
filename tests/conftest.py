"""Session-wide fixtures: one synth per environment, one SparkSession, the shared samples."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


def _test_rds_ca() -> str:
    """A self-made CA certificate standing in for the RDS bundle (`make rds-ca`), which CI
    does not download: every synth of the session, subprocesses included, ships it."""
    import datetime
    import tempfile

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cdc-lake test RDS CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = Path(tempfile.mkdtemp(prefix="cdclake-test-rds-ca-")) / "global-bundle.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path)


os.environ.setdefault("CDCLAKE_RDS_CA_BUNDLE", _test_rds_ca())


def cdk_context() -> dict[str, object]:
    from tests.cdk.stack_helpers import PLUGIN_CONTEXT  # CI has no `make plugins` zips

    return {**json.loads((ROOT / "cdk.json").read_text())["context"], **PLUGIN_CONTEXT}


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    """Real Debezium events from ../shared/debezium-samples (skips where that folder is absent)."""
    path = SHARED / "debezium-samples"
    if not path.is_dir():
        pytest.skip(
            f"shared Debezium samples not found at {path} (CI places shared/ beside the repo)"
        )
    return path


class Synth:
    """One environment synthesized once: templates by stack role, and the assembly folder."""

    def __init__(self, env: str, outdir: Path) -> None:
        import aws_cdk as cdk

        from cdclake.config import load_config
        from stacks import build_stacks

        self.env = env
        self.config = load_config(env)
        self.outdir = outdir
        app = cdk.App(context={**cdk_context(), "env": env}, outdir=str(outdir))
        self.stacks = build_stacks(app, self.config)
        self.assembly = app.synth()

    def template(self, role: str) -> dict[str, object]:
        """The synthesized template of a stack by role ('network', 'database', ...)."""
        stack = self.stacks[role]
        return dict(self.assembly.get_stack_by_name(stack.stack_name).template)


_SYNTHS: dict[str, Synth] = {}


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``synth("dev")`` synthesizes that environment once per test session."""

    def get(env: str) -> Synth:
        if env not in _SYNTHS:
            _SYNTHS[env] = Synth(env, tmp_path_factory.mktemp(f"cdk-{env}"))
        return _SYNTHS[env]

    return get


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The one local SparkSession (embedded Hive metastore) shared by every Spark test."""
    from cdclake_merge.session import local_session

    session = local_session(tmp_path_factory.mktemp("spark-warehouse"), app_name="cdclake-tests")
    yield session
    session.stop()
