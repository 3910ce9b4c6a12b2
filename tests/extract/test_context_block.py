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
    ],
    ids=["sentence", "then_question", "then_rules", "tags", "search_results"],
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
        None,
    ],
    ids=["instructions_only", "rules_label", "documents_then_rules", "empty_block", "none"],
)
def test_instructions_without_a_label_naming_documents_are_no_documents(instructions: str | None) -> None:
    assert context_block(instructions) is None
