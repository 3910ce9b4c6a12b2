"""Documents an app put into the prompt itself, under a label that names them (`Context:`, `<context>` tags),
with no retriever span: read by every convention from the answering model call's instructions (kind
`instructions`) or its last user message (kind `prompt`, the question then being the message's text outside
them). Recorded from the real libraries (fixtures/openinference_openai_stuffed, openllmetry_openai_stuffed,
haystack_otel_stuffed, litellm_otel: scenarios/_stuffed.py); a prompt with no label stays an explained skip;
retrieved documents always win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recorded import Recording, extracted, recordings, spans_of
from trace_builder import span, trace

from tracescore.extract import extract
from tracescore.extract._prompt import prompt_documents
from tracescore.model import ContextSourceKind, ExtractSkip

# LiteLLM's OTel callback and LangSmith's OTel export record the same calls beside their other apps
# (test_litellm_otel.py, test_langsmith.py).
BESIDE = ("litellm_otel", "langsmith")
STUFFED = {r.id: r for r in recordings() if r.source.endswith("_stuffed") or r.source in BESIDE}
# Documents under a label in the prompt (Haystack's `documents_*` hand the builder Document objects instead:
# test_haystack.py).
LABELLED = [r for r in STUFFED.values() if r.scenario.startswith(("user", "system"))]
QUESTION = "How long does the Aurora X2 battery last?"
DOCS = "The Aurora X2 battery lasts 14 hours.\n\nThe Aurora X2 weighs 1.2 kg."
ANSWER = "It lasts 14 hours."


@pytest.mark.parametrize("recording", LABELLED, ids=lambda r: r.id)
def test_a_recorded_stuffed_prompt_is_an_interaction_with_its_question_documents_and_answer(
    recording: Recording,
) -> None:
    [interaction] = extracted(spans_of(recording)).interactions
    record = interaction.record
    # The question is never the documents: the text after `Question:`, or what the app was asked.
    assert (record.query, record.answer) == (recording.question, recording.answer)
    assert record.contexts == ("\n\n".join(recording.documents),)
    where = recording.scenario.split("_")[0]
    kind = ContextSourceKind.PROMPT if where == "user" else ContextSourceKind.INSTRUCTIONS
    assert [source.kind for source in interaction.context_sources] == [kind]
    assert interaction.span.name == recording.interaction_span


@pytest.mark.parametrize(
    "source",
    ["openinference_openai_stuffed", "openllmetry_openai_stuffed", "haystack_otel_stuffed", *BESIDE],
)
def test_documents_pasted_into_the_prompt_with_no_label_are_never_guessed(source: str) -> None:
    found = extracted(spans_of(STUFFED[f"{source}/unlabelled"]))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason in (ExtractSkip.EMPTY_CONTEXT, ExtractSkip.NO_RETRIEVAL)
    assert "docs/integrations/index.md#documents-in-the-prompt" in skip.detail


def _llm(messages: list[dict[str, str]], answer: str = ANSWER, **attributes: object) -> dict[str, object]:
    """An OpenInference LLM span's attributes: flattened input messages, one output message."""
    flattened: dict[str, object] = {"openinference.span.kind": "LLM", **attributes}
    for index, message in enumerate(messages):
        flattened[f"llm.input_messages.{index}.message.role"] = message["role"]
        flattened[f"llm.input_messages.{index}.message.content"] = message["content"]
    flattened["llm.output_messages.0.message.role"] = "assistant"
    flattened["llm.output_messages.0.message.content"] = answer
    return flattened


def test_retrieved_documents_win_over_documents_in_the_prompt() -> None:
    chain = span("rag", {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": ANSWER})
    retriever = span(
        "retrieve",
        {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.content": "It lasts 14 hours.",
        },
        parent=chain.span_id,
        start=1,
    )
    stuffed = f"Context:\n{DOCS}\n\nQuestion: {QUESTION}"
    llm = span("chat", _llm([{"role": "user", "content": stuffed}]), parent=chain.span_id, start=2)
    [rag] = extract(trace(chain, retriever, llm)).interactions
    assert rag.record.contexts == ("It lasts 14 hours.",)
    assert [s.kind for s in rag.context_sources] == [ContextSourceKind.RETRIEVER]


def test_only_the_last_user_message_is_read_not_an_earlier_turns() -> None:
    """A conversation's earlier user message carried documents; this turn's asks without any: nothing to
    judge this turn's answer against (an earlier turn's prompt is not this turn's evidence)."""
    messages = [
        {"role": "user", "content": f"Context:\n{DOCS}\n\nQuestion: {QUESTION}"},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": "Thanks! Anything else?"},
    ]
    found = extract(trace(span("chat", _llm(messages, answer="You're welcome."))))
    assert found.interactions == []
    assert [s.reason for s in found.skips] == [ExtractSkip.EMPTY_CONTEXT]


def test_a_genai_user_message_with_tagged_documents_is_asked_the_rest_of_the_message() -> None:
    stuffed = f"<context>\n{DOCS}\n</context>\n\n{QUESTION}"
    chat = span(
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": stuffed}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            ),
        },
    )
    [rag] = extract(trace(chat)).interactions
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOCS,), ANSWER)
    assert [s.kind for s in rag.context_sources] == [ContextSourceKind.PROMPT]


