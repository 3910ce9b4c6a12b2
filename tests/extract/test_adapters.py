"""A producer is one adapter (its keys and small reading functions) plugged into the shared reader: the
rules (documents, answer carriers, skips, lineage) are the reader's, the same for every convention; the
conventions run in one documented order; no attribute key is spelled outside its adapter."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from trace_builder import span, trace

from tracescore.extract import DEFAULT_RECOGNIZERS, extract
from tracescore.extract._convention import Convention, Reading
from tracescore.extract._conventions import CONVENTIONS
from tracescore.extract._read import answer_text, documents_of, question_text
from tracescore.extract._reader import STEPS, ConventionReader
from tracescore.model import DecodedSpan, ExtractSkip

EXTRACT = Path(__file__).parents[2] / "tracescore" / "extract"
QUESTION = "How long is the Aurora X2 warranty?"
DOCS = ["The Aurora X2 comes with a two-year warranty.", "The warranty covers the battery."]
ANSWER = "The Aurora X2 warranty lasts two years."


# --8<-- [start:adapter]
class Acme(Convention):
    """A toy SDK: `acme.kind` says what a span is (`rag`, `search`, `tool`, `llm`); `acme.input` and
    `acme.output` hold what went in and what came out, as JSON."""

    name = "acme"
    KIND = "acme.kind"
    INPUT = "acme.input"
    OUTPUT = "acme.output"
    MARKER = KIND  # a trace without it is not read at all
    INTERACTION_KINDS = frozenset({"rag"})
    LLM_KINDS = frozenset({"llm"})
    TOOL_KINDS = frozenset({"tool"})
    RUN_TOOL_ARGUMENTS = (INPUT,)
    RUN_TOOL_RESULT = (OUTPUT,)

    def kind(self, span: DecodedSpan) -> str:
        kind = span.attributes.get(self.KIND)
        return kind if isinstance(kind, str) else ""

    def collect(self, reading: Reading) -> Reading:
        searches = [s for s in reading.around if self.kind(s) == "search"]
        tools = [s for s in reading.around if self.is_tool(s)]
        llms = [s for s in reading.around if self.is_llm(s)]
        return reading.found(
            retrievals=[(s, "retriever") for s in searches],
            asked=searches,
            tools=tools,
            llms=llms,
            sources=[*searches, *tools, *llms],
        )

    def documents(self, span: DecodedSpan, kind: str) -> list[str] | None:
        return documents_of(span.attributes.get(self.OUTPUT))

    def question(self, reading: Reading) -> str | None:
        return question_text(reading.anchor.attributes.get(self.INPUT))

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        return question_text(span.attributes.get(self.INPUT))

    def own_answer(self, span: DecodedSpan) -> str | None:
        return answer_text(span.attributes.get(self.OUTPUT))

    def llm_output(self, llm: DecodedSpan) -> str | None:
        return answer_text(llm.attributes.get(self.OUTPUT))


# --8<-- [end:adapter]


def _acme(*children: tuple[str, str, object, object], question: object = None) -> list[DecodedSpan]:
    rag = span("answer", {"acme.kind": "rag", "acme.output": json.dumps({"answer": ANSWER})})
    if question is not None:
        rag.attributes["acme.input"] = json.dumps(question)  # type: ignore[index]
    return [
        rag,
        *(
            span(name, {"acme.kind": kind, "acme.input": json.dumps(given), "acme.output": json.dumps(out)},
                 parent=rag.span_id, start=index + 1)
            for index, (kind, name, given, out) in enumerate(children)
        ),
    ]  # fmt: skip


SEARCH = ("search", "search_docs", {"query": QUESTION}, DOCS)
FINAL_ANSWER = ("tool", "final_answer", {"answer": ANSWER}, ANSWER)
LLM = ("llm", "chat", {"messages": []}, {"answer": ANSWER})


def test_a_producer_is_one_adapter_read_by_the_shared_reader() -> None:
    found = extract(trace(*_acme(SEARCH, FINAL_ANSWER, LLM)), [ConventionReader(Acme())])
    [rag] = found.interactions
    assert rag.convention == "acme" and found.skips == []
    # The question the adapter does not name is the app's own retrieval's query (the reader's rule).
    assert rag.record.query == QUESTION
    assert rag.record.answer == ANSWER
    assert list(rag.record.contexts) == DOCS
    assert [source.kind for source in rag.context_sources] == ["retriever", "retriever"]
    # An answer never supports itself, whatever the convention: the final-answer tool was handed it.
    [note] = rag.context_notes
    assert "final_answer" in note and "call arguments hold the answer" in note
    assert rag.run is not None and rag.run.tool_calls_total == 1 and rag.run.steps == 1


def test_the_shared_reader_explains_what_a_new_convention_did_not_record() -> None:
    found = extract(trace(*_acme(LLM, question={"question": QUESTION})), [ConventionReader(Acme())])
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and skip.convention == "acme"
    assert "no retrieved documents" in skip.detail


def test_the_default_recognisers_are_the_conventions_in_their_one_order() -> None:
    assert [r.name for r in DEFAULT_RECOGNIZERS] == [c.name for c in CONVENTIONS] == [
        "tracescore", "langfuse", "haystack", "openinference", "openllmetry", "mlflow", "spring_ai",
        "vercel_ai", "strands", "mastra", "genkit", "langsmith", "genai",
    ]  # fmt: skip


def test_the_steps_have_unique_names_and_name_real_hooks() -> None:
    assert len({step.name for step in STEPS}) == len(STEPS)
    for step in STEPS:
        assert step.hook is None or callable(getattr(Convention, step.hook)), step


# Modules of the shared reader (not the adapters nor the generic parsers of JSON shapes): they read
# attribute keys only through the adapters.
_SHARED = ("_reader.py", "_run.py", "_convention.py", "_lineage.py", "_extract.py", "_conventions.py")


def _adapter_keys() -> dict[str, type[Convention]]:
    """Every attribute key an adapter declares (its dotted string constants)."""
    keys: dict[str, type[Convention]] = {}
    for convention in CONVENTIONS:
        for name in dir(type(convention)):
            value = getattr(type(convention), name)
            values = value if isinstance(value, tuple) else (value,)
            for item in values:
                if isinstance(item, str) and "." in item and " " not in item:
                    keys[item] = type(convention)
    return keys


def _literals(path: Path) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_no_attribute_key_is_spelled_outside_its_adapter() -> None:
    keys = _adapter_keys()
    assert "llm.token_count.prompt" in keys and "langfuse.observation.input" in keys
    for module in _SHARED:
        spelled = sorted(_literals(EXTRACT / module) & set(keys))
        assert not spelled, f"{module} spells adapter keys {spelled}: read them from the adapters"
    where: dict[str, list[str]] = {}
    for module in sorted({type(c).__module__ for c in CONVENTIONS}):
        path = EXTRACT / f"{module.rsplit('.', 1)[1]}.py"
        for literal in _literals(path) & set(keys):
            where.setdefault(literal, []).append(path.name)
    twice = {key: files for key, files in where.items() if len(files) > 1}
    assert not twice, f"keys spelled in several modules: {twice}"
