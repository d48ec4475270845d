"""What the config tests build their files from: a minimal environment and a writer."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_config(tmp_path: Path, data: dict[str, object], name: str = "broken") -> Path:
    """``data`` as ``tmp_path/<name>.yaml``, as ``load_config(path=…)`` reads it."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def minimal(**table: object) -> dict[str, object]:
    """The smallest valid environment: one table, ``public.orders``, with ``table``'s settings."""
    return {
        "env": "test",
        "account": "123456789012",
        "region": "eu-west-1",
        "prefix": "cdclake-test",
        "tables": [{"name": "public.orders", "primary_key": ["id"], **table}],
    }
