"""`counted`: the one way a count and its noun are said in what a person reads."""

from __future__ import annotations

import pytest

from tracescore._plural import counted


@pytest.mark.parametrize(
    ("count", "noun", "plural", "said"),
    [
        (1, "record", None, "1 record"),
        (0, "record", None, "0 records"),
        (2, "tool call", None, "2 tool calls"),
        (1.0, "record", None, "1 record"),  # a float count that is whole (a gate's `found`)
        (1.5, "day", None, "1.5 days"),
        (2, "reply", "replies", "2 replies"),
        (1, "reply", "replies", "1 reply"),
        (1_234_567, "span", None, "1234567 spans"),  # in full, never 1.23457e+06
    ],
)
def test_a_count_and_its_noun(count: float, noun: str, plural: str | None, said: str) -> None:
    assert counted(count, noun, plural) == said
