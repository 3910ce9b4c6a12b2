"""An answer never supports itself: which tool or retrieval results are not evidence for the answer.

A tool whose arguments carry the answer (`send_reply(body=answer)`), one that returns the answer itself
rather than documents (`final_answer`, a sub-agent's reply), and a tool or retrieval that ran after the
answer was written (a lookup of sources for it) would make any answer look supported.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from tracescore.extract._read import parse_json
from tracescore.extract._tools import tool_result_texts
from tracescore.model import DecodedSpan

__all__ = ["AFTER_THE_ANSWER", "normal", "not_evidence", "ran_after"]

AFTER_THE_ANSWER = "it ran after the answer was written"
_MAX_STRINGS = 256  # a tool's arguments are searched for the answer this far, no further


def normal(text: str | None) -> str:
    """`text` compared as words: whitespace and case do not count."""
    return " ".join(text.split()).casefold() if text else ""


def ran_after(span: DecodedSpan, answered_by: DecodedSpan | None) -> bool:
    """Whether `span` started after the call that wrote the answer (when that call is known) ended."""
    return answered_by is not None and span.start_time_unix_nano > answered_by.end_time_unix_nano


def not_evidence(
    tool: DecodedSpan, arguments: Any, result: Any, answer: str, answered_by: DecodedSpan | None
) -> str | None:
    """Why a tool's result cannot support the answer (`answer` as `normal` gives it), or None."""
    if ran_after(tool, answered_by):
        return AFTER_THE_ANSWER
    if not answer:
        return None
    if any(answer in normal(text) for text in _strings(parse_json(arguments))):
        return "its arguments carry the answer"
    texts, document_like = tool_result_texts(result)
    if not document_like and len(texts) == 1 and normal(texts[0]) == answer:
        return "it returns the answer itself"
    return None


def _strings(value: Any) -> Iterator[str]:
    """The strings in a parsed JSON value, breadth-first, at most `_MAX_STRINGS` values visited."""
    queue, visited = deque([value]), 0
    while queue and visited < _MAX_STRINGS:
        item = queue.popleft()
        visited += 1
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            queue.extend(item.values())
        elif isinstance(item, list):
            queue.extend(item)
