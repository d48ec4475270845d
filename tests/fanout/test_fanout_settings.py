"""The fan-out's delivery settings as the stack and the local mapping driver read them."""

from __future__ import annotations

from dataclasses import fields

from environment.fanout_settings import MAPPING, MappingSettings


def test_mapping_settings_to_dict_round_trips_every_field() -> None:
    as_dict = MAPPING.to_dict()
    assert list(as_dict) == [f.name for f in fields(MappingSettings)]
    assert MappingSettings(**as_dict) == MAPPING
