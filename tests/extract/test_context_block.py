"""The documents a prompt's instructions carry under a label that names them (`_prompt.prompt_documents`):
read as one document; instructions that only instruct are never documents."""

from __future__ import annotations

import pytest

from tracescore.extract._prompt import prompt_documents

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
