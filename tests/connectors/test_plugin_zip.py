"""The plugin zip is the same bytes whenever the same files are packaged: a deploy names the
custom plugin by the zip's hash, and a new plugin replaces the connectors, whose names are
fixed (CloudFormation refuses that replacement)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / "jvm" / "lib" / "debezium-postgres"  # what `make setup` resolves


def _package(jars: list[Path], folder: Path, *, mtime: int, reverse: bool) -> str:
    """The sha256 of the Debezium plugin zipped from a fresh copy of ``jars`` (the plugin's
    layout: its jars and a providers folder), each file with ``mtime``, copied in the order
    given or reversed (a file system lists entries in its own order)."""
    plugin = folder / "plugin"
    for jar in sorted(jars, reverse=reverse):
        target = plugin / "debezium-connector-postgres" / jar.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(jar, target)
        os.utime(target, (mtime, mtime))
    providers = plugin / "msk-config-providers" / "lib"
    providers.mkdir(parents=True)
    (providers / "README").write_text("providers\n")
    os.utime(providers / "README", (mtime, mtime))
    zip_file = folder / "plugin.zip"
    subprocess.run(
        [str(ROOT / "connectors" / "zip_plugin.sh"), str(plugin), str(zip_file)],
        check=True,
        env={**os.environ, "TZ": "Asia/Tokyo" if reverse else "UTC"},
    )
    return hashlib.sha256(zip_file.read_bytes()).hexdigest()


def test_plugin_zip_built_twice_same_sha256(tmp_path: Path) -> None:
    jars = sorted(JARS.glob("*.jar"))
    if not jars:
        pytest.skip(f"no jars in {JARS}: `make setup` resolves them (mvn, Maven Central)")
    if shutil.which("zip") is None:
        pytest.skip("zip is not installed: `make plugins` needs it too")
    first = _package(jars, tmp_path / "first", mtime=1_700_000_000, reverse=False)
    second = _package(jars, tmp_path / "second", mtime=1_800_000_000, reverse=True)
    assert first == second
