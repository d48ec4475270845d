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


def notifications_topic(prefix: str) -> str:
    """``<prefix>.notifications``: the lake capture's Debezium notifications (an incremental
    snapshot's STARTED … COMPLETED, under the signal's id), which the S3 sink writes as change
    files beside the tables' (``topics/<prefix>.notifications/``) for a rebuild to learn its
    snapshot finished. One dot after the prefix: no table's topic (``<prefix>.<schema>.<table>``)
    can take the name."""
    return f"{prefix}.notifications"
