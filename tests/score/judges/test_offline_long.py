"""The offline judge on long answers: every sentence a claim, aligned with the passage sentences it rests on,
checked against them; what it cannot check is said as such, not called invented."""

from __future__ import annotations

import pytest

from tracescore.model import MetricStatus, RagRecord, Verdict
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.score.metrics._analysis import ANALYSIS_TASK, AnalysisInput
from tracescore.score.metrics._faithfulness import VERDICTS_TASK, ClaimVerdict, VerdictsInput

SUMMARIZE = "Summarize the following passage."
PASSAGE = (
    "The city council of Northbridge approved a new public library on Tuesday. "
    "The library will cost 12 million dollars and is due to open in March 2026. "
    "It was designed by the architect Maria Lindqvist, who also built the town's concert hall. "
    "A regional grant will pay for most of the construction, and a local bond will cover the rest. "
    "The old library on Mill Street will not close until the new building opens. "
    "Residents had asked for a larger reading room and longer opening hours for years. "
    "Mayor Tom Reyes said the project would create 80 jobs."
)
# Five sentences of a faithful summary, each restating the passage in other words.
FAITHFUL = [
    "Northbridge's city council has approved a new public library.",
    "The library is expected to cost 12 million dollars and to open in March 2026.",
    "The architect Maria Lindqvist, who built the concert hall, designed it.",
    "The old library on Mill Street will not close before the new building opens.",
    "According to Mayor Tom Reyes, the project will create 80 jobs.",
]


async def verdicts(*claims: str, question: str = SUMMARIZE, context: str = PASSAGE) -> list[ClaimVerdict]:
    judged = await OfflineJudge().run(
        VERDICTS_TASK, VerdictsInput(question=question, context=context, claims=list(claims))
    )
    return judged.output.verdicts


async def faithfulness(*sentences: str) -> tuple[str | None, list[dict]]:
    record = RagRecord(query=SUMMARIZE, contexts=(PASSAGE,), answer=" ".join(sentences))
    result = await Faithfulness().score(record, OfflineJudge())
    assert result.status is MetricStatus.OK, result.reason
    return result.label, result.details["claims"]


def unsupported(verdict: str, confidence: float | None) -> bool:
    """What the label rule counts: NO_EVIDENCE or CONTRADICTORY at confidence 0.5 or more."""
    sure = confidence is None or confidence >= 0.5
    return verdict in (Verdict.NO_EVIDENCE, Verdict.CONTRADICTORY) and sure


async def test_a_faithful_summary_of_five_sentences_is_faithful() -> None:
    label, claims = await faithfulness(*FAITHFUL)
    assert label == "faithful", [(c["verdict"], c["reason"]) for c in claims]
    assert all(c["evidence"] for c in claims), "every sentence is aligned with the passage"


async def test_a_paraphrase_merging_two_distant_sentences_is_supported_by_both() -> None:
    merged = "Mayor Tom Reyes said the library that the council approved on Tuesday would create 80 jobs."
    (verdict,) = await verdicts(merged)
    assert verdict.verdict is Verdict.FULLY_SUPPORTED, verdict.reason
    assert "approved a new public library" in verdict.evidence and "80 jobs" in verdict.evidence


@pytest.mark.parametrize(
    ("changed", "sentence", "why"),
    [
        ("number", "The library is expected to cost 15 million dollars and to open in March 2026.", "15"),
        ("date", "The library is expected to cost 12 million dollars and to open in May 2026.", "May"),
        ("name", "The architect Maria Olsen, who built the concert hall, designed it.", "Olsen"),
        ("negation", "The old library on Mill Street will close before the new building opens.", "negat"),
        # A figure the passage states, but about something else (the jobs, not the cost).
        ("figure from elsewhere", "The library is expected to cost 80 million dollars.", "80"),
        ("name from elsewhere", "The architect Tom Reyes, who built the concert hall, designed it.", "Tom"),
    ],
)
async def test_one_changed_fact_in_five_sentences_is_caught(changed: str, sentence: str, why: str) -> None:
    index = 3 if changed == "negation" else 2 if "architect" in sentence else 1
    answer = [*FAITHFUL[:index], sentence, *FAITHFUL[index + 1 :]]
    label, claims = await faithfulness(*answer)
    assert label == "hallucinated", changed
    flagged = [i for i, claim in enumerate(claims) if unsupported(claim["verdict"], claim["confidence"])]
    assert flagged == [index], [(c["verdict"], c["confidence"], c["reason"]) for c in claims]
    assert why in claims[index]["reason"], claims[index]["reason"]


