"""Random and mutated lines never crash the parser; every line gets exactly one outcome."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from cdclake_merge.debezium import TableSpec, parse_line
from tests.merge.events import decimal_b64, envelope, with_schema

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


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(SEEDS), st.data())
def test_parse_line_mutated_events_never_raise(seed: str, data: st.DataObject) -> None:
    event = json.loads(seed)
    target = event.get("payload", event)
    key = data.draw(st.sampled_from(sorted(target)))
    target[key] = data.draw(json_values)
    for inner in ("after", "before", "source"):
        if isinstance(target.get(inner), dict) and target[inner] and data.draw(st.booleans()):
            inner_key = data.draw(st.sampled_from(sorted(target[inner])))
            target[inner][inner_key] = data.draw(json_values)
    _check(json.dumps(event))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SEEDS), st.integers(min_value=0, max_value=400))
def test_parse_line_truncated_events_are_bad(seed: str, cut: int) -> None:
    text = seed[: min(cut, len(seed) - 1)]
    outcome = parse_line(text, SPEC)
    assert outcome.kind in {"bad", "skip"}
