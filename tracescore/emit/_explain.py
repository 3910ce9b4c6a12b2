"""Words for a result: the judge's own reason, or one built from the claims and their verdicts."""

from __future__ import annotations

from tracescore._plural import counted
from tracescore.model import FaithfulnessClaim, FaithfulnessDetails, MetricResult, MetricStatus, Verdict

__all__ = ["explanation"]

_MAX_QUOTED = 3
_QUOTE_CHARS = 160


def explanation(result: MetricResult) -> str | None:
    if result.reason:
        return result.reason
    if result.status is not MetricStatus.OK:
        return None
    claims = FaithfulnessDetails.of(result).claims
    if claims:
        return _claims_explanation(claims)
    relevant, total = result.details.get("relevant_chunks"), result.details.get("total_chunks")
    if isinstance(relevant, int) and isinstance(total, int):
        are = "is" if relevant == 1 else "are"
        return f"{relevant} of {counted(total, 'retrieved chunk')} {are} relevant to the question."
    return None


def _claims_explanation(claims: list[FaithfulnessClaim]) -> str:
    doubtful = [c for c in claims if c.verdict is not Verdict.FULLY_SUPPORTED]
    supported = len(claims) - len(doubtful)
    text = f"{supported} of {counted(len(claims), 'claim')} fully supported by the retrieved context"
    if not doubtful:
        return text + "."
    quoted = "; ".join(f"{c.verdict.value.lower()}: {_clip(c.claim)}" for c in doubtful[:_MAX_QUOTED])
    more = f" (+{len(doubtful) - _MAX_QUOTED} more)" if len(doubtful) > _MAX_QUOTED else ""
    return f"{text}. {quoted}{more}"


def _clip(text: str) -> str:
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 1] + "…"
