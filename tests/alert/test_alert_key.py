"""AlertKey: the Kafka key of the routes and state topics, written for every record and read back at every
start, so any name a span can carry must survive the round trip and no stored key may stop the service."""

from __future__ import annotations

import pytest

from tracescore.alert import AlertKey

NAMES = ["rag-api", "/billing", "", "a\x1fb", "\x1f", "\\", "\\x1f", "\\\\x1f\x1f", "/路由/ü", "x" * 10_000]


@pytest.mark.parametrize("route", NAMES)
def test_every_name_round_trips(route: str) -> None:
    for key in (AlertKey("rag-api", route, "faithfulness"), AlertKey(route, route, route)):
        assert AlertKey.decode(key.encode()) == key


def test_distinct_keys_never_encode_alike() -> None:
    # A separator inside a name must not shift the others: each distinct key has its own alert state.
    keys = {AlertKey(a, b, "m") for a in NAMES[:8] for b in NAMES[:8]}
    assert len({key.encode() for key in keys}) == len(keys)


def test_plain_names_keep_the_encoding_earlier_versions_wrote() -> None:
    # Existing routes keep their partition and their stored state across an upgrade.
    assert AlertKey("rag-api", "/billing", "faithfulness").encode() == b"rag-api\x1f/billing\x1ffaithfulness"


@pytest.mark.parametrize("raw", [b"", b"no separator", b"a\x1fb", b"a\x1fb\x1fc\x1fd", b"\xff\x1fb\x1fc"])
def test_anything_else_is_a_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        AlertKey.decode(raw)
