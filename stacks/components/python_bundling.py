"""Docker-free bundling for Python Lambdas: pip-install pinned pure-Python wheels locally."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

from environment.paths import REPO_ROOT

CACHE_ROOT = Path(tempfile.gettempdir()) / "cdclake-lambda-deps"


@jsii.implements(cdk.ILocalBundling)
class PipLocalBundling:
    """Bundle a package folder of this repo plus its ``requirements.txt`` without Docker.

    The asset keeps the repo layout (``lambdas/bootstrap/...``) so the handler imports its
    package exactly as the tests do. Dependencies are installed once per requirements content
    and target runtime into a cache folder, then copied: repeated synths cost a copy, not pip.
    Only wheels for the Lambda platform are accepted (``--only-binary``), so a pure-Python pin
    like pg8000 installs the same bytes on any build machine.
    """

    def __init__(self, *, package_dir: Path, runtime: lambda_.Runtime) -> None:
        self.package_dir = package_dir
        self.runtime = runtime

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: object) -> bool:
        out = Path(output_dir)
        self._copy_package(out)
        requirements = self.package_dir / "requirements.txt"
        if requirements.exists():
            shutil.copytree(
                self._dependencies(requirements),
                out,
                ignore=shutil.ignore_patterns(".complete"),
                dirs_exist_ok=True,
            )
        return True

    def _copy_package(self, out: Path) -> None:
        relative = self.package_dir.relative_to(REPO_ROOT)
        # Parent packages' __init__.py so `lambdas.bootstrap.handler` imports as in the tests.
        for parent in reversed(relative.parents[:-1]):
            (out / parent).mkdir(parents=True, exist_ok=True)
            init = REPO_ROOT / parent / "__init__.py"
            (out / parent / "__init__.py").write_text(init.read_text() if init.exists() else "")
        shutil.copytree(
            self.package_dir,
            out / relative,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "requirements.txt"),
            dirs_exist_ok=True,
        )

    def _dependencies(self, requirements: Path) -> Path:
        version = self.runtime.name.removeprefix("python")
        key = hashlib.sha256(requirements.read_bytes() + version.encode()).hexdigest()[:16]
        target = CACHE_ROOT / key
        if (target / ".complete").exists():
            return target
        staging = Path(tempfile.mkdtemp(prefix="deps-", dir=_ensure(CACHE_ROOT)))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-compile",
                "--only-binary=:all:",
                "--platform=manylinux2014_x86_64",
                "--implementation=cp",
                f"--python-version={version}",
                f"--target={staging}",
                "-r",
                str(requirements),
            ],
            check=True,
        )
        (staging / ".complete").write_text(key)
        if target.exists():  # another synth finished first
            shutil.rmtree(staging)
        else:
            staging.rename(target)
        return target


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def python_code(package: str, *, runtime: lambda_.Runtime) -> lambda_.Code:
    """Lambda code for ``package`` (e.g. ``lambdas/bootstrap``), bundled without Docker.

    The asset hash is the source folder's, so an unchanged package is not re-bundled within
    one cloud assembly. Docker is only the fallback CDK requires a value for; it is never
    started because local bundling always succeeds or fails loudly.
    """
    package_dir = REPO_ROOT / package
    return lambda_.Code.from_asset(
        str(package_dir),
        asset_hash_type=cdk.AssetHashType.SOURCE,
        exclude=["__pycache__", "*.pyc"],
        bundling=cdk.BundlingOptions(
            image=runtime.bundling_image,
            local=PipLocalBundling(package_dir=package_dir, runtime=runtime),
        ),
    )


@jsii.implements(cdk.ILocalBundling)
class CopyLocalBundling:
    """Copy folders of this repo into the asset, each to its own place in it (nothing to pip)."""

    def __init__(self, *, folders: Mapping[str, Path]) -> None:
        self.folders = dict(folders)  # place in the asset ('' = its root) → source folder

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: object) -> bool:
        for place, source in self.folders.items():
            shutil.copytree(
                source,
                Path(output_dir) / place,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                dirs_exist_ok=True,
            )
        return True


def code_with_libraries(
    package_dir: Path, libraries: Sequence[Path], *, runtime: lambda_.Runtime
) -> lambda_.Code:
    """Lambda code: ``package_dir``'s files at the asset root and each library package beside
    them, e.g. the Glue job's ``cdclake_merge`` as the job ships it (``--extra-py-files``).

    The asset hash is the bundled output's, so a change to a library is a new asset too.
    """
    folders = {"": package_dir, **{library.name: library for library in libraries}}
    return lambda_.Code.from_asset(
        str(package_dir),
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            image=runtime.bundling_image, local=CopyLocalBundling(folders=folders)
        ),
    )
