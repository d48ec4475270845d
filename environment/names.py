"""Physical names derived from an environment's prefix, for the constructs given only the
prefix (:meth:`environment.config.EnvironmentConfig.resource_name` for the rest)."""

from __future__ import annotations


def resource_name(prefix: str, *parts: str) -> str:
    """``<prefix>-<part>-...``: the physical name of an environment's resource, for a construct
    given its environment's prefix (:meth:`EnvironmentConfig.resource_name` for the rest)."""
    return "-".join((prefix, *parts))


def merge_job_prefix(prefix: str) -> str:
    """What every merge job name of an environment starts with (and nothing else's does)."""
    return f"{prefix}-merge-"
