"""Faithfulness scoring: verdict weights, modes, and explicit results where there is nothing to score."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from tracescore.model import MetricStatus, RagRecord, Usage, Verdict
from tracescore.score.judges import JudgeError, Judgement, JudgeTask
from tracescore.score.metrics import Faithfulness
from tracescore.score.metrics._analysis import AnswerAnalysis, SentenceClaims
from tracescore.score.metrics._faithfulness import ClaimVerdict, VerdictsInput, VerdictsOutput

RECORD = RagRecord(
    id="r1",
    query="Who wrote Hamlet and when?",
    contexts=("Shakespeare wrote Hamlet around 1600.",),
    answer="Shakespeare wrote Hamlet. It was written in 1700. He lived in Paris.",
)


class ScriptedJudge:
    """A Judge that answers claims with one claim per sentence and verdicts from a list."""

    name = "scripted"

    def __init__(self, verdicts: Sequence[Verdict], *, claims_per_sentence: int = 1) -> None:
        self._verdicts = list(verdicts)
        self._per_sentence = claims_per_sentence
        self.calls: list[str] = []
        self.verdict_inputs: list[VerdictsInput] = []

    async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
        self.calls.append(task.name)
        usage = Usage(calls=1, prompt_tokens=10, completion_tokens=5)
        if task.name == "answer.analysis":
            groups = [
                SentenceClaims(sentence_index=i, claims=[s] * self._per_sentence)
                for i, s in enumerate(data.answer_sentences)  # type: ignore[attr-defined]
            ]
            return Judgement(AnswerAnalysis(sentences=groups), usage)
        assert isinstance(data, VerdictsInput)
        self.verdict_inputs.append(data)
        out = [
            ClaimVerdict(claim_index=i, verdict=v, reason=f"because {i}", evidence="Shakespeare wrote Hamlet")
            for i, v in enumerate(self._verdicts)
        ]
        return Judgement(VerdictsOutput(verdicts=out), usage)


V = Verdict


async def test_score_is_the_clamped_mean_of_verdict_weights() -> None:
    judge = ScriptedJudge([V.FULLY_SUPPORTED, V.PARTIALLY_SUPPORTED, V.NO_EVIDENCE])
    result = await Faithfulness().score(RECORD, judge)
    assert result.status is MetricStatus.OK
    assert result.score == pytest.approx(0.5)
    assert judge.calls == ["answer.analysis", "faithfulness.verdicts"], "two calls whatever the claim count"
    assert result.usage == Usage(calls=2, prompt_tokens=20, completion_tokens=10)
    details = result.details
    assert details["total_claims"] == 3
    assert details["verdict_counts"] == {
        "FULLY_SUPPORTED": 1, "PARTIALLY_SUPPORTED": 1, "NO_EVIDENCE": 1, "CONTRADICTORY": 0,
    }  # fmt: skip
    first = details["claims"][0]
    assert (
        first["sentence"] == "Shakespeare wrote Hamlet." and first["evidence"] == "Shakespeare wrote Hamlet"
    )


async def test_contradictions_pull_the_score_down_but_not_below_zero() -> None:
    result = await Faithfulness().score(
        RECORD, ScriptedJudge([V.CONTRADICTORY, V.CONTRADICTORY, V.NO_EVIDENCE])
    )
    assert result.score == 0.0 and result.label == "hallucinated"


async def test_strict_mode_counts_no_evidence_as_contradiction() -> None:
    verdicts = [V.FULLY_SUPPORTED, V.FULLY_SUPPORTED, V.NO_EVIDENCE]
    lenient = await Faithfulness().score(RECORD, ScriptedJudge(verdicts))
    strict = await Faithfulness(strict_mode=True).score(RECORD, ScriptedJudge(verdicts))
    assert lenient.score == pytest.approx(2 / 3)
    assert strict.score == pytest.approx(1 / 3)


async def test_binary_mode_is_supported_over_total() -> None:
    verdicts = [V.FULLY_SUPPORTED, V.PARTIALLY_SUPPORTED, V.CONTRADICTORY]
    result = await Faithfulness(binary=True).score(RECORD, ScriptedJudge(verdicts))
    assert result.score == pytest.approx(1 / 3)


async def test_custom_verdict_scores() -> None:
    scores = {V.FULLY_SUPPORTED: 1.0, V.PARTIALLY_SUPPORTED: 1.0, V.NO_EVIDENCE: 0.0, V.CONTRADICTORY: 0.0}
    result = await Faithfulness(verdict_scores=scores).score(
        RECORD, ScriptedJudge([V.FULLY_SUPPORTED, V.PARTIALLY_SUPPORTED, V.NO_EVIDENCE])
    )
    assert result.score == pytest.approx(2 / 3)


async def test_a_claim_the_judge_skipped_counts_as_unsupported() -> None:
    result = await Faithfulness().score(RECORD, ScriptedJudge([V.FULLY_SUPPORTED]))
    assert result.score == pytest.approx(1 / 3)
    assert result.details["claims"][2]["reason"] == "the judge returned no verdict for this claim"


async def test_claims_keep_their_sentence_and_go_to_one_verdict_call() -> None:
    judge = ScriptedJudge([V.FULLY_SUPPORTED] * 6, claims_per_sentence=2)
    result = await Faithfulness().score(RECORD, judge)
    assert result.details["total_claims"] == 6
    assert len(judge.verdict_inputs) == 1 and len(judge.verdict_inputs[0].claims) == 6
    assert [c["sentence"] for c in result.details["claims"]][:2] == ["Shakespeare wrote Hamlet."] * 2


@pytest.mark.parametrize(
    ("answer", "contexts", "reason"),
    [
        ("", ("ctx",), "the answer is empty"),
        ("   ", ("ctx",), "the answer is empty"),
        ("Shakespeare.", (), "no retrieved context"),
        ("Shakespeare.", ("  ",), "no retrieved context"),
    ],
)
async def test_nothing_to_check_is_an_explicit_not_applicable(
    answer: str, contexts: tuple, reason: str
) -> None:
    judge = ScriptedJudge([])
    result = await Faithfulness().score(
        RECORD.model_copy(update={"answer": answer, "contexts": contexts}), judge
    )
    assert result.score is None and result.status is MetricStatus.NOT_APPLICABLE
    assert reason in result.reason
    assert judge.calls == [], "no judge call is spent on a record that cannot be scored"


async def test_an_answer_without_claims_is_not_applicable_with_a_reason() -> None:
    class NoClaims(ScriptedJudge):
        async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
            return Judgement(AnswerAnalysis(sentences=[]), Usage(calls=1))

    result = await Faithfulness().score(RECORD, NoClaims([]))
    assert result.status is MetricStatus.NOT_APPLICABLE and result.score is None
    assert "no checkable claim" in result.reason and result.usage.calls == 1


async def test_a_judge_error_becomes_an_error_result_with_the_cause_and_usage() -> None:
    class Failing(ScriptedJudge):
        async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
            if task.name == "faithfulness.verdicts":
                raise JudgeError("HTTP 429 after 4 attempts", usage=Usage(calls=4))
            return await super().run(task, data)

    result = await Faithfulness().score(RECORD, Failing([]))
    assert result.status is MetricStatus.ERROR and result.score is None
    assert result.reason == "HTTP 429 after 4 attempts"
    assert result.usage.calls == 5


async def test_one_instance_serves_concurrent_records() -> None:
    import asyncio

    metric = Faithfulness()
    good = ScriptedJudge([V.FULLY_SUPPORTED] * 3)
    bad = ScriptedJudge([V.CONTRADICTORY] * 3)
    results = await asyncio.gather(*(metric.score(RECORD, j) for j in [good, bad] * 10))
    assert [r.score for r in results] == [1.0, 0.0] * 10


async def test_claims_per_answer_are_capped_and_the_cap_is_recorded() -> None:
    from tracescore.model import RagRecord
    from tracescore.score import OfflineJudge
    from tracescore.score.metrics import Faithfulness

    answer = " ".join(f"Unit {i} has a {i + 3} hour battery." for i in range(30))
    record = RagRecord(query="Which units?", contexts=("Unit 1 has a 4 hour battery.",), answer=answer)
    result = await Faithfulness(max_claims=10).score(record, OfflineJudge())
    assert result.details["total_claims"] == 10
    assert result.details["capped"] == {
        "max_claims": 10, "answer_sentences": 30, "sentences_judged": 10, "claims_judged": 10,
    }  # fmt: skip
    assert any("max_claims=10" in warning for warning in result.warnings)


def test_max_claims_must_be_positive() -> None:
    import pytest

    from tracescore.score.metrics import Faithfulness

    with pytest.raises(ValueError, match="max_claims"):
        Faithfulness(max_claims=0)


# --- the label rule ---------------------------------------------------------------------------------------


def _judge_with_confidence(verdicts: Sequence[tuple[Verdict, float | None]]) -> ScriptedJudge:
    judge = ScriptedJudge([v for v, _ in verdicts])
    original = judge.run

    async def run(task: JudgeTask, data: BaseModel) -> Judgement:
        judgement = await original(task, data)
        if task.name == "faithfulness.verdicts":
            for verdict, (_, confidence) in zip(judgement.output.verdicts, verdicts, strict=True):
                verdict.confidence = confidence
        return judgement

    judge.run = run  # type: ignore[method-assign]
    return judge


async def test_one_invented_claim_beside_true_ones_is_hallucinated_by_default() -> None:
    verdicts = [V.FULLY_SUPPORTED, V.FULLY_SUPPORTED, V.NO_EVIDENCE]
    result = await Faithfulness().score(RECORD, ScriptedJudge(verdicts))
    assert result.score == pytest.approx(2 / 3) and result.label == "hallucinated"
    assert result.details["unsupported_claims"] == 1 and result.details["label_rule"] == "any_unsupported"
    lenient = await Faithfulness(label_rule="threshold").score(RECORD, ScriptedJudge(verdicts))
    assert lenient.score == result.score and lenient.label == "faithful"


async def test_an_unsure_unsupported_verdict_does_not_decide_the_label() -> None:
    verdicts = [(V.FULLY_SUPPORTED, 0.9), (V.FULLY_SUPPORTED, None), (V.NO_EVIDENCE, 0.3)]
    unsure = await Faithfulness().score(RECORD, _judge_with_confidence(verdicts))
    assert unsure.label == "faithful" and unsure.details["unsupported_claims"] == 0
    assert unsure.details["claims"][2]["confidence"] == 0.3
    strict = await Faithfulness(min_confidence=0.2).score(RECORD, _judge_with_confidence(verdicts))
    assert strict.label == "hallucinated"


async def test_partial_support_alone_is_not_hallucinated_but_a_low_score_always_is() -> None:
    partial = await Faithfulness().score(
        RECORD, ScriptedJudge([V.FULLY_SUPPORTED, V.PARTIALLY_SUPPORTED] * 2)
    )
    assert partial.label == "faithful"
    verdicts = [V.NO_EVIDENCE, V.NO_EVIDENCE, V.FULLY_SUPPORTED]  # 1/3
    assert (await Faithfulness(label_rule="threshold").score(RECORD, ScriptedJudge(verdicts))).label == (
        "hallucinated"
    ), "the default threshold is 0.4 (chosen on held-out halves)"
    lenient = Faithfulness(label_rule="threshold", threshold=0.25)
    assert (await lenient.score(RECORD, ScriptedJudge(verdicts))).label == "faithful"
    lowest = await Faithfulness(label_rule="threshold").score(
        RECORD, ScriptedJudge([V.NO_EVIDENCE, V.NO_EVIDENCE, V.PARTIALLY_SUPPORTED])
    )
    assert lowest.label == "hallucinated"


def test_faithfulness_label_is_the_same_function_everywhere() -> None:
    from tracescore.score import faithfulness_label

    claims = [{"verdict": "FULLY_SUPPORTED"}, {"verdict": "CONTRADICTORY", "confidence": 0.8}]
    assert faithfulness_label(0.5, claims) == "hallucinated"
    assert faithfulness_label(0.5, claims, rule="threshold") == "faithful"
    assert faithfulness_label(0.2, [{"verdict": "FULLY_SUPPORTED"}], rule="threshold") == "hallucinated"
    assert faithfulness_label(0.4, [{"verdict": "PARTIALLY_SUPPORTED"}]) == "faithful", (
        "default threshold 0.4"
    )


def test_bad_label_rule_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="label_rule"):
        Faithfulness(label_rule="majority")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_confidence"):
        Faithfulness(min_confidence=1.5)


async def test_each_claim_names_the_document_its_evidence_is_in() -> None:
    """The offline judge quotes a context sentence; an LLM judge may quote loosely (spacing, case, a word
    left out): the claim's context_index is the document the quote comes from, None when it quotes nothing
    the documents hold."""
    from tracescore.score.judges import OfflineJudge

    record = RagRecord(
        query="How long does the Aurora X2 battery last, and what does it weigh?",
        contexts=(
            "Aurora support is open on weekdays.",
            "The Aurora X2 battery lasts 14 hours.",
            "It weighs 1.2 kg.",
        ),
        answer="The battery lasts 14 hours. It weighs 1.2 kg.",
    )
    result = await Faithfulness().score(record, OfflineJudge())
    assert [c["context_index"] for c in result.details["claims"]] == [1, 2]

    class Quoting(ScriptedJudge):
        async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
            judged = await super().run(task, data)
            if task.name != "faithfulness.verdicts":
                return judged
            quotes = ["the  AURORA x2 battery lasts 14", "Aurora X2 battery lasts hours", "nothing like it"]
            pairs = zip(judged.output.verdicts, quotes, strict=True)
            verdicts = [verdict.model_copy(update={"evidence": quote}) for verdict, quote in pairs]
            return Judgement(output=VerdictsOutput(verdicts=verdicts), usage=judged.usage)

    loose = record.model_copy(update={"answer": "It lasts long. It is light. It is blue."})
    result = await Faithfulness().score(loose, Quoting([Verdict.FULLY_SUPPORTED] * 3))
    assert [c["context_index"] for c in result.details["claims"]] == [1, 1, None]


async def test_a_quote_of_several_aligned_sentences_names_the_document_of_the_first() -> None:
    """The offline judge quotes the sentences a claim is aligned with, best first, joined by an ellipsis;
    they may sit in different documents (a follow-up's evidence across turns): the first one decides."""

    class Quoting(ScriptedJudge):
        async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
            judged = await super().run(task, data)
            if task.name != "faithfulness.verdicts":
                return judged
            quote = "It weighs 1.2 kg. … The Aurora X2 battery lasts 14 hours."
            verdicts = [v.model_copy(update={"evidence": quote}) for v in judged.output.verdicts]
            return Judgement(output=VerdictsOutput(verdicts=verdicts), usage=judged.usage)

    record = RagRecord(
        query="What does it weigh?",
        contexts=("The Aurora X2 battery lasts 14 hours.", "It weighs 1.2 kg."),
        answer="It weighs 1.2 kg.",
    )
    result = await Faithfulness().score(record, Quoting([Verdict.FULLY_SUPPORTED]))
    assert [c["context_index"] for c in result.details["claims"]] == [1]
