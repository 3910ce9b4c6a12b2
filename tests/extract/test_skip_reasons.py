"""Every reason extract gives for a skip is a member of `ExtractSkip`, the one place the reasons are named
(and what docs/gen/skips.py writes the troubleshooting page's table from): never a loose string, so a reason
cannot be misspelt in one reader, or given without the page explaining it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tracescore
from tracescore.consume import decode_message
from tracescore.extract import find
from tracescore.model import ExtractSkip, Trace

FIXTURES = Path(__file__).parent / "fixtures"
EXTRACT = Path(tracescore.__file__).parent / "extract"


def test_every_recorded_skip_gives_a_member_of_the_enum() -> None:
    reasons = []
    for payload in sorted(FIXTURES.glob("*/*.binpb")):
        spans = decode_message(payload.read_bytes())
        for trace_id in sorted({s.trace_id for s in spans}):
            found = find(Trace(trace_id, tuple(s for s in spans if s.trace_id == trace_id)))
            reasons += [(payload.name, skip.reason) for skip in found.skips]
    assert len({r for _, r in reasons}) >= 5  # the fixtures skip for several reasons
    loose = [(name, reason) for name, reason in reasons if type(reason) is not ExtractSkip]
    assert not loose, f"skip reasons that are not ExtractSkip members: {loose[:5]}"


def _calls(callee: str) -> list[tuple[str, ast.Call]]:
    return [
        (f"{path.name}:{node.lineno}", node)
        for path in sorted(EXTRACT.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == callee
    ]


@pytest.mark.parametrize("callee", ["Skip", "missing"])
def test_every_skip_the_readers_write_names_its_reason_by_the_enum(callee: str) -> None:
    """`Skip(reason, ...)` and `Reading.missing(reason, ...)` in extract's code: the reason is
    `ExtractSkip.<MEMBER>` (or `missing`'s own parameter, passed on), never a string."""
    calls = _calls(callee)
    assert calls
    loose = [
        where
        for where, call in calls
        if not (
            isinstance(first := call.args[0], ast.Attribute)
            and isinstance(first.value, ast.Name)
            and first.value.id == ExtractSkip.__name__
            and first.attr in ExtractSkip.__members__
        )
        and not (isinstance(first, ast.Name) and first.id == "reason")
    ]
    assert not loose, f"{callee}(...) with a reason that is not an ExtractSkip member at {', '.join(loose)}"