async def test_a_claim_it_cannot_align_is_reported_as_unchecked_not_invented() -> None:
    opinion = "The project shows a lasting commitment to culture and education among townspeople."
    (verdict,) = await verdicts(opinion)
    assert verdict.verdict is Verdict.NO_EVIDENCE
    assert verdict.confidence is not None and verdict.confidence < 0.5
    assert verdict.reason.startswith("Not checked") and verdict.evidence == ""
    label, _ = await faithfulness(*FAITHFUL, opinion)
    assert label == "faithful", "an unchecked sentence beside checked ones does not make the answer invented"


async def test_in_an_answer_to_a_question_a_sentence_the_context_does_not_state_is_an_addition() -> None:
    # The question anchors the answer in the context: a sentence the context does not state is added.
    answer = ["The library is due to open in March 2026.", "Registered charities may borrow books for free."]
    question = "When will the new library in Northbridge open?"
    opens, added = await verdicts(*answer, question=question)
    assert not unsupported(opens.verdict, opens.confidence), opens.reason
    assert unsupported(added.verdict, added.confidence), added.reason
    # The same sentence in a summary (whose question anchors nothing) is one the judge cannot check.
    (unanchored,) = await verdicts(answer[1])
    assert unanchored.reason.startswith("Not checked")


@pytest.mark.parametrize(
    "claim",
    [
        "Die neue Bibliothek kostet zwölf Millionen und öffnet erst nach dem Umzug der alten Bücherei.",
        "Новая библиотека будет стоить двенадцать миллионов долларов.",
    ],
)
async def test_a_claim_in_a_language_the_context_does_not_use_is_unchecked(claim: str) -> None:
    (verdict,) = await verdicts(claim)
    assert verdict.verdict is Verdict.NO_EVIDENCE and verdict.confidence is not None
    assert verdict.confidence < 0.5 and "another language" in verdict.reason


async def test_an_invented_sentence_with_names_the_passage_lacks_is_still_invented() -> None:
    (verdict,) = await verdicts("The library will be run by the Carnegie Foundation from Boston.")
    assert unsupported(verdict.verdict, verdict.confidence) and "Carnegie" in verdict.reason


async def test_sentences_that_only_introduce_the_answer_make_no_claim() -> None:
    sentences = ["Here is a short summary of the passage:", *FAITHFUL[:2]]
    analysis = await OfflineJudge().run(
        ANALYSIS_TASK, AnalysisInput(question=SUMMARIZE, answer_sentences=sentences)
    )
    assert [group.claims for group in analysis.output.sentences] == [[], [FAITHFUL[0]], [FAITHFUL[1]]]


async def test_a_count_of_what_the_passage_lists_is_not_an_invented_number() -> None:
    (verdict,) = await verdicts(
        "The passage describes two sources of money: a regional grant and a local bond."
    )
    assert not unsupported(verdict.verdict, verdict.confidence), verdict.reason


async def test_a_negation_stated_in_another_sentence_is_not_a_contradiction() -> None:
    # Merged from the cost sentence and the Mill Street one: the negation is in the second.
    (verdict,) = await verdicts(
        "The 12 million dollar library opens in March 2026, and the old one on Mill Street will not close "
        "until then."
    )
    assert not unsupported(verdict.verdict, verdict.confidence), verdict.reason


async def test_a_20000_character_answer_is_judged_within_the_claim_limit() -> None:
    sentences = [
        f"Report {i} says the council of Northbridge approved a new public library." for i in range(300)
    ]
    answer = " ".join(sentences)[:20_000]
    record = RagRecord(query=SUMMARIZE, contexts=(PASSAGE,), answer=answer)
    result = await Faithfulness().score(record, OfflineJudge())
    assert result.status is MetricStatus.OK
    assert result.details["total_claims"] == Faithfulness().max_claims
    assert result.details["capped"]["answer_sentences"] > Faithfulness().max_claims
