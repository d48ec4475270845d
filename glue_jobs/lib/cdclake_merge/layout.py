"""What a lake table was created with, as Hudi stored it, against what its config asks for now.

A table's type, record key and partitioning are fixed when Hudi first writes it
(``.hoodie/hoodie.properties``), and so is its record index's number of file groups (the
``record_index`` partition of its metadata table: Hudi reads
``hoodie.metadata.record.index.min.filegroup.count`` only when it builds the index). A config
that asks for another type, key or partitioning, or for more record index file groups than the
table has (a larger ``expected_rows``), is taken only by a rebuild (docs/merge-job.md "Rebuild
beside the live table"). Read with the merge's file system, without Spark: the merge run
refuses such a run before it reads a change, and ``cdclake status`` says the same before the
run does. Synth cannot see the stored table, so it cannot.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cdclake_merge.storage import FileSystem, join

PROPERTIES = "hoodie.properties"
RECORD_INDEX = join("metadata", "record_index")
# A record index file group's files: base files (HFile) and log files (hidden, "."-prefixed)
# of file group ``record-index-NNNN-0``.
_FILE_GROUP = re.compile(r"^\.?(record-index-\d+)-\d+_")


# How each difference is named (``<what> <stored> -> <config>``): the failure line, status and
# the dispatcher read them back.
TABLE_TYPE = "table type"
RECORD_KEY = "record key"
PARTITIONING = "partitioning"
INDEX_SIZE = "record index file groups"
# What a rebuild by copy takes (cdclake_merge.generations.Generations.copy): the live rows are
# written again under the new layout, keyed as they are. A key change re-keys rows, their
# tombstones and a history's versions, which a copy cannot.
COPIED = (TABLE_TYPE, PARTITIONING, INDEX_SIZE)


def copy_takes(differences: Sequence[str]) -> bool:
    """Whether a rebuild by copy takes every one of ``differences`` (as
    :func:`rebuild_reasons` names them); False for none."""
    return bool(differences) and all(d.startswith(COPIED) for d in differences)


class LayoutNeedsRebuild(ValueError):
    """The table was created otherwise than its config says; only a rebuild takes the change.
    A ValueError, as any refusal of the table's spec (the CLI's usage error, the Glue entry's
    failure line)."""

    def __init__(self, table: str, differences: Sequence[str]) -> None:
        self.table, self.differences = table, tuple(differences)
        super().__init__(
            f"table {table} was created otherwise than its config says "
            f"({'; '.join(differences)}): needs a rebuild; nothing was committed"
        )


@dataclass(frozen=True)
class Layout:
    """What fixes a table when it is first written."""

    table_type: str
    key: tuple[str, ...]
    partition_fields: tuple[str, ...]
    record_index_file_groups: int | None  # stored: None before the index is built


def stored_layout(fs: FileSystem, timeline: str) -> Layout | None:
    """The layout Hudi stored under ``timeline`` (the table's ``.hoodie/``); None: no table."""
    path = join(timeline, PROPERTIES)
    if not fs.exists(path):
        return None
    properties = _properties(fs.read_text(path))
    groups = {
        found.group(1)
        for name in fs.list_dir(join(timeline, RECORD_INDEX))
        if (found := _FILE_GROUP.match(name))
    }
    return Layout(
        table_type=properties.get("hoodie.table.type", "COPY_ON_WRITE"),
        key=_fields(properties.get("hoodie.table.recordkey.fields", "")),
        partition_fields=_fields(properties.get("hoodie.table.partition.fields", "")),
        record_index_file_groups=len(groups) or None,
    )


def rebuild_reasons(stored: Layout, wanted: Layout) -> list[str]:
    """What differs, stored -> config, each as ``what old -> new``; empty: nothing."""
    reasons = []
    if stored.table_type != wanted.table_type:
        reasons.append(f"{TABLE_TYPE} {stored.table_type} -> {wanted.table_type}")
    if stored.key != wanted.key:
        reasons.append(f"{RECORD_KEY} {_shown(stored.key)} -> {_shown(wanted.key)}")
    if stored.partition_fields != wanted.partition_fields:
        partitions = (_shown(stored.partition_fields), _shown(wanted.partition_fields))
        reasons.append("{} {} -> {}".format(PARTITIONING, *partitions))
    have, need = stored.record_index_file_groups, wanted.record_index_file_groups
    # A larger index than config sizes only costs a little: the table keeps it.
    if have is not None and need is not None and have < need:
        reasons.append(f"{INDEX_SIZE} {have} -> {need}")
    return reasons


def check_layout(fs: FileSystem, table: str, timeline: str, wanted: Layout) -> None:
    """LayoutNeedsRebuild when the stored table differs from ``wanted``; nothing without one."""
    stored = stored_layout(fs, timeline)
    reasons = rebuild_reasons(stored, wanted) if stored is not None else []
    if reasons:
        raise LayoutNeedsRebuild(table, reasons)


def _properties(text: str) -> dict[str, str]:
    """Java properties as Hudi writes them: ``key=value`` lines, ``#`` comments; escaped
    characters do not occur in the keys read here."""
    found = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            name, _, value = line.partition("=")
            found[name.strip()] = value.strip()
    return found


def _fields(value: str) -> tuple[str, ...]:
    # CustomKeyGenerator's partition fields carry their kind: region:SIMPLE.
    return tuple(f.split(":", 1)[0] for f in value.split(",") if f)


def _shown(fields: Sequence[str]) -> str:
    return f"[{', '.join(fields)}]" if fields else "none"