def test_genai_system_instructions_as_text_parts_are_read_under_their_label() -> None:
    instructions = [{"type": "text", "content": f"Answer from the context below.\n\nContext:\n{DOCS}"}]
    chat = span(
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": json.dumps(instructions),
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": QUESTION}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": ANSWER}]),
        },
    )
    [rag] = extract(trace(chat)).interactions
    assert (rag.record.query, rag.record.contexts) == (QUESTION, (DOCS,))
    assert [s.kind for s in rag.context_sources] == [ContextSourceKind.INSTRUCTIONS]


@pytest.mark.parametrize(
    ("text", "question"),
    [
        (f"Answer using the context below.\nContext:\n{DOCS}\n\nQuestion: {QUESTION}", QUESTION),
        (f"Context:\n{DOCS}\n\nQuestion:\n{QUESTION}\n\nAnswer:", QUESTION),
        (f"<documents>\n{DOCS}\n</documents>\n{QUESTION}", QUESTION),
        (f"{QUESTION}\n\nSources:\n{DOCS}", QUESTION),
        (f"Context:\n{DOCS}", None),
    ],
    ids=["question_label", "question_heading", "tags_then_text", "question_first", "documents_only"],
)
def test_the_question_is_the_prompt_text_outside_the_documents(text: str, question: str | None) -> None:
    found = prompt_documents(text)
    assert found is not None and found.block == DOCS
    assert found.question == question


@pytest.mark.parametrize(
    "text",
    [
        f"{DOCS}\n\n{QUESTION}",
        f"Use the following to answer.\n{DOCS}\nQuestion: {QUESTION}",
        "You can search our documents. Follow these rules:\n- Be brief.",
    ],
    ids=["pasted", "unnamed_label", "rules"],
)
def test_a_prompt_without_a_label_naming_documents_carries_none(text: str) -> None:
    assert prompt_documents(text) is None


def test_the_skips_point_to_the_docs_section_that_shows_the_label_forms() -> None:
    """`empty_context`, `no_retrieval` (above) and `not_rag` name the section, and the section is there."""
    [not_rag] = extract(trace(span("GET /health", {"http.route": "/health"}))).skips
    assert not_rag.reason == ExtractSkip.NOT_RAG
    assert "docs/integrations/index.md#documents-in-the-prompt" in not_rag.detail
    page = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "index.md"
    assert "\n### Documents in the prompt\n" in page.read_text(encoding="utf-8")


REFUND_DOCS = "Refunds are accepted within 30 days of delivery.\n\nOpened software is not refunded."
REFUND_QUESTION = "What is the refund window?"


@pytest.mark.parametrize(
    ("text", "block", "question"),
    [
        (f"Context:\n{REFUND_DOCS}\n\n{REFUND_QUESTION}", REFUND_DOCS, REFUND_QUESTION),
        (
            f"Answer from the context only.\nContext:\n{REFUND_DOCS}\n\n{REFUND_QUESTION}\n\nAnswer:",
            REFUND_DOCS,
            REFUND_QUESTION,
        ),
        # A document's own question stays in it: the prompt's question is asked elsewhere.
        (
            f"{REFUND_QUESTION}\n\nContext:\nCan I return it?\n\nYes, unopened.\n\nWhat about opened boxes?",
            "Can I return it?\n\nYes, unopened.\n\nWhat about opened boxes?",
            REFUND_QUESTION,
        ),
        # One paragraph is never cut: no blank line tells the question from the document.
        (f"Context:\n{REFUND_DOCS.splitlines()[0]}\n{REFUND_QUESTION}", None, None),
        # A last paragraph that asks nothing is the document's.
        (f"Context:\n{REFUND_DOCS}", REFUND_DOCS, None),
    ],
    ids=["question_last", "question_then_heading", "question_before", "one_paragraph", "no_question"],
)
def test_a_block_with_no_question_label_ends_where_its_unlabelled_question_starts(
    text: str, block: str | None, question: str | None
) -> None:
    """`Context:` then the documents then the user's question, with no `Question:` label: the question (a
    last paragraph ending with a question mark) is never swallowed into the documents."""
    found = prompt_documents(text)
    assert found is not None
    if block is None:  # the one-paragraph case: the whole block, the question with it
        block = f"{REFUND_DOCS.splitlines()[0]}\n{REFUND_QUESTION}"
    assert (found.block, found.question) == (block, question)


def test_a_user_message_with_context_then_an_unlabelled_question_is_judged_on_both() -> None:
    stuffed = f"Answer from the context below.\n\nContext:\n{REFUND_DOCS}\n\n{REFUND_QUESTION}"
    llm = span("chat", _llm([{"role": "user", "content": stuffed}], answer="30 days."))
    [rag] = extract(trace(llm)).interactions
    assert (rag.record.query, rag.record.contexts) == (REFUND_QUESTION, (REFUND_DOCS,))
    assert [s.kind for s in rag.context_sources] == [ContextSourceKind.PROMPT]


