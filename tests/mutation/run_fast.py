"""Mutation testing of the modules whose tests are fast (no Spark, PostgreSQL or CDK synth).

mutmut (configured in pyproject.toml ``[tool.mutmut]``) mutates a copy of the code, never the
work tree: this script stages the sources in ``build/mutation`` with ``cdclake_merge`` at the
top, as the tests import it (mutmut names mutants after their file's path and must find the same
name at run time), runs mutmut there and prints the score per module and every survivor's diff.

    python tests/mutation/run_fast.py [--max-children N] [--min-score PERCENT] [--only PATH ...]

Only the functions named in ``SCOPE`` count: a module's half that needs a server (the
bootstrap's SQL statements and its handler) is for its server tests. ``--only PATH``
(repeatable, a module's path in the repository) mutates and scores those modules alone, so one
can be measured to the end on a shared machine where the whole scope would take hours.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGE = ROOT / "build" / "mutation"
# (in the repository, in the staging copy): the package layout of pyproject.toml's package-dir.
LAYOUT = [
    ("environment", "environment"),
    ("cdclake", "cdclake"),
    ("glue_jobs/lib/cdclake_merge", "cdclake_merge"),
    ("lambdas", "lambdas"),
    ("tests", "tests"),
    ("config", "config"),
    ("bench/results", "bench/results"),  # the cost model's measured rates (tests/cost)
    ("pyproject.toml", "pyproject.toml"),
    ("cdk.json", "cdk.json"),
]
# Module -> the mutant names (fnmatch patterns) whose fast tests judge them.
SCOPE: dict[str, list[str]] = {
    "lambdas.fanout.handler": ["lambdas.fanout.handler.*"],
    "cdclake_merge.positions": ["cdclake_merge.positions.*"],
    "cdclake_merge.metrics": ["cdclake_merge.metrics.*"],
    "environment.config": ["environment.config.*"],
    "environment.tables": ["environment.tables.*"],
    "environment.lake": ["environment.lake.*"],
    "environment.names": ["environment.names.*"],
    "environment.artifacts": ["environment.artifacts.*"],
    "environment.replication": ["environment.replication.*"],
    "environment.fanout_settings": ["environment.fanout_settings.*"],
    "cdclake.comparison": ["cdclake.comparison.*"],
    "lambdas.bootstrap.sql": [
        "lambdas.bootstrap.sql.x_qualified__mutmut_*",
        "lambdas.bootstrap.sql.xǁBootstrapSpecǁ*",
    ],
    "cdclake_merge.dispatch": ["cdclake_merge.dispatch.*"],
    "cdclake_merge.failures": ["cdclake_merge.failures.*"],
    "cdclake_merge.pending": ["cdclake_merge.pending.*"],
    "lambdas.dispatcher.handler": ["lambdas.dispatcher.handler.*"],
    # Its AWS side's parts; the local merges and the command itself start Spark or a stack.
    "cdclake.dispatch": [
        f"cdclake.dispatch.{name}__mutmut_*"
        for name in ("x_aws_targets", "x_publish_local_lag", "x_render")
    ],
    "cdclake.cost": ["cdclake.cost.*"],
    "cdclake.errors": ["cdclake.errors.*"],
    "lambdas.credential_refresh.handler": ["lambdas.credential_refresh.handler.*"],
}
# A mutant that hangs the tests (timeout) is caught as surely as one that fails them.
CAUGHT = {"killed", "timeout", "caught by type check"}


def stage(only: list[str]) -> None:
    """A fresh copy each run: mutmut keeps a survivor's verdict even when new tests kill it.

    With ``only`` (modules), the copy's ``only_mutate`` lists those alone: mutmut generates
    every listed file's mutants before running any (minutes for the whole scope)."""
    shutil.rmtree(STAGE, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "__snapshots__")
    for source, target in LAYOUT:
        src, dst = ROOT / source, STAGE / target
        if src.is_dir():
            shutil.copytree(src, dst, ignore=ignore)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    if only:
        files = ", ".join(f'"{module.replace(".", "/")}.py"' for module in only)
        pyproject = STAGE / "pyproject.toml"
        text, count = re.subn(
            r"^only_mutate = \[.*?\]$",
            f"only_mutate = [{files}]",
            pyproject.read_text(),
            count=1,
            flags=re.M | re.S,
        )
        if count != 1:
            raise SystemExit("pyproject.toml [tool.mutmut]: no only_mutate list to narrow")
        pyproject.write_text(text)


def mutmut(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mutmut", *args], cwd=STAGE, text=True, capture_output=True
    )


def module_of(name: str) -> str | None:
    for module, patterns in SCOPE.items():
        if any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
            return module
    return None


def module_at(path: str) -> str:
    """The module a repository path is imported as (``glue_jobs/lib/cdclake_merge/x.py`` is
    ``cdclake_merge.x``), refused unless ``SCOPE`` measures it."""
    relative = (ROOT / path).resolve().with_suffix("")
    for source, target in LAYOUT:
        if relative.is_relative_to(ROOT / source):
            module = ".".join((target, *relative.relative_to(ROOT / source).parts))
            if module in SCOPE:
                return module
    raise SystemExit(f"--only {path}: not a module of SCOPE ({', '.join(SCOPE)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--min-score", type=float, default=0.0, help="fail below this percentage")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATH",
        help="mutate and score only this module (repeatable), e.g. cdclake/cost.py",
    )
    args = parser.parse_args()
    only = [module_at(path) for path in args.only]
    modules = only or list(SCOPE)
    patterns = [pattern for module in modules for pattern in SCOPE[module]]

    stage(only)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mutmut",
            "run",
            "--max-children",
            str(args.max_children),
            *patterns,
        ],
        cwd=STAGE,
    )
    if run.returncode != 0:
        print(f"mutmut run failed with exit code {run.returncode}", file=sys.stderr)
        return run.returncode

    statuses: dict[str, str] = {}
    for line in mutmut("results", "--all", "true").stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name and module_of(name) in modules:
            statuses[name] = status
    per_module: dict[str, Counter[str]] = {module: Counter() for module in modules}
    for name, status in statuses.items():
        per_module[module_of(name) or ""][status] += 1

    # A survivor's diff says what no test noticed; "no tests" means no fast test reaches it.
    for name in sorted(n for n, status in statuses.items() if status not in CAUGHT):
        if statuses[name] == "survived":
            print(mutmut("show", name).stdout.rstrip(), end="\n\n")
        else:
            print(f"# {name}: {statuses[name]}")
    print(f"{'module':<28} {'killed':>7} {'total':>6} {'score':>7}  other")
    killed = total = 0
    for module, counts in per_module.items():
        n, k = sum(counts.values()), sum(counts[s] for s in CAUGHT)
        killed, total = killed + k, total + n
        other = ", ".join(f"{s} {c}" for s, c in sorted(counts.items()) if s not in CAUGHT)
        print(f"{module:<28} {k:>7} {n:>6} {100 * k / max(n, 1):>6.1f}%  {other}")
    score = 100 * killed / max(total, 1)
    print(f"{'all':<28} {killed:>7} {total:>6} {score:>6.1f}%")
    if score < args.min_score:
        print(f"mutation score {score:.1f}% is below {args.min_score}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
