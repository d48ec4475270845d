"""A lake table's generations: the table's own path and the rebuilds beside it.

Generation 1 is the table at ``<database>.db/<table>``; a rebuild writes generation n >= 2 at
``<table>__g<n>``, with its own sidecar (``_cdclake/<table>__g<n>/``), and keeps the table's
Hudi and catalog name (docs/merge-job.md "Rebuild beside the live table"). Which generation is
live, which is being built and from which change positions, and how far a swap got are kept in
a small state object in the table's own sidecar (:data:`STATE`), which the rebuild and the
swap write and the merge reads; users read the catalog entry's location. No Spark here: the
dispatcher reads the same state.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from cdclake_merge.pending import TablePaths
from cdclake_merge.positions import FolderPosition, advance, positions_as_json, scan
from cdclake_merge.schema import Column
from cdclake_merge.storage import FileSystem, join

STATE = "generations.json"
NOTIFICATIONS = "notifications"  # the lake capture's notifications topic: <topic prefix>.<this>
SNAPSHOT_AGGREGATE = "Incremental Snapshot"
SNAPSHOT_COMPLETED = "COMPLETED"


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
    began_at: str | None = None  # ISO time (UTC) the rebuild began
    # The incremental snapshot's signal id, recorded before it is sent.
    snapshot_id: str | None = None
    # False from the id's record until the signal table took it: a run killed in between sends
    # the same id again (the table keeps an id once), rather than waiting for a snapshot no
    # signal started. True for a state written before this field: its id was sent.
    signal_sent: bool = True
    catalog_pending: bool = False  # the swap named the live generation; the catalog is next
    retired: int | None = None  # the generation the swap replaced, until it is removed
    # The live generation's version when the swap named it: a run past it has committed
    # after the swap, and removes the retired generation.
    swapped_version: int | None = None
    # The generation being built starts as a copy of the live one (its rows and tombstones,
    # its checkpoint's positions) and applies the changes from there as the live one would:
    # no snapshot, no signal. How a table that keeps its history is rebuilt, for a change of
    # its layout a copy takes (cdclake_merge.layout.COPIED): each key's stored row stays the
    # history's open version, and the changes the live table failed on become versions.
    copy: bool = False


def read_generations(fs: FileSystem, sidecar: str) -> Generations:
    """The state in the table's own sidecar (generation 1's), in one GET: the dispatcher asks
    every table each turn, and a LIST (an exists()) costs twelve GETs (docs/cost.md)."""
    try:
        stored = json.loads(fs.read_text(join(sidecar, STATE)))
    except FileNotFoundError:
        return Generations()
    known = {f.name for f in fields(Generations)}
    return Generations(**{k: v for k, v in stored.items() if k in known})


def live_generation(fs: FileSystem, warehouse: str, table: str) -> tuple[Generations, str]:
    """The state object of ``DATABASE.TABLE`` and the name its live generation's files are
    under (``DATABASE.TABLE__g<n>`` after a swap), for :meth:`TablePaths.of`."""
    state = read_generations(fs, TablePaths.of(warehouse, table).sidecar)
    database, _, name = table.partition(".")
    return state, f"{database}.{generation_folder(name, state.live)}"


def rebuilding(state: Generations) -> str | None:
    """What ``status`` and ``dispatch`` say of a rebuild in progress; None: none is."""
    if state.building is None:
        return None
    since = f", since {state.began_at[:19]}" if state.began_at else ""
    return f"rebuilding (generation {state.building}{since})"


def write_generations(fs: FileSystem, sidecar: str, state: Generations) -> None:
    fs.write_text(join(sidecar, STATE), json.dumps(asdict(state), sort_keys=True))


def change_ends(fs: FileSystem, changes: str) -> dict[str, FolderPosition]:
    """Every change folder's end now: the positions a checkpoint would hold after applying all
    it lists."""
    listed = scan(fs, changes, {})
    return advance({}, listed.pending, listed.parents)


def begin_rebuild(
    fs: FileSystem,
    sidecar: str,
    changes: str,
    changes_fs: FileSystem | None = None,
    *,
    copy: bool = False,
) -> Generations:
    """The rebuild in progress, or a new one: the next generation number and the end of every
    change folder now (taken before the snapshot's signal is sent). A rebuild begun and killed
    is found again, with the positions it began with. ``changes_fs``: where the change files
    are, when not on ``fs`` (the local stack's are on its S3 stand-in). ``copy``: a new one is
    built as a copy of the live generation (:attr:`Generations.copy`), which lists nothing: it
    reads from where the live generation's checkpoint is."""
    state = read_generations(fs, sidecar)
    if state.building is not None:
        return state
    if state.retired is not None:  # its removal needs the live generation's next commit
        raise ValueError(
            f"generation {state.retired} of the table is not removed yet (the first merge "
            "commit after a swap removes it): run a merge before another rebuild"
        )
    numbers = [state.live, state.retired or 0]
    begun = replace(
        state,
        building=max(numbers) + 1,
        start={} if copy else positions_as_json(change_ends(changes_fs or fs, changes)),
        began_at=dt.datetime.now(dt.UTC).isoformat(),
        snapshot_id=None,
        copy=copy,
    )
    write_generations(fs, sidecar, begun)
    return begun


def begin_signalled(
    fs: FileSystem,
    sidecar: str,
    changes: str,
    signal: Callable[[str], None],
    changes_fs: FileSystem | None = None,
) -> Generations:
    """The rebuild in progress, begun if none is (:func:`begin_rebuild`), with its snapshot
    signalled: a new id recorded in the state object, then ``signal(id)`` (its runs look for
    that id's COMPLETED notification), then the signal marked sent. After the listing, never
    before: a snapshot read written before it would be skipped as already listed. A rebuild
    whose signal was sent is returned as it is (the snapshot Debezium started goes on across
    restarts); one whose id is recorded but not marked sent (killed or refused in between) sends
    the same id again, so ``signal`` must take an id once (the signal table's primary key)."""
    state = begin_rebuild(fs, sidecar, changes, changes_fs)
    if state.copy or (state.snapshot_id is not None and state.signal_sent):
        return state  # a copy reads no snapshot
    if state.snapshot_id is None:
        state = record_signal(fs, sidecar, str(uuid.uuid4()))
    assert state.snapshot_id is not None
    signal(state.snapshot_id)
    sent = replace(state, signal_sent=True)
    write_generations(fs, sidecar, sent)
    return sent


def record_signal(fs: FileSystem, sidecar: str, snapshot_id: str) -> Generations:
    """The rebuild in progress with the id of the snapshot signal about to be sent: written
    before the signal, so the rebuild's runs look for that snapshot's end, and not marked sent
    until it is (:func:`begin_signalled`)."""
    state = read_generations(fs, sidecar)
    if state.building is None:
        raise ValueError("no rebuild is in progress: begin one before sending its signal")
    signalled = replace(state, snapshot_id=snapshot_id, signal_sent=False)
    write_generations(fs, sidecar, signalled)
    return signalled


def swapped(state: Generations, version: int) -> Generations:
    """The state once the generation being built (at ``version``) is live, its catalog entry
    still to move."""
    if state.building is None:
        raise ValueError("no rebuild is in progress: nothing to swap")
    return Generations(
        live=state.building, catalog_pending=True, retired=state.live, swapped_version=version
    )


def _newest(position: FolderPosition) -> str | None:
    return max(filter(None, (position.after, *(n for n, _, _ in position.recent))), default=None)


def caught_up(
    state: Generations,
    ends: Mapping[str, FolderPosition],
    built: Mapping[str, FolderPosition],
    snapshot_done: bool,
) -> bool:
    """Whether the generation being built may be swapped in: its snapshot has finished (a copy
    has none) and its checkpoint (``built``) has applied, in every change folder, the files
    listed (``ends``, the folders' ends as listed after the snapshot was seen to finish)."""
    if state.building is None or not (snapshot_done or state.copy):
        return False
    for folder, end in ends.items():
        wanted = _newest(end)
        reached = _newest(built.get(folder, FolderPosition()))
        if wanted is not None and (reached is None or reached < wanted):
            return False
    return True


def notifications_beside(changes: str, source_table: str) -> str:
    """The folder the S3 sink writes the lake capture's notifications to, beside the table's
    topic folder: ``…/topics/<prefix>.<schema>.<table>/`` → ``…/topics/<prefix>.notifications/``
    (environment.names.notifications_topic)."""
    parent, _, topic = changes.rstrip("/").rpartition("/")
    suffix = "." + source_table
    if not topic.endswith(suffix):
        raise ValueError(f"change folder {changes} is not the topic of {source_table}")
    return join(parent, f"{topic.removesuffix(suffix)}.{NOTIFICATIONS}") + "/"


def snapshot_finished(fs: FileSystem, notifications: str, snapshot_id: str) -> bool:
    """Whether Debezium reported the incremental snapshot ``snapshot_id`` COMPLETED among the
    notification change files under ``notifications`` (JSON lines; a line is the notification
    or, schemas enabled, its ``payload``)."""
    for path in fs.list_files(notifications):
        if not path.endswith((".json", ".jsonl")):  # the sink writes them uncompressed
            continue
        for text in fs.read_text(path).splitlines():
            if _is_completion(text, snapshot_id):
                return True
    return False


def _is_completion(text: str, snapshot_id: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:  # a line cut short by a sink task's restart: the next file has it
        return False
    if isinstance(value, dict) and isinstance(value.get("payload"), dict):
        value = value["payload"]
    return (
        isinstance(value, dict)
        and value.get("aggregate_type") == SNAPSHOT_AGGREGATE
        and value.get("type") == SNAPSHOT_COMPLETED
        and value.get("id") == snapshot_id
    )


def kept_columns(live: Sequence[Column], new: Sequence[Column]) -> list[Column]:
    """A rebuild's columns under ``drop_columns: keep``: the live generation's, in its order,
    each with the type its events now carry where they carry it (a column the source dropped
    keeps its stored type), then the columns new to the table."""
    types = dict(new)
    names = {name for name, _ in live}
    return [
        *((name, types.get(name, stored)) for name, stored in live),
        *((name, kind) for name, kind in new if name not in names),
    ]
