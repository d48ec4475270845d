"""A lake table's generations: the table's own path and the rebuilds beside it.

Generation 1 is the table at ``<database>.db/<table>``; a rebuild writes generation n >= 2 at
``<table>__g<n>``, with its own sidecar (``_cdclake/<table>__g<n>/``), and keeps the table's
Hudi and catalog name (docs/merge-job.md "Rebuild beside the live table"). Which generation is
live, which is being built and from which change positions, and how far a swap got are kept in
a small state object in the table's own sidecar (:data:`STATE`), which the rebuild and the
swap write and the merge reads; users read the catalog entry's location. No Spark here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cdclake_merge.positions import advance, positions_as_json, scan
from cdclake_merge.storage import FileSystem, join

STATE = "generations.json"


def generation_folder(name: str, generation: int) -> str:
    """The folder (and sidecar folder) name of the table ``name``'s generation."""
    if generation < 1:
        raise ValueError(f"a table's generations count from 1, got {generation}")
    return name if generation == 1 else f"{name}__g{generation}"


@dataclass(frozen=True)
class Generations:
    """The state object; none stored reads as generation 1 live, nothing being built."""

    live: int = 1
    building: int | None = None
    # The change folders' positions listed before the rebuild's signal (positions_as_json):
    # where the generation being built starts reading, nothing older.
    start: dict[str, Any] = field(default_factory=dict)
    catalog_pending: bool = False  # the swap named the live generation; the catalog is next
    retired: int | None = None  # the generation the swap replaced, until it is removed


def read_generations(fs: FileSystem, sidecar: str) -> Generations:
    """The state in the table's own sidecar (generation 1's)."""
    path = join(sidecar, STATE)
    if not fs.exists(path):
        return Generations()
    return Generations(**json.loads(fs.read_text(path)))


def write_generations(fs: FileSystem, sidecar: str, state: Generations) -> None:
    fs.write_text(join(sidecar, STATE), json.dumps(asdict(state), sort_keys=True))


def begin_rebuild(fs: FileSystem, sidecar: str, changes: str) -> Generations:
    """The rebuild in progress, or a new one: the next generation number and the end of every
    change folder now (taken before the snapshot's signal is sent). A rebuild begun and killed
    is found again, with the positions it began with."""
    state = read_generations(fs, sidecar)
    if state.building is not None:
        return state
    listed = scan(fs, changes, {})
    ends = advance({}, listed.pending, listed.parents)
    numbers = [state.live, state.retired or 0]
    begun = replace(state, building=max(numbers) + 1, start=positions_as_json(ends))
    write_generations(fs, sidecar, begun)
    return begun


def swapped(state: Generations) -> Generations:
    """The state once the generation being built is live, its catalog entry still to move."""
    if state.building is None:
        raise ValueError("no rebuild is in progress: nothing to swap")
    return Generations(live=state.building, catalog_pending=True, retired=state.live)
