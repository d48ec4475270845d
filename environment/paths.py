"""Where the repository keeps what an environment names: its config files, the plugin zips
`make plugins` builds and the RDS CA bundle `make rds-ca` fetches."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "config"
# Where `make plugins` (connectors/package_plugins.sh) writes the zips.
PLUGIN_DIST_DIR = "connectors/dist"
#: Where `make rds-ca` puts the RDS global CA bundle (git-ignored); CDCLAKE_RDS_CA_BUNDLE
#: names another file (the tests' own CA).
RDS_CA_BUNDLE = REPO_ROOT / "build" / "rds-ca" / "global-bundle.pem"
RDS_CA_BUNDLE_VARIABLE = "CDCLAKE_RDS_CA_BUNDLE"
#: Where `make setup` downloads the wheels the merge job installs on Glue 5.0 (CPython 3.11,
#: manylinux x86_64; git-ignored): a deploy ships them, a run never reaches PyPI.
GLUE_WHEELS_DIR = REPO_ROOT / "build" / "glue-wheels"
