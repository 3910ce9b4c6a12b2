"""The documents a prompt's instructions carry under a label that names them (`_prompt.prompt_documents`):
read as one document; instructions that only instruct are never documents, nor is text that only mentions a
label (a heading that says "context" in a sentence, a section named by the instructions, Markdown quoted in
code, an answer that quotes a template)."""

from __future__ import annotations

import pytest
from trace_builder import span, trace

from tracescore.extract import extract
from tracescore.extract._prompt import prompt_documents
from tracescore.model import ContextSourceKind, ExtractSkip

DOCS = "Aurora Basic costs 9 euros a month.\nPhone support comes only with Plus."


def context_block(instructions: str) -> str | None:
    """The one document the instructions carry under a label, None without one."""
    found = prompt_documents(instructions)
    return found.block if found is not None else None


@pytest.mark.parametrize(
    "instructions",
    [
        f"You answer questions about Aurora products from this context only:\n{DOCS}",
        f"Context:\n{DOCS}\n\nQuestion:\nWhat does Basic cost?",
        f"Answer from the documents below.\nDocuments:\n{DOCS}\nRules:\n- Be brief.",
        f"Be brief.\n<context>\n{DOCS}\n</context>\nCite nothing else.",
        f"Here are the search results for you:\n{DOCS}",
        f"Answer briefly.\nContext: {DOCS}\n\nQuestion: What does Basic cost?",
        # LangChain hub's rlm/rag-prompt (LangChain's RAG tutorial): the documents on the label's line.
        "You are an assistant for question-answering tasks. Use the following pieces of retrieved context to "
        "answer the question. If you don't know the answer, just say that you don't know.\n"
        f"Question: What does Basic cost? \nContext: {DOCS} \nAnswer:",
    ],
    ids=["sentence", "then_question", "then_rules", "tags", "search_results", "inline", "rlm_rag_prompt"],
)
def test_the_text_a_label_names_as_documents_is_one_document(instructions: str) -> None:
    assert context_block(instructions) == DOCS


@pytest.mark.parametrize(
    "instructions",
    [
        "You are Aurora's support assistant. Look facts up with search_plans and answer only from what it "
        "returns or from earlier in this conversation.",
        "You are a helpful assistant. Follow these rules:\n- Be polite.\n- Answer briefly.",
        "You can look things up in our documents about Aurora products. Follow these rules:\n- Be brief.",
        "Context:",
        "Answer in the context of Aurora products: be brief and polite.",
        "You are a support bot.\nUser context: a premium customer since 2020.",
        None,
    ],
    ids=[
        "instructions_only",
        "rules_label",
        "documents_then_rules",
        "empty_block",
        "context_in_a_sentence",
        "other_context",
        "none",
    ],
)
def test_instructions_without_a_label_naming_documents_are_no_documents(instructions: str | None) -> None:
    assert context_block(instructions) is None


def test_the_question_of_a_prompt_with_its_documents_on_the_label_s_line_is_never_the_documents() -> None:
    found = prompt_documents(f"Use the context.\nQuestion: What does Basic cost? \nContext: {DOCS} \nAnswer:")
    assert found is not None and (found.block, found.question) == (DOCS, "What does Basic cost?")


QUESTION = "What does Basic cost?"
SECTIONS = f"## Context\n{DOCS}\n\n## Question\n{QUESTION}"


@pytest.mark.parametrize(
    "text",
    [
        f"Answer from the context only.\n\n{SECTIONS}",
        f"# Documents\n{DOCS}\n\nQuestion: {QUESTION}",
        f"### Retrieved documents:\n{DOCS}\n\n### Question\n{QUESTION}\n\n### Answer",
        f"## **Context** ##\n{DOCS}\n\n## Question\n{QUESTION}",
        f"**Context:**\n{DOCS}\n\n**Question:** {QUESTION}",
        f"**Context**\n{DOCS}\n\n**Question**\n{QUESTION}\n\n**Answer:**",
        f"**Context:** {DOCS}\n\n**Question**: {QUESTION}",
        f"Relevant documentation:\n{DOCS}\n\nQuestion: {QUESTION}",
        f"## Context\n{DOCS}\n\n{QUESTION}",
    ],
    ids=[
        "heading",
        "heading_then_question_label",
        "qualified_heading_colon",
        "bold_heading_closed",
        "bold",
        "bold_no_colon",
        "bold_inline",
        "relevant_documentation",
        "heading_then_unlabelled_question",
    ],
)
def test_the_section_under_a_markdown_label_is_the_documents_and_its_question_is_not(text: str) -> None:
    """A heading or a bold line that IS the label (`## Context`, `**Context:**`), or `Relevant
    documentation:`: the section under it is the one document, up to the question's own label or heading
    (any form), or the unlabelled question that ends the prompt."""
    found = prompt_documents(text)
    assert found is not None and (found.block, found.question) == (DOCS, QUESTION)


