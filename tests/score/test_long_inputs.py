"""A 100k-character context is trimmed before an LLM judge sees it, and the result says so."""

from __future__ import annotations

from tracescore.model import MetricStatus, RagRecord
from tracescore.score.judges import OpenAIJudge, OpenAIJudgeSettings
from tracescore.score.metrics import ContextRelevance, Faithfulness, evaluate_record
from tracescore.testing.judge_server import JudgeServer


async def test_huge_context_is_trimmed_with_a_recorded_warning() -> None:
    context = "The Oberoi Group is a hotel company with its head office in Delhi. " * 1500  # ~100k chars
    record = RagRecord(query="Where is the head office?", contexts=(context,), answer="It is in Delhi.")
    with JudgeServer() as server:
        judge = OpenAIJudge(
            OpenAIJudgeSettings(
                base_url=server.base_url, api_key="x", max_context_chars=8_000, retry_base_s=0.001
            )
        )
        faithfulness, relevance = await evaluate_record(record, [Faithfulness(), ContextRelevance()], judge)
        sent = max(len(str(r["messages"])) for r in server.chat_requests)

    assert faithfulness.status is MetricStatus.OK and faithfulness.score is not None
    assert relevance.status is MetricStatus.OK
    for result in (faithfulness, relevance):
        assert any("trimmed" in w and "100" in w for w in result.warnings), result.warnings
    assert sent < 20_000, "the judge never receives the whole 100k context"
