"""Issue 29: the import graph has layers and no circles (read from the source, no imports run)."""

from __future__ import annotations

from tests.architecture.layers import (
    FOUNDATION_FORBIDDEN,
    LAYERS,
    cycles,
    folder_imports,
    folder_layer,
    imports,
    layer_of,
    modules,
    names_used,
    third_party,
)


def test_layers_import_graph_no_circles() -> None:
    assert cycles(imports()) == []


def test_layers_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in sorted(imports().items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_layers_folder_graph_no_circles() -> None:
    assert cycles(folder_imports()) == []


def test_layers_every_folder_is_one_layer() -> None:
    for folder in folder_imports():
        folder_layer(folder)  # raises for a folder holding modules of two layers


def test_layers_no_folder_imports_a_higher_folder() -> None:
    upward = [
        f"{folder}/ imports {target}/"
        for folder, targets in sorted(folder_imports().items())
        for target in sorted(targets)
        if folder_layer(target) > folder_layer(folder)
    ]
    assert upward == []


def test_layers_foundation_imports_only_itself() -> None:
    graph = imports()
    foundation = [m for m in modules() if layer_of(m) == 0]
    assert foundation, "no foundation module found"
    for module in foundation:
        assert all(layer_of(target) == 0 for target in graph[module]), module
        assert not third_party(module) & set(FOUNDATION_FORBIDDEN), module


def test_layers_sink_contract_does_not_import_its_implementation() -> None:
    assert "cdclake_merge.hudi" not in imports()["cdclake_merge.sink"]


def test_layers_every_module_has_a_layer() -> None:
    for module in modules():
        layer_of(module)  # raises for a module outside every layer


def test_layers_constructs_take_no_whole_environment() -> None:
    # A construct takes the config section it uses or typed values, the stacks the whole
    # environment: a construct naming EnvironmentConfig (imported or as config's attribute)
    # is one that could take it.
    takers = [
        module
        for module in modules()
        if module.startswith("stacks.components.") and "EnvironmentConfig" in names_used(module)
    ]
    assert takers == []