def test_a_heading_section_keeps_its_subheadings_and_ends_at_a_heading_of_its_level() -> None:
    plus = "### Aurora Plus\nPlus costs 19 euros a month."
    text = f"## Context\n### Aurora Basic\n{DOCS}\n{plus}\n\n## Rules\n- Be brief.\n\n{QUESTION}"
    found = prompt_documents(text)
    assert found is not None
    assert (found.block, found.question) == (
        f"### Aurora Basic\n{DOCS}\n{plus}",
        f"## Rules\n- Be brief.\n\n{QUESTION}",
    )


def test_a_documents_code_comments_are_no_headings_that_end_its_section() -> None:
    """`# ...` inside fenced code is a comment of the document's code, not a heading."""
    code = "```python\n# Reset the device first.\ndevice.reset()\n```"
    found = prompt_documents(f"## Context\n{code}\n{DOCS}\n\n## Question\n{QUESTION}")
    assert found is not None and (found.block, found.question) == (f"{code}\n{DOCS}", QUESTION)


@pytest.mark.parametrize(
    "text",
    [
        # A heading that mentions the word in a sentence is no label; the one that IS the label is.
        f"## How to use the context below\nAnswer briefly, citing it.\n\n{SECTIONS}",
        # Instructions that name the section, then the section.
        f"Answer only from the documents under ## Context\n\n{SECTIONS}",
        # A user's pasted Markdown in fenced code is quoted text, not the prompt's label.
        f"```markdown\n# Context\nWe moved to Kafka in 2024.\n```\n\n{SECTIONS}",
    ],
    ids=["heading_mentions_context", "instructions_name_the_section", "fenced_markdown"],
)
def test_only_a_line_that_is_the_label_outside_code_starts_the_documents(text: str) -> None:
    found = prompt_documents(text)
    assert found is not None and (found.block, found.question) == (DOCS, QUESTION)


@pytest.mark.parametrize(
    "text",
    [
        "## How to use the context below\nAnswer briefly and cite nothing else.",
        "You are Aurora's support bot. Answer only from the ## Context section of the user's message.",
        "The user's message has two sections:\n## Context\n## Question",
        "How should I format my notes?\n```markdown\n# Context\nWe moved to Kafka in 2024.\n```",
        "What does `# Context` do in my prompt template?",
        "You help with our documentation. Rules:\n- Be brief.",
        "Tags for my post:\n#context\nA post about prompt templates.",
        "Answer only from the documents under ## Context",
    ],
    ids=[
        "heading_mentions_context",
        "instructions_name_a_section",
        "sections_described_empty",
        "fenced_markdown_question",
        "inline_code",
        "documentation_in_a_sentence",
        "hashtags",
        "instructions_end_naming_a_section",
    ],
)
def test_text_that_only_mentions_a_markdown_label_carries_no_documents(text: str) -> None:
    assert context_block(text) is None


def test_an_answer_quoting_a_context_heading_is_never_the_documents() -> None:
    """The answer, and an earlier turn's answer that quoted `## Context`, are not this turn's prompt: only the
    instructions and the last user message are read."""
    quoted = f"Your template should read:\n\n{SECTIONS}"
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "How should my RAG template look?",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.content": quoted,
        "llm.input_messages.2.message.role": "user",
        "llm.input_messages.2.message.content": "And where does the question go?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": quoted,
    }
    found = extract(trace(span("chat", attributes)))
    assert found.interactions == []
    assert [s.reason for s in found.skips] == [ExtractSkip.EMPTY_CONTEXT]


def test_a_user_message_with_markdown_sections_is_judged_on_its_context_section() -> None:
    """Such a prompt, with no retriever span, was skipped (nothing read): its `## Context` section is now the
    documents and its `## Question` section the question."""
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Answer only from the ## Context section.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": SECTIONS,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "9 euros a month.",
    }
    [rag] = extract(trace(span("chat", attributes))).interactions
    assert (rag.record.query, rag.record.contexts) == (QUESTION, (DOCS,))
    assert [s.kind for s in rag.context_sources] == [ContextSourceKind.PROMPT]


@pytest.mark.parametrize(
    "text",
    [
        "# Role\nYou are ACME Bank's assistant.\n\n# Context\nThe user is a premium customer.\n\n"
        "# Task\nAnswer politely and briefly.",
        "**Context**\nThe user is on the mobile app.\n\n**Rules**\nNever give financial advice.",
    ],
    ids=["heading", "bold"],
)
def test_a_system_prompt_s_bare_context_section_asking_nothing_is_no_documents(text: str) -> None:
    """A prompt-engineered system prompt's sections (`# Role`, `# Context`, `# Task`) give the app's
    background, not retrieved documents: read as documents, every answer of an app that retrieves nothing
    would be judged against "The user is a premium customer." and flagged."""
    assert prompt_documents(text) is None


def test_a_qualified_heading_is_documents_without_a_question() -> None:
    """`## Retrieved documents` says what it holds: read wherever the question is (a later user message)."""
    found = prompt_documents(f"# Role\nYou answer from the documents.\n\n## Retrieved documents\n{DOCS}")
    assert found is not None and found.block == DOCS
