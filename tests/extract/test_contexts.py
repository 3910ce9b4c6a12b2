"""The documents one interaction is judged against: each keeps where it came from, whatever order the spans
that hold them are read in, and whatever is dropped later."""

from __future__ import annotations

from trace_builder import span

from tracescore.extract._context import Contexts, ToolCall
from tracescore.model import ContextSourceKind

RETRIEVED = ["Acme Corp was founded in 1999.", "Acme Corp sells anvils."]
CARRIER = "Acme Corp sells anvils and rockets."


def test_a_tool_result_read_after_retrieved_documents_keeps_its_own_call_and_source() -> None:
    retriever, tool = span("retrieve"), span("final_answer")
    contexts = Contexts()
    contexts.add(retriever, ContextSourceKind.RETRIEVER, RETRIEVED)
    call = ToolCall(tool, {"answer": CARRIER}, document_like=False)
    contexts.add(tool, ContextSourceKind.TOOL, [CARRIER], call)

    assert contexts.tool_results() == [(2, CARRIER, call)]  # its position among all three documents
    assert [(s.span_id, s.kind) for s in contexts.sources] == [
        (retriever.span_id, ContextSourceKind.RETRIEVER),
        (retriever.span_id, ContextSourceKind.RETRIEVER),
        (tool.span_id, ContextSourceKind.TOOL),
    ]
    assert contexts.span_ids == (retriever.span_id, tool.span_id)
    assert contexts.notes == (
        f"tool result from span {tool.span_id} 'final_answer' is not document-like: judged as one text",
    )


def test_a_dropped_document_takes_its_span_out_of_what_the_interaction_was_read_from() -> None:
    retriever, tool, other = span("retrieve"), span("final_answer"), span("search")
    contexts = Contexts()
    contexts.add(tool, ContextSourceKind.TOOL, [CARRIER], ToolCall(tool, None, document_like=True))
    contexts.add(retriever, ContextSourceKind.RETRIEVER, RETRIEVED)
    contexts.add(other, ContextSourceKind.TOOL, ["Anvils ship in 3 days."], ToolCall(other, None, True))

    contexts.drop([0])  # the first tool's result carried the answer

    assert contexts.texts == (*RETRIEVED, "Anvils ship in 3 days.")
    assert contexts.span_ids == (retriever.span_id, other.span_id)
    assert [position for position, _, _ in contexts.tool_results()] == [2]


def test_blank_and_repr_documents_leave_no_source_behind() -> None:
    retriever = span("retrieve")
    contexts = Contexts()
    contexts.add(retriever, ContextSourceKind.RETRIEVER, ["  ", "Document(id=1, content='x')"])

    assert len(contexts) == 0 and contexts.sources == () and contexts.span_ids == ()
    assert contexts.notes == (
        f"1 document(s) from span {retriever.span_id} were program reprs (e.g. NodeWithScore(...), "
        "Document(...)), not text: not judged",
    )