FAQ = (
    "Q: How do I reset the Aurora X2?\nA: Hold the power button for 10 seconds.\n"
    "Q: How long is the warranty?\nA: Two years from delivery."
)
FAQ_QUESTION = "Is the battery covered by the warranty?"


@pytest.mark.parametrize(
    ("text", "question"),
    [
        (f"Context:\n{FAQ}\n\nQuestion: {FAQ_QUESTION}", FAQ_QUESTION),
        (f"Context:\n{FAQ}\n\nQ: {FAQ_QUESTION}\nA:", FAQ_QUESTION),
        (f"Answer from the FAQ below.\nContext:\n{FAQ}\n\nQ: {FAQ_QUESTION}", FAQ_QUESTION),
        (f"Context:\n{FAQ}\n\n{FAQ_QUESTION}", FAQ_QUESTION),
        (f"Question: {FAQ_QUESTION}\n\nContext:\n{FAQ}", FAQ_QUESTION),
        (f"Context:\n{FAQ}", None),
    ],
    ids=["question_label", "q_then_empty_a", "q_label", "unlabelled", "question_first", "faq_only"],
)
def test_an_faqs_answered_q_lines_are_documents_and_the_question_is_the_unanswered_label(
    text: str, question: str | None
) -> None:
    """An FAQ pasted under `Context:` as `Q:` / `A:` lines: a `Q:` an `A:` answers is the documents' own,
    never where the block ends; the user's question is the label no answer follows (or, unlabelled, the last
    paragraph that asks)."""
    found = prompt_documents(text)
    assert found is not None
    assert (found.block, found.question) == (FAQ, question)


def test_a_templates_one_answered_question_label_still_ends_the_documents() -> None:
    """A chain-of-thought template starts the answer for the model ("Answer: Let's think step by step."):
    its one answered label is the prompt's question, not a document's."""
    text = f"Context:\n{REFUND_DOCS}\n\nQuestion: {REFUND_QUESTION}\nAnswer: Let's think step by step."
    found = prompt_documents(text)
    assert found is not None
    assert (found.block, found.question) == (REFUND_DOCS, REFUND_QUESTION)  # not the answer's start


THINK = "Let's think step by step."


@pytest.mark.parametrize(
    "text",
    [
        f"Context:\n{FAQ}\n\nQuestion: {FAQ_QUESTION}\nAnswer: {THINK}",
        f"Answer from the FAQ below.\nContext:\n{FAQ}\n\nQ: {FAQ_QUESTION}\nAnswer: {THINK}",
        f"Context:\n{FAQ}\n\nQ: {FAQ_QUESTION}\nA: {THINK}",
    ],
    ids=["written_otherwise", "answer_written_otherwise", "set_apart"],
)
def test_an_faq_then_the_templates_own_answered_question_ends_the_documents(text: str) -> None:
    """An FAQ's answered `Q:` lines, then the template's question with the answer it starts for the model:
    every question label is answered, and the last is the prompt's own, not the FAQ's, because the prompt
    ends on its answer's line and it stands apart from the FAQ (written another way than the FAQ's pairs,
    or set off by a blank line where none parts them). The FAQ is the documents, that label the question."""
    found = prompt_documents(text)
    assert found is not None
    assert (found.block, found.question) == (FAQ, FAQ_QUESTION)


@pytest.mark.parametrize(
    "text",
    [
        f"Context:\n{FAQ}\n\nQ: {FAQ_QUESTION}\nA: {THINK}\n\nKeep it short.",
        f"Context:\n{FAQ.replace(chr(10) + 'Q:', chr(10) * 2 + 'Q:')}\n\nQ: {FAQ_QUESTION}\nA: {THINK}",
    ],
    ids=["text_after_it", "faq_pairs_apart_too"],
)
def test_an_faq_whose_last_pair_may_be_its_own_stays_whole(text: str) -> None:
    """Where nothing tells the template's pair from the FAQ's (text after its answer, or pairs all set off
    alike), every answered pair stays in the one document: prompt text is never cut on a guess."""
    found = prompt_documents(text)
    assert found is not None
    assert (found.block, found.question) == (text.removeprefix("Context:\n"), None)


def test_an_faq_then_a_chain_of_thought_question_is_judged_on_the_faq() -> None:
    stuffed = (
        f"Answer from the context below.\n\nContext:\n{FAQ}\n\nQuestion: {FAQ_QUESTION}\nAnswer: {THINK}"
    )
    llm = span("chat", _llm([{"role": "user", "content": stuffed}], answer="Yes, for two years."))
    [rag] = extract(trace(llm)).interactions
    assert (rag.record.query, rag.record.contexts) == (FAQ_QUESTION, (FAQ,))


def test_an_faq_in_the_prompt_is_judged_whole() -> None:
    stuffed = f"Answer from the context below.\n\nContext:\n{FAQ}\n\nQ: {FAQ_QUESTION}\nA:"
    llm = span("chat", _llm([{"role": "user", "content": stuffed}], answer="Yes, for two years."))
    [rag] = extract(trace(llm)).interactions
    assert (rag.record.query, rag.record.contexts) == (FAQ_QUESTION, (FAQ,))
