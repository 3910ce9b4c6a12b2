"""Outputs that fit Kafka's message limit by construction.

A record's `details` copy claims and evidence, so a huge answer or context would make a record larger than
the broker accepts, and a rejected output used to stop the consumer for good. Here a record is shrunk until
it fits: long strings clipped, long lists cut, and what was cut is said in `details["truncated"]`.
"""

from __future__ import annotations

from typing import Any

from tracescore._plural import counted
from tracescore.model import EvaluationRecord

__all__ = ["clip", "fit_record"]

# Successive (max string chars, max list items) tried on `details` until the record fits.
_STEPS = ((4000, 200), (1000, 50), (300, 20), (100, 5))
_REASON_CHARS = 2000


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    marker = f"… [{counted(len(text) - limit, 'more character')}]"
    return text[: max(0, limit - len(marker))] + marker


def fit_record(record: EvaluationRecord, max_bytes: int) -> tuple[bytes, bool]:
    """(JSON value, whether anything was cut): the record as is if it fits, else with its details and
    reason shrunk step by step, and as a last resort its details replaced by the truncation note."""
    value = record.model_dump_json().encode()
    if len(value) <= max_bytes:
        return value, False
    original = len(value)
    reason = clip(record.reason, _REASON_CHARS) if record.reason else record.reason
    for max_chars, max_items in _STEPS:
        details = _shrink(record.details, max_chars, max_items)
        details["truncated"] = {"original_bytes": original, "max_chars": max_chars, "max_items": max_items}
        value = record.model_copy(update={"details": details, "reason": reason}).model_dump_json().encode()
        if len(value) <= max_bytes:
            return value, True
    note = {"truncated": {"original_bytes": original, "details_dropped": True}}
    value = record.model_copy(update={"details": note, "reason": clip(reason or "", 200) or None})
    return value.model_dump_json().encode(), True


def _shrink(value: Any, max_chars: int, max_items: int) -> Any:
    if isinstance(value, str):
        return clip(value, max_chars)
    if isinstance(value, dict):
        return {k: _shrink(v, max_chars, max_items) for k, v in list(value.items())[:max_items]}
    if isinstance(value, list | tuple):
        kept = [_shrink(v, max_chars, max_items) for v in value[:max_items]]
        if len(value) > max_items:
            kept.append(f"[{counted(len(value) - max_items, 'more item')}]")
        return kept
    return value
