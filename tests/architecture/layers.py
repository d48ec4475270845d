"""The project's import graph, read from the source (ast), and the layers it must keep."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Where each top-level package of ours lives (pyproject.toml maps cdclake_merge to the job's lib).
PACKAGES = {
    "environment": ROOT / "environment",
    "cdclake": ROOT / "cdclake",
    "cdclake_merge": ROOT / "glue_jobs" / "lib" / "cdclake_merge",
    "glue_jobs": ROOT / "glue_jobs",
    "stacks": ROOT / "stacks",
    "lambdas": ROOT / "lambdas",
    "connectors": ROOT / "connectors",
}

# Low to high, one top-level folder (or two side by side) a layer. A module imports only from
# its own layer or below; the foundation imports nothing of ours but itself, and no CDK, Spark
# or boto3.
FOUNDATION = ("environment",)
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", FOUNDATION),
    ("runtime", ("cdclake_merge", "glue_jobs", "lambdas")),
    ("connectors", ("connectors",)),
    ("stacks", ("stacks",)),
    ("cli", ("cdclake",)),
)
FOUNDATION_FORBIDDEN = ("aws_cdk", "constructs", "cdk_nag", "pyspark", "boto3", "botocore")


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if package == "glue_jobs" and parts[:1] == ("lib",):
                continue  # that is cdclake_merge
            name = ".".join((package, *parts)).removesuffix(".__init__")
            found[name] = path
    return found


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                prefix = ".".join(base)
                name = f"{prefix}.{node.module}" if node.module else prefix
            else:
                name = node.module or ""
            yield name
            yield from (f"{name}.{alias.name}" for alias in node.names)


def imports() -> dict[str, set[str]]:
    """Module -> every module of ours it imports (at any depth of its code, TYPE_CHECKING too)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = set()
        for imported in _imported(tree, name, path.name == "__init__.py"):
            if imported in known and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def imported_names(module: str) -> set[str]:
    """Every dotted name ``module`` imports, ours or not (``environment.tables.TableConfig``)."""
    path = modules()[module]
    tree = ast.parse(path.read_text(), filename=str(path))
    return set(_imported(tree, module, path.name == "__init__.py"))


def names_used(module: str) -> set[str]:
    """Every name and attribute name in ``module``'s code (``config.EnvironmentConfig`` gives
    ``config`` and ``EnvironmentConfig``)."""
    tree = ast.parse(modules()[module].read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
    return found


def folder_of(module: str) -> str:
    """The top-level folder a module lives in (cdclake_merge lives in glue_jobs/lib)."""
    return PACKAGES[module.split(".")[0]].relative_to(ROOT).parts[0]


def folder_imports() -> dict[str, set[str]]:
    """Top-level folder -> the other top-level folders its modules import."""
    graph: dict[str, set[str]] = {folder_of(module): set() for module in modules()}
    for module, targets in imports().items():
        graph[folder_of(module)] |= {folder_of(t) for t in targets} - {folder_of(module)}
    return graph


def folder_layer(folder: str) -> int:
    """The layer of a top-level folder: every module in it must be of that one layer."""
    found = {layer_of(module) for module in modules() if folder_of(module) == folder}
    if len(found) != 1:
        raise AssertionError(f"{folder}/ holds modules of layers {sorted(found)}")
    return found.pop()


def third_party(module: str) -> set[str]:
    return {name.split(".")[0] for name in imported_names(module)}


def layer_of(module: str) -> int:
    best = (-1, -1)  # (length of the matching prefix, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), index)
    if best[1] < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best[1]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
