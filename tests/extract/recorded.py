"""The fixtures recorded from the real instrumentation libraries (fixtures/record.py), with what each one
should become: an interaction read by a given convention, or an explained skip."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
T = TypeVar("T")

# What a reader of each recording must produce. Decided by what the library records, not by the bytes:
# traceloop's LangChain mode records no retrieval, and GenAI documents given as ids carry no text.
EXPECTED = {
    "openinference_langchain": ("interaction", "openinference"),
    "openinference_langchain_tracescore": ("interaction", "tracescore"),
    "openinference_manual": ("interaction", "openinference"),
    "openllmetry/workflow": ("interaction", "openllmetry"),
    "openllmetry/langchain": ("skip", "no_retrieval"),
    "otel_genai/ids_only": ("skip", "empty_context"),
    "otel_genai": ("interaction", "genai"),
    "openinference_openai_tools": ("interaction", "openinference"),
    # An agent that answered from no tool and no retriever: nothing to judge against.
    "langgraph_tool/no_tool": ("skip", "empty_context"),
    "langgraph_tool": ("interaction", "openinference"),
    "pydantic_ai": ("interaction", "genai"),
    "haystack": ("interaction", "openinference"),
    "llamaindex": ("interaction", "openinference"),
    "openllmetry_openai_tools": ("interaction", "openllmetry"),
    "langchain_stream_history": ("interaction", "openinference"),
    # Content capture off on the decorated functions: the documents are recorded nowhere.
    "langfuse/capture_off": ("skip", "empty_context"),
    "langfuse": ("interaction", "langfuse"),
    "langfuse_v3/capture_off": ("skip", "empty_context"),
    "langfuse_v3": ("interaction", "langfuse"),
    # Langfuse spans around OpenInference ones: scored once, on the Langfuse interaction.
    "langfuse_openinference": ("interaction", "langfuse"),
    "langfuse_langchain": ("interaction", "langfuse"),
    # Delivered whole (<scenario>.binpb); its per-service messages (Recording.messages) are for lateness.
    "two_service": ("interaction", "openinference"),
    # The workflow's output is a StopEvent(...) repr cut short: the answer is the agent's last LLM call's.
    "llamaindex_agent": ("interaction", "openinference"),
    # The answer reaches the final_answer tool as its argument: that tool's result is never a document.
    "smolagents": ("interaction", "openinference"),
    "semantic_kernel": ("interaction", "genai"),
    # MLflow's GenAI-conventions export drops mlflow.spanOutputs: the retriever's documents are gone, and
    # system instructions (where the pipeline put them) are never read as documents.
    "mlflow/semconv_rag": ("skip", "empty_context"),
    "mlflow/semconv_agent": ("interaction", "genai"),
    "mlflow": ("interaction", "mlflow"),
    # autogen-core's own spans carry names only: no answer (nor question or documents) to read.
    "autogen/core_only": ("skip", "missing_answer"),
    "autogen": ("interaction", "genai"),
    # The Vercel AI SDK through the real Collector (one Kafka message per trace and scope). An app that puts
    # its documents only into the prompt records no retrieval; with content capture off, no text at all.
    "vercel_ai/prompt_": ("skip", "no_retrieval"),
    "vercel_ai/no_content_": ("skip", "missing_answer"),
    "vercel_ai": ("interaction", "vercel_ai"),
    # The Langfuse JS SDK's observations (langfuse.observation.*), read by the Langfuse recogniser.
    "langfuse_js": ("interaction", "langfuse"),
    # Agent and pipeline frameworks under their OpenInference instrumentations.
    "openai_agents": ("interaction", "openinference"),
    "dspy": ("interaction", "openinference"),
    # A streamed crew's kickoff returns a handle (its span's output is the handle's repr) and runs the crew
    # in a trace of its own, read as the interaction.
    "crewai/stream_handle": ("skip", "missing_answer"),
    "crewai": ("interaction", "openinference"),
    # Two-turn conversations: each turn is its own trace; a follow-up that calls no tool is judged against
    # the first turn's tool result, kept in its LLM call's input.
    "langgraph_conversation": ("interaction", "openinference"),
    "llamaindex_conversation": ("interaction", "openinference"),
    "pydantic_ai_conversation": ("interaction", "genai"),
    # A failed tool's message is what the model was given: judged (it supports nothing); the run says so.
    "langgraph_tool_error": ("interaction", "openinference"),
}

# Recordings whose library writes down no question (only the model's own search query, in the tool call's
# arguments, which is not the user's question): judged for faithfulness, the record says why it has none.
QUESTION_NOT_RECORDED = {
    "semantic_kernel": "get_response(messages=...) / invoke_stream(messages=...): the agent span's "
    "gen_ai.input.messages is empty and the chat spans carry no messages",
}

# Shapes the extractor does not read yet, as a strict-xfail reason per source (or source/scenario): a
# recording that starts passing fails until its line goes.
NOT_YET_READ: dict[str, str | None] = {
    "langgraph_tool/no_tool": None,  # read right today (a skip); must stay so
}


@dataclass(frozen=True)
class Message:
    """One service's part of a recorded trace, as its exporter sent it, and how late it reaches Kafka."""

    service: str
    payload: bytes
    delay_s: float


