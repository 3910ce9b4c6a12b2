"""Per-purpose decisions on a trace id: every instance and every replay decides alike."""

from __future__ import annotations

from hashlib import blake2b

__all__ = ["keep", "position", "within"]

_SPAN = 1 << 64


def position(trace_id: str, purpose: str) -> int:
    """The trace's place in [0, 2**64) for `purpose`.

    A keyed hash of the whole id, one key per purpose, so the decisions for different purposes are
    independent (the baseline sample is not the traces the rate kept first), and ids that are not random
    in every bit (time-prefixed ones) still spread evenly.
    """
    digest = blake2b(trace_id.lower().encode(), digest_size=8, key=purpose.encode()).digest()
    return int.from_bytes(digest, "big")


def within(at: int, rate: float) -> bool:
    """Whether a position falls in the first `rate` share; shares nest (kept at 0.1 means kept at 0.5)."""
    return rate >= 1.0 or at < round(max(0.0, rate) * _SPAN)


def keep(trace_id: str, purpose: str, rate: float) -> bool:
    if rate >= 1.0:
        return True
    return rate > 0.0 and within(position(trace_id, purpose), rate)
