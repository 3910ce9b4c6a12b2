"""The offline judge on the shapes a healthy chat assistant's faithful answers take: citation markers, list
lead-ins, quotes attributed to the documentation, dates written another way. Each shape was flagged on
every such faithful answer in a walk of a healthy app (notes: newuser24); the same answer with an invented
fact is still flagged."""

from __future__ import annotations

import pytest

from tracescore.model import MetricStatus, RagRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness

PLAN = "The Pro plan costs $1,000 per year and includes 10 seats. Extra seats cost $50 each per year."
REFUND = "Refunds are available within 30 days of purchase. After 30 days, no refund is given."
LIMITS = "The API allows 600 requests per minute per key. Bursts above the limit receive HTTP 429."
RELEASE = "Version 4.2 was released on 2025-03-14. It added single sign-on and audit logs."
SLA = "The uptime commitment is 99.9% per calendar month. Credits of 10% are issued for each breach."


async def label(
    answer: str, *contexts: str, question: str = "What does the documentation say?"
) -> str | None:
    result = await Faithfulness().score(
        RagRecord(query=question, contexts=contexts, answer=answer), OfflineJudge()
    )
    assert result.status is MetricStatus.OK, result.reason
    return result.label


@pytest.mark.parametrize(
    ("answer", "contexts"),
    [
        (
            "The Pro plan costs $1,000 per year [1]. Refunds are available within 30 days of purchase [2].",
            (PLAN, REFUND),
        ),
        (
            "The API allows 600 requests per minute per key [1], and bursts above it receive HTTP 429 [1].",
            (LIMITS,),
        ),
        ("Credits of 10% are issued for each breach (source: [doc 1]).", (SLA,)),
        ("The Pro plan includes 10 seats [1][2] and extra seats cost $50 each per year [^1].", (PLAN,)),
        ("Refunds are available within 30 days of purchase [1, 2].", (REFUND,)),
    ],
)
async def test_citation_markers_are_no_part_of_the_claim(answer: str, contexts: tuple[str, ...]) -> None:
    assert await label(answer, *contexts) == "faithful"


async def test_a_cited_invented_fact_is_still_flagged() -> None:
    assert await label("The Pro plan costs $1,200 per year [1].", PLAN) == "hallucinated"


@pytest.mark.parametrize(
    "answer",
    [
        "Version 4.2 added:\n- single sign-on\n- audit logs",
        "Version 4.2 added the following:\n\n1. single sign-on\n2. audit logs",
    ],
)
async def test_a_list_lead_in_makes_no_claim_of_its_own(answer: str) -> None:
    assert await label(answer, RELEASE, question="What did 4.2 add?") == "faithful"


async def test_an_invented_list_item_is_still_flagged() -> None:
    answer = "Version 4.2 added:\n- single sign-on\n- audit logs\n- a mobile app"
    assert await label(answer, RELEASE, question="What did 4.2 add?") == "hallucinated"


@pytest.mark.parametrize(
    "answer",
    [
        'According to the documentation, "The uptime commitment is 99.9% per calendar month."',
        "According to the docs, the uptime commitment is 99.9% per calendar month.",
        "Per the sources, credits of 10% are issued for each breach.",
    ],
)
async def test_attributing_a_quote_to_the_documentation_claims_nothing_more(answer: str) -> None:
    assert await label(answer, SLA, question="What uptime do you promise?") == "faithful"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Version 4.2 was released on March 14, 2025.", "faithful"),
        ("It was released on 14 March 2025.", "faithful"),
        ("4.2 came out on 14/03/2025.", "faithful"),
        ("Version 4.2 was released on Mar 14, 2025.", "faithful"),
        ("Version 4.2 was released on 3/14/2025.", "faithful"),
        ("Version 4.2 was released on April 14, 2025.", "hallucinated"),
        ("Version 4.2 was released on 15 March 2025.", "hallucinated"),
        ("Version 4.2 was released on 14/04/2025.", "hallucinated"),
        ("Version 4.2 was released on March 14, 2024.", "hallucinated"),
    ],
)
async def test_a_date_written_another_way_is_the_same_date_and_another_date_differs(
    answer: str, expected: str
) -> None:
    assert await label(answer, RELEASE, question="When was 4.2 released?") == expected


async def test_an_iso_date_in_the_answer_matches_a_date_in_words_in_the_context() -> None:
    context = "Version 4.2 was released on March 14, 2025. It added single sign-on."
    assert await label("Version 4.2 was released on 2025-03-14.", context, question="When?") == "faithful"


async def test_a_lead_in_that_counts_the_items_is_still_a_claim() -> None:
    # FaithBench's summaries put hallucinations there: "The passage describes two different films:".
    answer = "Version 4.2 added three features:\n- single sign-on\n- audit logs"
    assert await label(answer, RELEASE, question="What did 4.2 add?") == "hallucinated"


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know based on the documents. They only describe the Pro plan's yearly price.",
        "I don't know. The documents only talk about what the Pro plan includes.",
    ],
)
async def test_what_explains_a_refusal_is_no_claim(answer: str) -> None:
    result = await Faithfulness().score(
        RagRecord(query="Do you offer a lifetime licence?", contexts=(PLAN,), answer=answer), OfflineJudge()
    )
    assert result.status is MetricStatus.NOT_APPLICABLE, (result.status, result.reason, result.details)


async def test_a_figure_after_a_refusal_is_still_checked() -> None:
    answer = "I don't know based on the documents. They only say the Pro plan costs $1,200 per year."
    assert await label(answer, PLAN, question="Do you offer a lifetime licence?") == "hallucinated"


@pytest.mark.parametrize(
    "answer",
    [
        "Sure! The Pro plan costs $1,000 per year.",
        "Great question! Extra seats cost $50 each per year.",
        "The Pro plan costs $1,000 per year. Let me know if you have any other questions!",
        "Certainly. Extra seats cost $50 each per year. I hope this helps!",
        "Extra seats cost $50 each per year. Would you like me to compare it with the Basic plan?",
        "Of course! The Pro plan costs $1,000 per year. Is there anything else I can help you with?",
    ],
)
async def test_a_chat_courtesy_or_a_question_back_makes_no_claim(answer: str) -> None:
    assert await label(answer, PLAN, question="Tell me about the Pro plan") == "faithful"


@pytest.mark.parametrize(
    "answer",
    [
        "Sure! The Pro plan costs $1,200 per year.",
        "The Pro plan costs $1,000 per year. Let me know if you want the 15 free seats it includes!",
        "Did you know the Pro plan includes 25 seats?",
    ],
)
async def test_an_invented_fact_beside_a_courtesy_is_still_flagged(answer: str) -> None:
    assert await label(answer, PLAN, question="Tell me about the Pro plan") == "hallucinated"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("The Pro plan includes 10 seats.", "faithful"),
        ("Pro includes ten seats.", "faithful"),
        ("The Pro plan includes 25 seats.", "hallucinated"),
    ],
)
async def test_a_short_statement_is_no_bare_answer(answer: str, expected: str) -> None:
    assert await label(answer, PLAN, question="How many seats does Pro have?") == expected
