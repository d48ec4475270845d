"""Files a deploy ships that the config points at (the connector plugin zips, the RDS CA
bundle, the merge job's wheels): found and checked before synth, so a missing one is one line
naming the fix."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from environment.config import ConfigError, EnvironmentConfig
from environment.paths import (
    GLUE_WHEELS_DIR,
    RDS_CA_BUNDLE,
    RDS_CA_BUNDLE_VARIABLE,
    REPO_ROOT,
)

# A bucket name that marks a plugin location as not yet filled in; synth refuses it.
PLUGIN_PLACEHOLDER_BUCKET = "REPLACE-ME"
PLUGIN_BUILD_HINT = "run `make plugins` (or set an s3://bucket/key you uploaded)"


class PluginNotFound(ConfigError):
    """A plugin location that cannot deploy: a missing local zip or a placeholder bucket."""


def plugin_source(
    location: str, *, setting: str, repo_root: Path = REPO_ROOT
) -> tuple[str, str] | Path:
    """``(bucket, key)`` of an ``s3://bucket/key`` plugin location, or the path of a local zip
    (relative to the repository); :class:`PluginNotFound` naming ``setting`` otherwise."""
    if location.startswith("s3://"):
        bucket, _, key = location.removeprefix("s3://").partition("/")
        if not bucket or not key:
            raise PluginNotFound(f"{setting}: {location!r} is not s3://bucket/key")
        if bucket == PLUGIN_PLACEHOLDER_BUCKET:
            raise PluginNotFound(f"{setting}: {location} is a placeholder; {PLUGIN_BUILD_HINT}")
        return bucket, key
    path = Path(location)
    path = path if path.is_absolute() else repo_root / path
    if not path.is_file():
        raise PluginNotFound(f"{setting}: no plugin zip at {path}; {PLUGIN_BUILD_HINT}")
    return path


def rds_ca_bundle(config: EnvironmentConfig) -> Path | None:
    """The CA bundle the bootstrap verifies Aurora with; None when the config opts out.

    A missing or unreadable bundle fails the synth with one line naming the fix.
    """
    if not config.database.tls_verify:
        return None
    bundle = Path(os.environ.get(RDS_CA_BUNDLE_VARIABLE) or RDS_CA_BUNDLE)
    fix = (
        f"run `make rds-ca` (or set database.tls_verify: false in config/{config.env}.yaml "
        "to connect unverified)"
    )
    if not bundle.is_file():
        raise ConfigError(f"RDS CA bundle {bundle} not found: {fix}")
    try:
        ssl.create_default_context(cafile=str(bundle))
    except ssl.SSLError as exc:
        raise ConfigError(
            f"RDS CA bundle {bundle} holds no readable certificate ({exc}): {fix}"
        ) from None
    return bundle


def glue_wheel(requirement: str, wheels: Path = GLUE_WHEELS_DIR) -> Path:
    """The wheel of ``name==version`` for Glue 5.0 (CPython 3.11, manylinux x86_64) that
    `make setup` downloads; a ConfigError naming `make setup` when it has not."""
    name, _, version = requirement.partition("==")
    found = sorted(wheels.glob(f"{name}-{version}-cp311-cp311-manylinux*x86_64*.whl"))
    if not found:
        raise ConfigError(
            f"no Glue 5.0 wheel of {requirement} (cp311, manylinux x86_64) in {wheels}: "
            "run `make setup`"
        )
    return found[-1]
