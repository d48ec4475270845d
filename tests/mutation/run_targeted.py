"""The targeted mutants of tests/mutation/targeted.toml: each must make its named tests fail.

The work tree is never touched: the repository is copied to a temporary folder once (the
resolved jars linked, not copied), each mutant is applied there in turn, its tests run against
that copy (``PYTHONPATH`` puts it ahead of the editable install), and the file is restored.

    python tests/mutation/run_targeted.py [--only ID ...] [--no-baseline] [--keep]

First the named tests run once unmutated (a mutant "killed" by a test that fails anyway
proves nothing). Exit status 1 when a mutant survives or the baseline fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = Path(__file__).with_name("targeted.toml")
# Not needed by the tests or too big to copy: build output, caches, environments.
SKIP = {
    ".git",
    ".venv",
    "node_modules",
    "cdk.out",
    "build",
    "mutants",
    ".local-stack",
    "demo-output",
    "warehouse",
    "spark-warehouse",
    "metastore_db",
}
SKIP_ANYWHERE = shutil.ignore_patterns(
    "__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"
)


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    original: str
    mutated: str
    why: str
    tests: list[str]


def load(path: Path = MUTANTS) -> list[Mutant]:
    return [Mutant(**entry) for entry in tomllib.loads(path.read_text())["mutant"]]


def copy_tree(target: Path) -> Path:
    """The repository under ``target/repo``; ``shared/`` beside it, as tests/conftest expects."""
    repo = target / "repo"
    repo.mkdir()
    for item in ROOT.iterdir():
        if item.name in SKIP or item.name == "jvm":
            continue
        if item.is_dir():
            shutil.copytree(item, repo / item.name, ignore=SKIP_ANYWHERE, symlinks=True)
        else:
            shutil.copy2(item, repo / item.name)
    shutil.copytree(ROOT / "jvm", repo / "jvm", ignore=shutil.ignore_patterns("lib", "target"))
    if (ROOT / "jvm" / "lib").exists():
        (repo / "jvm" / "lib").symlink_to(ROOT / "jvm" / "lib")
    if (ROOT.parent / "shared").exists():
        (target / "shared").symlink_to(ROOT.parent / "shared")
    return repo


def run_tests(repo: Path, tests: list[str]) -> tuple[int, str]:
    env = {
        **os.environ,
        # The copy's packages ahead of the editable install, which points at the work tree.
        "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "glue_jobs" / "lib")]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYSPARK_PYTHON": sys.executable,
    }
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    done = subprocess.run(command, cwd=repo, env=env, text=True, capture_output=True)
    return done.returncode, done.stdout + done.stderr


def apply(repo: Path, mutant: Mutant) -> str:
    """Mutate the copy's file; returns its original text. ValueError if the snippet moved."""
    path = repo / mutant.file
    text = path.read_text()
    found = text.count(mutant.original)
    if found != 1:
        raise ValueError(
            f"{MUTANTS.name}: mutant {mutant.id}: its original snippet occurs {found} times "
            f"in {mutant.file} (expected once); update the snippet"
        )
    path.write_text(text.replace(mutant.original, mutant.mutated))
    return text


def check_imports_from(repo: Path) -> None:
    """Fail loudly if the tests would import the work tree instead of the copy."""
    code = "import cdclake_merge, cdclake; print(cdclake_merge.__file__); print(cdclake.__file__)"
    env = {**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{repo / 'glue_jobs' / 'lib'}"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, env=env, text=True, capture_output=True, check=True
    ).stdout.split()
    if not all(Path(p).resolve().is_relative_to(repo.resolve()) for p in out):
        raise SystemExit(f"the copy at {repo} is not what the tests import: {out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="run only these mutant ids")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = parser.parse_args()

    mutants = load()
    unknown = set(args.only) - {m.id for m in mutants}
    if unknown:
        parser.error(f"unknown mutant ids: {sorted(unknown)}")
    if args.only:
        mutants = [m for m in mutants if m.id in args.only]

    work = Path(tempfile.mkdtemp(prefix="cdclake-targeted-"))
    try:
        repo = copy_tree(work)
        check_imports_from(repo)
        if not args.no_baseline:
            tests = list(dict.fromkeys(t for m in mutants for t in m.tests))
            code, output = run_tests(repo, tests)
            if code != 0:
                print(output)
                print("baseline: the named tests fail without any mutant", file=sys.stderr)
                return 1
            print(f"baseline: {len(tests)} tests pass unmutated")
        survived = []
        for mutant in mutants:
            original = apply(repo, mutant)
            started = time.monotonic()
            try:
                code, output = run_tests(repo, mutant.tests)
            finally:
                (repo / mutant.file).write_text(original)
            # pytest exits 1 when tests failed; anything else (errors, nothing collected) is
            # not a kill.
            verdict = "killed" if code == 1 else "survived" if code == 0 else f"error ({code})"
            print(
                f"{verdict:<10} {mutant.id:<34} {time.monotonic() - started:6.0f}s  {mutant.file}"
            )
            if verdict != "killed":
                survived.append(mutant)
                print(f"           why it matters: {mutant.why}")
                if code not in (0, 1):
                    print(output[-3000:])
        print(f"targeted: {len(mutants) - len(survived)}/{len(mutants)} killed")
        return 1 if survived else 0
    finally:
        if args.keep:
            print(f"copy kept at {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
