"""Random and mutated lines never crash the parser or a run; every line is accounted for."""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdclake_merge.debezium import TableSpec, parse_line
from cdclake_merge.job import MergeError, MergeOptions, run_merge
from cdclake_merge.replay import quarantined
from cdclake_merge.sink import Sink, open_sink
from cdclake_merge.storage import LocalFileSystem
from tests.merge.support import decimal_b64, envelope, with_schema

SPEC = TableSpec(("id",), column_types={"when": "timestamp", "amount": "decimal(10,2)"})
SEEDS = [
    json.dumps(envelope("u", lsn=10, commit=9, after={"id": 1, "name": "x", "when": 1})),
    json.dumps(envelope("d", lsn=11, before={"id": 1})),
    json.dumps(envelope("t", lsn=12)),
    json.dumps({"id": 2, "__op": "c", "__lsn": 5, "__deleted": "false", "amount": "1.5"}),
    json.dumps(
        with_schema(
            envelope("c", lsn=3, after={"id": 1, "amount": decimal_b64("1.25", 2)}),
            [
                {"field": "id", "type": "int32"},
                {
                    "field": "amount",
                    "type": "bytes",
                    "name": "org.apache.kafka.connect.data.Decimal",
                    "parameters": {"scale": "2", "connect.decimal.precision": "10"},
                },
            ],
        )
    ),
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def _check(text: str) -> None:
    outcome = parse_line(text, SPEC)
    assert outcome.kind in {"event", "skip", "bad"}
    assert (outcome.kind == "event") == (outcome.change is not None)
    if outcome.kind != "event":
        assert outcome.reason


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=200))
def test_parse_line_random_text_never_raises(text: str) -> None:
    _check(text)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_parse_line_random_json_never_raises(value: object) -> None:
    _check(json.dumps(value))


@st.composite
def mutated_events(draw: st.DrawFn) -> str:
    """A real event with one payload field, and maybe a field of an image, replaced."""
    event = json.loads(draw(st.sampled_from(SEEDS)))
    target = event.get("payload", event)
    key = draw(st.sampled_from(sorted(target)))
    target[key] = draw(json_values)
    for inner in ("after", "before", "source"):
        if isinstance(target.get(inner), dict) and target[inner] and draw(st.booleans()):
            inner_key = draw(st.sampled_from(sorted(target[inner])))
            target[inner][inner_key] = draw(json_values)
    return json.dumps(event)


@settings(max_examples=600, deadline=None)
@given(mutated_events())
def test_parse_line_mutated_events_never_raise(text: str) -> None:
    _check(text)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SEEDS), st.integers(min_value=0, max_value=400))
def test_parse_line_truncated_events_are_bad(seed: str, cut: int) -> None:
    text = seed[: min(cut, len(seed) - 1)]
    outcome = parse_line(text, SPEC)
    assert outcome.kind in {"bad", "skip"}


# --- whole runs through Spark ---------------------------------------------------------------

_runs = itertools.count()
fuzz_lines = st.one_of(
    st.sampled_from(SEEDS),
    mutated_events(),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=60).map(
        lambda t: t.replace("\n", " ")
    ),
    json_values.map(json.dumps),
    st.sampled_from(["", "null", "   "]),
)


def _input_lines(files: list[list[str]]) -> int:
    return sum(len(lines) for lines in files)


@pytest.mark.spark
@pytest.mark.slow
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(files=st.lists(st.lists(fuzz_lines, min_size=1, max_size=10), min_size=1, max_size=3))
def test_run_merge_fuzzed_files_account_for_every_line(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, files: list[list[str]]
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    changes = root / "changes"
    for i, lines in enumerate(files):
        path = changes / "topics" / "app.public.orders" / "partition=0" / f"f{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines))
    fs = LocalFileSystem()
    table = f"fuzz{next(_runs)}.orders"
    sink = open_sink(
        warehouse=str(root / "warehouse"),
        table=table,
        key=("id",),
        fs=fs,
        spark_factory=lambda: spark,
    )
    options = MergeOptions(
        table=table,
        key=("id",),
        changes=str(changes),
        column_types=dict(SPEC.column_types),
        max_bad_fraction=1.0,
    )
    try:
        result = run_merge(lambda: spark, fs, sink, options)
    except MergeError as exc:  # e.g. a mutated value changed a column's type: named, no commit
        assert str(exc).startswith(f"table {table}: ")
        assert sink.load().version == 0
        return

    assert result.committed
    assert result.lines == _input_lines(files)
    assert result.events_read + result.skipped + result.quarantined == result.lines
    assert result.applied + result.stale_skipped + result.truncates == result.events_read
    assert sum(result.skipped_reasons.values()) == result.skipped
    assert sum(result.quarantine_reasons.values()) == result.quarantined
    lines = _quarantined(sink)
    assert len(lines) == result.quarantined
    for record in lines:
        number = int(record["line"])
        index = int(Path(record["source_file"]).stem[1:])
        assert record["raw"] == files[index][number - 1]
        assert record["reason"]


def _quarantined(sink: Sink) -> list[dict[str, Any]]:
    """The run's quarantine as `cdclake quarantine` reads it."""
    return [asdict(q) for q in quarantined(LocalFileSystem(), sink.quarantine_root)]
