"""OpenLLMetry (traceloop-sdk): `traceloop.span.kind` workflow / task spans and `gen_ai.prompt.N.*` LLM spans.

The interaction is the outermost `workflow` (or `agent`) span: the question is read from its
`traceloop.entity.input` (the decorated function's arguments as JSON), the answer from its
`traceloop.entity.output`, or else from the last LLM completion (`gen_ai.completion.0.content`). Documents
come from the retrieval tasks below it: a task whose name says it retrieves (retrieve, search, ...) and whose
output is a list of documents, the texts a vector database's client returned to the app before the answering
LLM call (traceloop's chromadb instrumentation's `db.query.result` events, `_vector_db`; a query that recorded
none, as its qdrant one, says so when nothing else gave a document), and `tool` spans (any result: one not
document-like is one context, noted);
without tool spans, tool messages passed to the last LLM call; after them, the earlier turns' tool messages in
its input. LLM spans are read in both forms traceloop
has written: `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` (before 0.5x) and `gen_ai.input.messages` /
`gen_ai.output.messages` (0.6x). Its LangChain mode records the retriever from 0.6x on (a `vector_db_retrieve
<retriever>` task); where no retrieval was recorded (0.45's LangChain mode puts the documents only inside the
prompt), the workflow is skipped with that explanation: the prompt's text is not
a reliable split into question and documents. A model that was offered tools and called none (a greeting)
retrieved nothing: that is said instead (`empty_context`).

The conversation is the standard keys' (`gen_ai.conversation.id`, which traceloop's `set_conversation_id` /
`@conversation` write), else traceloop's association properties,
`traceloop.association.properties.session_id` and `.user_id` (`Traceloop.set_association_properties`, the
keys its `AssociationProperty` names; the LangChain instrumentation writes a run's metadata there too), on the
interaction, a span above it or one it was read from.

OpenLLMetry's LangChain.js handler starts each step's span in whatever context is active, not under the run
that called it: a chain's steps, model calls and tools arrive as childless siblings under the app's request
span. Such a flat run is one interaction, anchored at its root workflow (the chain or graph invoked, the
first to start, whose time holds the others' starts): the question is its input, the answer its output or
else the last LLM call's, the documents those of the siblings that started within it, as above. Chains run
at once (concurrent requests, `Promise.all`) interleave with nothing on the spans saying whose each step is:
such a run is skipped (`interleaved`), and each model call is then read on its own by the GenAI reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracescore import semconv
from tracescore.extract._convention import (
    PROMPT_DOCUMENTS_DOCS,
    Convention,
    Reading,
    first_text,
    not_inside,
)
from tracescore.extract._genai import GenAI
from tracescore.extract._history import TurnResult, genai_tool_results, indexed_tool_results
from tracescore.extract._read import (
    Prompt,
    answer_text,
    assistant_text,
    call_arguments,
    documents_of,
    indexed,
    indexed_prompt,
    keyword_question,
    message_prompt,
    parse_json,
    question_text,
)
from tracescore.extract._vector_db import VectorDB
from tracescore.model import ContextSourceKind, DecodedSpan, Trace

__all__ = ["OpenLLMetry"]

CONCURRENT_DOCS = "docs/integrations/langchain.md#openllmetry-concurrent-chains"
# The handler's start times are whole milliseconds: a last step that started before its chain's end may be
# recorded up to one later.
_HANDLER_RESOLUTION_NS = 1_000_000


class OpenLLMetry(Convention):
    """traceloop-sdk's keys (`traceloop.*`; `gen_ai.prompt` / `gen_ai.completion` on LLM calls), readers."""

    name = "openllmetry"
    SPAN_KIND = "traceloop.span.kind"
    ENTITY_NAME = "traceloop.entity.name"
    ENTITY_INPUT = "traceloop.entity.input"
    ENTITY_OUTPUT = "traceloop.entity.output"
    PROMPT = "gen_ai.prompt"  # .N.role / .N.content (before 0.5x)
    COMPLETION = "gen_ai.completion"  # .N.content
    ROLE = "role"
    CONTENT = "content"
    INPUT_MESSAGES = semconv.GEN_AI_INPUT_MESSAGES  # 0.6x
    OUTPUT_MESSAGES = semconv.GEN_AI_OUTPUT_MESSAGES
    # What the app associates a trace with (`Traceloop.set_association_properties`): its session and user.
    ASSOCIATION = "traceloop.association.properties"
    SESSION_KEYS = (f"{ASSOCIATION}.session_id",)
    USER_KEYS = (f"{ASSOCIATION}.user_id",)
    INTERACTION_KINDS = frozenset({"workflow", "agent"})
    TOOL_KINDS = frozenset({"tool"})
    MARKER = SPAN_KIND
    # What OpenLLMetry's LangChain.js handler writes on every span (the chains' flat steps, `_flat_runs`).
    PROVIDER, LANGCHAIN_JS = semconv.GEN_AI_PROVIDER_NAME, "langchain"
    RETRIEVAL_NAME = re.compile(r"retriev|search|lookup|fetch_?doc|get_?doc|context|knowledge", re.IGNORECASE)

    RUN_TOOL_NAME = (ENTITY_NAME,)
    RUN_TOOL_ARGUMENTS = (ENTITY_INPUT,)
    RUN_TOOL_RESULT = (ENTITY_OUTPUT,)
    RUN_MODEL_OUTPUT = (f"{COMPLETION}.0.{ROLE}", f"{COMPLETION}.0.{CONTENT}")
    # The tools offered, flattened: `llm.request.functions.N.name` / `.description` (LiteLLM writes them too).
    RUN_FIELDED_TOOL_DEFINITIONS = (("llm.request.functions", "name", "description"),)
    # An LLM call that was offered tools, in either form (before 0.5x, 0.6x).
    TOOLS_OFFERED = ("llm.request.functions.0.name", GenAI.TOOL_DEFINITIONS)

    def kind(self, span: DecodedSpan) -> str:
        kind = span.attributes.get(self.SPAN_KIND)
        return kind.lower() if isinstance(kind, str) else ""

    def is_llm(self, span: DecodedSpan) -> bool:
        """A span that recorded an LLM call's messages (traceloop gives LLM calls no kind of their own)."""
        attrs = span.attributes
        return (
            self.llm_output(span) is not None
            or self.OUTPUT_MESSAGES in attrs
            or f"{self.PROMPT}.0.{self.ROLE}" in attrs
        )

    def is_retrieval(self, span: DecodedSpan) -> bool:
        """A task or tool named like a retrieval whose output is a list of documents."""
        if self.kind(span) not in ("task", "tool"):
            return False
        name = str(span.attributes.get(self.ENTITY_NAME) or span.name)
        return (
            bool(self.RETRIEVAL_NAME.search(name))
            and self.documents(span, ContextSourceKind.RETRIEVER) is not None
        )

    def candidates(self, trace: Trace) -> Iterable[Reading]:
        """The outermost workflows, each with everything below it; a flat run (`_flat_runs`) is one
        interaction, anchored at its root workflow, read from the spans that ran within it."""
        if not self.present(trace):
            return
        anchors = self.anchors(trace)
        runs = {run[0].span_id: run for run in self._flat_runs(trace, anchors)}
        inside = {span.span_id for run in runs.values() for span in run[1:]}
        for anchor in anchors:
            if (run := runs.get(anchor.span_id)) is not None:
                reading = self.collect(Reading(trace, self, anchor, run[1:]))
                reading.sources = run[1:]  # every step of the run is this interaction's
                yield reading
            elif anchor.span_id not in inside:
                yield self.collect(Reading(trace, self, anchor, list(trace.descendants(anchor))))

    def _flat_runs(self, trace: Trace, anchors: Sequence[DecodedSpan]) -> list[list[DecodedSpan]]:
        """Runs whose spans lost their parent context (OpenLLMetry JS's LangChain callbacks start each step's
        span in the active context): childless sibling spans of the convention under a span of another (the
        app's request, recorded or not), where a workflow's time span holds the others' starts and an LLM
        call is among them. A workflow that ran an LLM call yet has no child can only have lost its context;
        each run is [root, the spans that started within it, in start order]. Only starts are compared: the
        handler ends a chain's span before its last step's. Chains run at once interleave their steps into
        one run, which `interleaved` skips rather than read as one interaction."""
        parents = {
            anchor.parent_span_id
            for anchor in anchors
            if anchor.parent_span_id is not None
            and not trace.children(anchor)
            and not self._ours(trace.by_id.get(anchor.parent_span_id))
        }
        if not parents:
            return []
        # By parent id, not by the parent span: the request's span may reach Kafka in a later message.
        siblings: dict[str, list[DecodedSpan]] = {parent: [] for parent in parents}
        for span in trace.spans:
            if span.parent_span_id in siblings and self._ours(span) and not trace.children(span):
                siblings[span.parent_span_id].append(span)
        return [run for flat in siblings.values() for run in self._enclosed(flat)]

    def _enclosed(self, flat: list[DecodedSpan]) -> list[list[DecodedSpan]]:
        """`flat` grouped under the workflows whose time spans hold them (see `_flat_runs`)."""
        runs: list[list[DecodedSpan]] = []
        # Outermost first: of two spans started in one millisecond (the handler's resolution), the longer.
        for span in sorted(flat, key=lambda s: (s.start_time_unix_nano, -s.end_time_unix_nano, s.span_id)):
            if runs and span.start_time_unix_nano <= runs[-1][0].end_time_unix_nano + _HANDLER_RESOLUTION_NS:
                runs[-1].append(span)
            elif self.is_interaction(span):
                runs.append([span])
        return [run for run in runs if any(self.is_llm(s) for s in run)]

    def interleaved(self, reading: Reading) -> str | None:
        """A flat run (`_flat_runs`) whose chains ran at once: two of its workflows were invoked with
        different questions, each the user message of one of its LLM calls. The handler records no run id
        or parent run, so which step, model call or document is whose cannot be read; nor can it be for two
        requests served at once, whose steps LangChain.js's background callbacks start in the first one's
        context (the second request's trace keeps only a step or two)."""
        trace, anchor = reading.trace, reading.anchor
        if trace.children(anchor) or self._ours(trace.by_id.get(anchor.parent_span_id or "")):
            return None  # a run read from its spans' tree, not a flat one
        if not reading.around:
            return self._stray(anchor)
        asked = {
            prompt.user
            for span in reading.around
            if self.is_llm(span) and (prompt := self.prompt(span)) is not None and prompt.user
        }
        chains = {
            question
            for span in (anchor, *reading.around)
            if self.kind(span) in self.INTERACTION_KINDS
            and (question := self.retrieval_question(span)) is not None
            and question in asked
        }
        if len(chains) < 2:
            return None
        asked_by = ", ".join(map(repr, sorted(chains)))
        return (
            f"{len(chains)} chains ran at once among its sibling steps ({asked_by}): OpenLLMetry's "
            "LangChain.js handler records no run id or parent run, so nothing on the spans says which step, "
            "model call or document is whose, and the chains are not read (each model call is, on its own: "
            f"{CONCURRENT_DOCS})"
        )

    def _stray(self, step: DecodedSpan) -> str | None:
        """A step of LangChain.js's handler alone among its siblings, no model call within it: its chain's
        other steps are elsewhere, which only a chain run at once with another does (the steps interleaved,
        or in the first request's trace)."""
        if step.attributes.get(self.PROVIDER) != self.LANGCHAIN_JS:
            return None
        return (
            f"a lone step of a LangChain.js chain ('{step.name}'), no model call within it: its chain's "
            "other steps are elsewhere, as when chains run at once (OpenLLMetry's LangChain.js handler "
            f"records no run id or parent run: {CONCURRENT_DOCS})"
        )

    def _ours(self, span: DecodedSpan | None) -> bool:
        return span is not None and (bool(self.kind(span)) or self.is_llm(span))

    def collect(self, reading: Reading) -> Reading:
        trace, anchor, around = reading.trace, reading.anchor, reading.around
        retrievals = [s for s in around if self.is_retrieval(s)]
        tool_spans = [s for s in around if self.is_tool(s)]
        tools = [s for s in tool_spans if not any(s is r for r in retrievals)]
        llms = [s for s in around if self.is_llm(s)]
        # The app's own queries of a vector database's client (`_vector_db`), before the answering call.
        queries = VectorDB.ran_before(around, reading.since, llms[-1]) if llms else []
        return reading.found(
            retrievals=[(span, ContextSourceKind.RETRIEVER) for span in (*retrievals, *queries)],
            # A retrieval task's query; a tool's arguments are the model's search, not the question.
            asked=not_inside(trace, [r for r in retrievals if not self.is_tool(r)], anchor, self.is_tool),
            tools=tool_spans,
            tool_results=tools,
            llms=llms,
            answering=not_inside(trace, llms, anchor, self.is_tool),
            sources=[*retrievals, *queries, *tools, *llms],
        )

    def read_retrieval(self, reading: Reading, span: DecodedSpan, kind: ContextSourceKind) -> None:
        if VectorDB.is_query(span):
            VectorDB.read(reading, span)
        else:
            super().read_retrieval(reading, span, kind)

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> list[str] | None:
        return documents_of(span.attributes.get(self.ENTITY_OUTPUT))

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        attrs = llm.attributes
        return indexed_tool_results(attrs, self.PROMPT, self.ROLE, self._tool_message) or genai_tool_results(
            attrs.get(self.INPUT_MESSAGES)
        )

    def _tool_message(self, attrs: Mapping[str, Any], message: str) -> list[Any]:
        content = attrs.get(f"{message}.{self.CONTENT}")
        return [] if content is None else [content]

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        """`gen_ai.prompt.N.*` (before 0.5x), else `gen_ai.input.messages` (0.6x)."""
        attrs = span.attributes
        roles = indexed(attrs, self.PROMPT, self.ROLE)
        if roles:
            prefix, content = self.PROMPT, self.CONTENT
            return indexed_prompt(roles, lambda index: _text(attrs.get(f"{prefix}.{index}.{content}")))
        return message_prompt(attrs.get(self.INPUT_MESSAGES))

    def question(self, reading: Reading) -> str | None:
        return self.retrieval_question(reading.anchor)

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        return _question(span.attributes.get(self.ENTITY_INPUT))

    def own_answer(self, span: DecodedSpan) -> str | None:
        """The return value as JSON; traceloop's LangChain mode wraps it as {"outputs": ...}."""
        output = parse_json(span.attributes.get(self.ENTITY_OUTPUT))
        if isinstance(output, Mapping) and "outputs" in output:
            output = output["outputs"]
        return answer_text(output)

    def llm_output(self, llm: DecodedSpan) -> str | None:
        """The LLM's answer: the last `gen_ai.completion.N.content`, else `gen_ai.output.messages`."""
        completions = indexed(llm.attributes, self.COMPLETION, self.CONTENT)
        if completions:
            return str(completions[-1])
        messages = llm.attributes.get(self.OUTPUT_MESSAGES)
        return assistant_text(messages) if messages is not None else None

    def no_documents_note(self, reading: Reading) -> str | None:
        return VectorDB.no_documents_note(reading)

    def more_conversation(self, reading: Reading) -> tuple[str | None, str | None]:
        """The association properties, where the standard keys name no session or user."""
        anchor = reading.anchor
        spans = [anchor, *reading.trace.ancestors(anchor), *reading.sources]
        return first_text(spans, self.SESSION_KEYS), first_text(spans, self.USER_KEYS)

    def prompt_only(self, reading: Reading) -> str | None:
        if any(key in call.attributes for call in reading.llms for key in self.TOOLS_OFFERED):
            return None  # the model was offered tools and called none: nothing retrieved, not a prompt's
        return (
            f"{reading.place('workflow')}: no retrieval task recorded its documents, and none are under a "
            "label inside the LLM prompt (traceloop's LangChain instrumentation puts them only there; prompt "
            f"text is read only under a label that names them, {PROMPT_DOCUMENTS_DOCS}); decorate the "
            "retriever with @task(name='retrieve') or use tracescore's decorators"
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _question(entity_input: Any) -> str | None:
    """traceloop records a call as {"args": [...], "kwargs": {...}}: a question keyword, else the first
    string argument, else the text of a single dict argument (a LangChain chain's input). Its LangChain
    mode records {"inputs": ..., "kwargs": {...}} instead."""
    call = parse_json(entity_input)
    if isinstance(call, Mapping) and "inputs" in call:
        return question_text(call["inputs"])
    if not isinstance(call, Mapping):
        return question_text(call)
    args, kwargs = call_arguments(call)
    if (keyword := keyword_question(kwargs)) is not None:
        return keyword
    for arg in args:
        if isinstance(arg, str) and arg.strip():
            return arg
    for arg in args:
        if (text := question_text(arg)) is not None:
            return text
    if "args" not in call and "kwargs" not in call:
        return question_text(call)
    return None
