"""Flattened list attributes (`prefix.0.suffix`, `prefix.1.suffix`, ...) are read whole, to their first gap,
however many traces read lists of other lengths under the same keys before."""

from __future__ import annotations

import uuid

import pytest

from tracescore.extract._read import indexed

# Shorter and longer than the lists read before them, past the keys `indexed` keeps (64) and back.
LENGTHS = (3, 0, 5, 1, 70, 2, 100, 64, 65, 63, 4)


@pytest.mark.parametrize("suffix", ["document.content", ""])
def test_each_list_is_read_to_its_first_gap_whatever_was_read_before(suffix: str) -> None:
    prefix = f"retrieval.{uuid.uuid4().hex}.documents"
    tail = f".{suffix}" if suffix else ""
    for length in LENGTHS:
        attributes = {f"{prefix}.{i}{tail}": f"document {i}" for i in range(length)}
        attributes[f"{prefix}.{length + 1}{tail}"] = "after the gap: not part of the list"
        attributes[f"{prefix}.{length}.other"] = "another key at the gap"
        assert indexed(attributes, prefix, suffix) == [f"document {i}" for i in range(length)], length


def test_lists_under_other_prefixes_and_suffixes_are_read_apart() -> None:
    prefix = f"llm.{uuid.uuid4().hex}.messages"
    attributes = {
        **{f"{prefix}.{i}.role": "user" for i in range(4)},
        **{f"{prefix}.{i}.content": f"text {i}" for i in range(2)},
    }
    assert indexed(attributes, prefix, "role") == ["user"] * 4
    assert indexed(attributes, prefix, "content") == ["text 0", "text 1"]
    assert indexed(attributes, prefix) == []