@dataclass(frozen=True)
class Recording:
    source: str
    scenario: str
    payload: bytes
    trace_id: str
    question: str
    documents: tuple[str, ...]
    answer: str
    faithful: bool
    expected: tuple[str, str]
    # The span a reader must score, by name, where the trace has no single obvious root (agents, loops).
    interaction_span: str | None
    not_yet_read: str | None
    # Per-service messages of a multi-service trace (empty: the library's one process exported it whole).
    messages: tuple[Message, ...] = ()
    # Why the library records no question, when it does not (QUESTION_NOT_RECORDED).
    question_not_recorded: str | None = None

    @property
    def recorded_question(self) -> str | None:
        """The question a reader can find: the app's, unless the library did not record it."""
        return None if self.question_not_recorded else self.question

    @property
    def param(self) -> object:
        """This recording as a pytest parameter, marked xfail (strict) while the extractor lacks its shape."""
        marks = [pytest.mark.xfail(strict=True, reason=self.not_yet_read)] if self.not_yet_read else []
        return pytest.param(self, id=self.id, marks=marks)

    @property
    def id(self) -> str:
        return f"{self.source}/{self.scenario}"


def _first_match(table: dict[str, T], source: str, scenario: str) -> T | None:
    return next(
        (
            value
            for key, value in table.items()
            if key.split("/")[0] == source and scenario.startswith(key.partition("/")[2])
        ),
        None,
    )


def recordings() -> list[Recording]:
    found = []
    for manifest_path in sorted(FIXTURES.glob("*/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        for file_name, entry in sorted(manifest["scenarios"].items()):
            source, scenario = manifest["source"], entry["scenario"]
            expected = _first_match(EXPECTED, source, scenario)
            assert expected is not None, f"{source}/{scenario}: no EXPECTED entry"
            found.append(
                Recording(
                    source=source,
                    scenario=scenario,
                    payload=(manifest_path.parent / file_name).read_bytes(),
                    trace_id=entry["trace_id"],
                    question=entry["question"],
                    documents=tuple(entry["documents"]),
                    answer=entry["answer"],
                    faithful=entry["faithful"],
                    expected=expected,
                    interaction_span=entry.get("interaction_span"),
                    not_yet_read=_first_match(NOT_YET_READ, source, scenario),
                    question_not_recorded=_first_match(QUESTION_NOT_RECORDED, source, scenario),
                    messages=tuple(
                        Message(
                            service=message["service"],
                            payload=(manifest_path.parent / message["file"]).read_bytes(),
                            delay_s=message["delay_s"],
                        )
                        for message in entry.get("messages", [])
                    ),
                )
            )
    assert len(found) >= 60, f"fixtures missing under {FIXTURES}: run fixtures/record.py"
    return found
