"""The offline judge on a context of megabytes: read in work linear in its length, trimmed beyond
`max_context_chars` as the LLM judge trims, and the record says so; a claim the trimmed context does not
support is not a sure hallucination."""

from __future__ import annotations

import logging
from typing import Any, SupportsIndex

import pytest

from tracescore.model import MetricStatus, RagRecord, Verdict
from tracescore.score import evaluate
from tracescore.score.judges import OfflineJudge, OfflineJudgeSettings
from tracescore.score.judges._offline import answer_verdicts
from tracescore.score.judges._offline_text import _blocks
from tracescore.score.metrics._faithfulness import VERDICTS_TASK, VerdictsInput

FILLER = "The Oberoi Group is a hotel company with its head office in Delhi. "
LATE_FACT = "The Oberoi Group was founded in 1934 by Mohan Singh Oberoi."
QUESTION = "When was the Oberoi Group founded?"


class _CountingStr(str):
    """A str that counts the characters of every copy made of it (slices, strips), a measure of work."""

    copied = 0

    def _counted(self, value: str) -> _CountingStr:
        _CountingStr.copied += len(value)
        return _CountingStr(value)

    def __getitem__(self, index: SupportsIndex | slice) -> _CountingStr:
        return self._counted(str.__getitem__(self, index))

    def strip(self, chars: str | None = None) -> _CountingStr:
        return self._counted(str.strip(self, chars))

    def lstrip(self, chars: str | None = None) -> _CountingStr:
        return self._counted(str.lstrip(self, chars))

    def splitlines(self, keepends: bool = False) -> list[Any]:
        return [self._counted(line) for line in str.splitlines(self, keepends)]


@pytest.mark.parametrize("spaces", ["", "   "])
def test_a_long_line_is_cut_into_blocks_in_work_linear_in_its_length(spaces: str) -> None:
    line = (FILLER + spaces) * 6_000  # one line of ~400k characters, no newline
    _CountingStr.copied = 0
    blocks = list(_blocks(_CountingStr(line)))
    assert "".join(blocks).replace(" ", "") == line.replace(" ", "")
    # Each character is copied a few times (the line, its strip, its block); cutting the rest off the line
    # block by block copied it once per block: ~200 times here.
    assert _CountingStr.copied < 4 * len(line), _CountingStr.copied


def _input(context: str, *claims: str) -> VerdictsInput:
    return VerdictsInput(question=QUESTION, context=context, claims=list(claims))


async def test_a_context_over_the_cap_is_trimmed_and_the_judgement_says_so() -> None:
    context = FILLER * 100 + LATE_FACT  # the fact is past the first 2,000 characters
    judge = OfflineJudge(settings=OfflineJudgeSettings(max_context_chars=2_000))
    judged = await judge.run(
        VERDICTS_TASK,
        _input(context, "It was founded in 1934.", "The Oberoi Group is not a hotel company."),
    )
    late, contradicted = judged.output.verdicts
    assert any("trimmed from" in w and str(len(context)) in w for w in judged.warnings), judged.warnings
    # What the cut removed is not evidence of a hallucination: said, and not sure.
    assert late.verdict is Verdict.NO_EVIDENCE
    assert late.confidence is not None and late.confidence < 0.5
    assert "trimmed" in late.reason
    # What the kept text states otherwise stays a sure contradiction.
    assert contradicted.verdict is Verdict.CONTRADICTORY
    assert contradicted.confidence is None or contradicted.confidence >= 0.5
    assert "trimmed" not in contradicted.reason


async def test_a_normal_record_is_judged_whole_and_unchanged() -> None:
    data = _input(FILLER * 3 + LATE_FACT, "It was founded in 1934.", "Its head office is in Mumbai.")
    judged = await OfflineJudge().run(VERDICTS_TASK, data)
    assert judged.warnings == ()
    assert judged.output.model_dump() == answer_verdicts(data)


def test_evaluate_trims_at_the_setting_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_OFFLINE_JUDGE_MAX_CONTEXT_CHARS", "5000")
    context = FILLER * 200 + LATE_FACT  # ~13,000 characters
    record = RagRecord(query=QUESTION, contexts=(context,), answer="The Oberoi Group was founded in 1934.")
    results = {r.metric: r for r in evaluate(record)}
    faithfulness = results["faithfulness"]
    assert faithfulness.status is MetricStatus.OK, faithfulness.reason
    for result in (faithfulness, results["context_relevance"]):
        assert any("trimmed from" in w for w in result.warnings), (result.metric, result.warnings)
    # Unsupported only because the evidence was cut off: not a sure unsupported claim, and it says why (the
    # score still counts what the kept text supports: the record's warning says it was trimmed).
    (claim,) = faithfulness.details["claims"]
    assert claim["verdict"] == Verdict.NO_EVIDENCE and claim["confidence"] < 0.5, claim
    assert "trimmed" in claim["reason"]
    assert faithfulness.details["unsupported_claims"] == 0
    monkeypatch.delenv("TRACESCORE_OFFLINE_JUDGE_MAX_CONTEXT_CHARS")
    whole = {r.metric: r for r in evaluate(record)}["faithfulness"]
    assert not whole.warnings and whole.score == 1.0


async def test_a_stream_of_huge_contexts_is_one_warning_not_one_a_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each trimmed call logged a warning: a consumer fed huge contexts flooded its log. The first trim of a
    task's field is a warning (once a process: an earlier test may have had it), later ones debug; each
    judgement still carries its own warning."""
    judge = OfflineJudge(settings=OfflineJudgeSettings(max_context_chars=2_000))
    with caplog.at_level(logging.DEBUG, logger="tracescore"):
        for _ in range(3):
            judged = await judge.run(
                VERDICTS_TASK, _input(FILLER * 100 + LATE_FACT, "It was founded in 1934.")
            )
            assert any("trimmed from" in w for w in judged.warnings), judged.warnings
    said = [r for r in caplog.records if "trimmed to 2000 chars" in r.getMessage()]
    assert len(said) == 3, [r.getMessage() for r in caplog.records]
    assert sum(r.levelno >= logging.WARNING for r in said) <= 1, [(r.levelname, r.getMessage()) for r in said]
