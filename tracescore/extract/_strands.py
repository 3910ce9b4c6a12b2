"""Strands Agents' own tracing (strands-agents 1.x): OTel GenAI-convention spans, each naming Strands as its
provider (`gen_ai.provider.name`, `gen_ai.system` before the latest conventions: `strands-agents`), an agent
run being `invoke_agent {name}` -> `execute_event_loop_cycle` per model turn -> `chat` and `execute_tool`.

Read as the OTel GenAI conventions are (`_genai`: the agent span the interaction, its question and answer in
`gen_ai.input.messages` / `gen_ai.output.messages`, the documents the tools' `gen_ai.tool.call.result`,
earlier turns' tool results in the last chat's input), with what Strands writes its own way:
- The message content is on the spans only with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental,
  gen_ai_span_attributes_only. By default Strands writes each message as a span event (`gen_ai.user.message`,
  `gen_ai.choice`), and with `gen_ai_latest_experimental` alone the messages as
  `gen_ai.client.inference.operation.details` events: those are read as the attributes they stand for
  (`_strands_events`), so every mode reads alike. A run whose messages are on neither (events dropped on the
  way) is skipped as `content_not_captured`, naming the setting; one whose spans lost some events past the
  limits is scored and says so (`span_events_dropped`). So is a run whose texts Strands redacted
  (`[REDACTED]`, its `gen_ai_unredacted_attributes=` policy) skipped, naming the keys to leave unredacted.
- A tool's result is a list of content blocks (`[{"text": ...}, {"json": ...}]`, Bedrock's tool result
  shape) whose text is what the tool returned, JSON-encoded when it was not a string: a tool that returned a
  list of texts returned that list of documents, in its span and in later model calls' input.
- The agent span's answer is `str(AgentResult)`: its text blocks, each followed by a newline, which is not
  part of the answer.
- Several agents answering one request are one interaction, on the span whose answer the user reads: an
  orchestrator calling agents as tools (`agent.as_tool()`: the sub-agent's `invoke_agent` inside the
  orchestrator's `execute_tool`) is the outermost `invoke_agent`; a Swarm or a Graph is `invoke_swarm` /
  `invoke_graph` around its nodes' `invoke_agent` spans, with the task as its `gen_ai.input.messages` and no
  output (Strands 1.x never records one): its answer is its last nodes' (`last_nodes`: those after whose end
  no node started, one for a Swarm or a Graph that ends in one node, several when its last nodes ran side by
  side), each node's answer, in the order they started, a blank line apart: what the app shows of the run. The
  sub-agents' own tool results are the documents; what one agent hands another is not: an agent-as-tool's
  result (the sub-agent's answer) and a Swarm's `handoff_to_agent` result (the handing agent's message).
- Its memory (`MemoryManager`) searches its stores in a `memory.search` span, whose `content` holds the
  entries found once the search ended (Strands writes the query's and the results' events there, the results
  last): retrieval spans, whether memory injection put the entries into the prompt or the model called the
  `search_memory` tool (which wraps the search: its result is not read again).
- Its background memory extraction (a store's `extraction`, Strands' ModelExtractor) is a trace of its own
  after the request, `memory.extract` around the model call that distils the conversation into facts to
  remember: no interaction (nobody reads that call's output as an answer): skipped as `not_rag`, expected,
  like any trace without one, never scored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescore.extract._convention import Reading, last_text, without_wrappers
from tracescore.extract._genai import GenAI
from tracescore.extract._history import TurnResult
from tracescore.extract._read import documents_of, parse_json
from tracescore.extract._strands_events import lost_events, with_event_content
from tracescore.model import ContextSourceKind, DecodedSpan, Trace, start_order

__all__ = ["Strands"]


class Strands(GenAI):
    """The keys Strands Agents writes beyond the OTel GenAI ones, its settings, and its readers."""

    name = "strands"
    PROVIDER, SYSTEM = "gen_ai.provider.name", "gen_ai.system"  # SYSTEM: before the latest conventions
    STRANDS = "strands-agents"
    REDACTED = "[REDACTED]"
    # The content blocks of a tool result that hold what the tool returned.
    TEXT_BLOCK, JSON_BLOCK = "text", "json"
    CONTENT_ON_SPANS = "gen_ai_latest_experimental,gen_ai_span_attributes_only"
    UNREDACTED = "gen_ai_unredacted_attributes"
    # A Swarm's and a Graph's span (`invoke_{swarm,graph}`) around its nodes' agent spans.
    MULTI_AGENT_KINDS = frozenset({"invoke_swarm", "invoke_graph"})
    INTERACTION_KINDS = GenAI.INTERACTION_KINDS | MULTI_AGENT_KINDS
    NODE_KINDS = MULTI_AGENT_KINDS | {GenAI.INVOKE_AGENT}  # what a Swarm's or a Graph's node runs
    HANDOFF_TOOL = "handoff_to_agent"  # a Swarm node's tool: its result is the message it hands on
    MEMORY_SEARCH = "memory.search"
    MEMORY_EXTRACT = "memory.extract"  # background extraction: a trace root, never an interaction
    MEMORY_RESULTS = "content"  # of a memory.search span: the entries found (the query until it ended)
    # Its span events (`_strands_events`): with gen_ai_latest_experimental, the attributes the span would
    # carry; by default (the GenAI conventions' v1.36 events) one event per message, by role (a message
    # carrying tool results is a tool message; its role is user), then the output; the memory spans' always.
    MEMORY_EVENTS = frozenset({"memory.query", "memory.results", "memory.content"})
    MESSAGE_ROLES = {**GenAI.MESSAGE_EVENTS, "gen_ai.tool.message": GenAI.USER}
    EVENT_TOOL_RESULT = "tool.result"  # an event loop cycle's choice: the tool results fed back to the model
    TOOL_STATUS, TOOL_FAILED = "gen_ai.tool.status", "error"
    # Spans whose output is text (an agent's answer); a model call's is content blocks.
    TEXT_ANSWER_KINDS = frozenset({GenAI.INVOKE_AGENT}) | MULTI_AGENT_KINDS
    # The events that carry messages, and the attributes they stand for.
    CONTENT_EVENTS = frozenset(
        {GenAI.OPERATION_DETAILS, GenAI.SYSTEM_MESSAGE, GenAI.CHOICE, *MEMORY_EVENTS, *MESSAGE_ROLES}
    )
    MESSAGE_KEYS = (GenAI.INPUT_MESSAGES, GenAI.OUTPUT_MESSAGES, GenAI.TOOL_RESULT[0], MEMORY_RESULTS)
    # Content blocks (Bedrock's Converse shape) beyond text and JSON, and their fields.
    TOOL_USE_BLOCK, TOOL_RESULT_BLOCK = "toolUse", "toolResult"
    BLOCK_NAME, BLOCK_TOOL_USE_ID, BLOCK_INPUT, BLOCK_CONTENT = "name", "toolUseId", "input", "content"
    # The keys whose text is judged: question and earlier turns, answer, documents.
    CONTENT_KEYS = (GenAI.INPUT_MESSAGES, GenAI.OUTPUT_MESSAGES, GenAI.TOOL_RESULT[0])
    LOOKED_IN = {
        "question": f"the last user message of {GenAI.INPUT_MESSAGES} of the invoke_agent span or of its "
        "first chat",
        "answer": f"the assistant message of {GenAI.OUTPUT_MESSAGES} of the invoke_agent span or of its last "
        "chat",
        "documents": f"the content blocks of {GenAI.TOOL_RESULT[0]} of its execute_tool spans, tool results "
        f"in {GenAI.INPUT_MESSAGES}, {GenAI.RETRIEVAL_DOCUMENTS} of retrieval spans and the entries in "
        f"{MEMORY_RESULTS} of memory.search spans",
    }

    def present(self, trace: Trace) -> bool:
        for span in trace.spans:  # noqa: SIM110 (a plain loop: this runs on every trace)
            if self._is_strands(span):
                return True
        return False

    def with_content(self, trace: Trace) -> Trace:
        # Whichever of its three modes wrote the messages.
        return with_event_content(self, trace)

    def kind(self, span: DecodedSpan) -> str:
        # Only Strands' own spans: another producer's GenAI spans in the trace are the GenAI reader's.
        return super().kind(span) if self._is_strands(span) else ""

    def background_work(self, reading: Reading) -> str | None:
        trace, anchor = reading.trace, reading.anchor
        if self.kind(anchor) == self.MEMORY_EXTRACT or any(
            self.kind(a) == self.MEMORY_EXTRACT for a in trace.ancestors(anchor)
        ):
            return (
                f"Strands' background memory extraction ({self.MEMORY_EXTRACT}): a model call that distils "
                "the conversation into facts to remember, not an interaction"
            )
        return None

    def answer(self, reading: Reading) -> str | None:
        if self.kind(reading.anchor) not in self.MULTI_AGENT_KINDS:
            return super().answer(reading)
        answers = [self._node_answer(reading, node) for node in self.last_nodes(reading)]
        return "\n\n".join(a for a in answers if a) or super().answer(reading)

    def last_nodes(self, reading: Reading) -> list[DecodedSpan]:
        """A Swarm's or a Graph's nodes (agents, or nested Swarms and Graphs) after whose end no other node
        started: their answers are what the run ends with. In the order they started: nodes side by side at
        the end of a Graph are all last."""
        trace = reading.trace
        nodes = [s for s in trace.children(reading.anchor) if self.kind(s) in self.NODE_KINDS]
        nodes.sort(key=start_order)
        return [n for n in nodes if not any(o.start_time_unix_nano >= n.end_time_unix_nano for o in nodes)]

    def is_retrieval(self, span: DecodedSpan) -> bool:
        return self.kind(span) in (self.RETRIEVAL, self.MEMORY_SEARCH)

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> list[str] | None:
        if self.kind(span) == self.MEMORY_SEARCH:
            return documents_of(span.attributes.get(self.MEMORY_RESULTS))
        return super().documents(span, kind)

    def collect(self, reading: Reading) -> Reading:
        reading = super().collect(reading)
        trace, tools = reading.trace, reading.tools
        spans_read = (reading.anchor, *reading.llms, *tools, *(span for span, _ in reading.retrievals))
        reading.events_lost = lost_events(self, spans_read)
        # A tool around a memory search returned what the search span records; an agent's words are not read.
        read = without_wrappers(trace, tools, [span for span, _ in reading.retrievals])
        results = [tool for tool in read if not self._relays_agent(trace, tool)]
        if len(results) < len(tools):
            reading.tool_results = results
        return reading

    def tool_call(self, span: DecodedSpan) -> tuple[Any, Any]:
        result, arguments = super().tool_call(span)
        return self._returned(result), arguments

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        return [r._replace(value=self._returned(r.value)) for r in super().input_tool_results(llm)]

    def own_answer(self, span: DecodedSpan) -> str | None:
        answer = super().own_answer(span)
        return answer.rstrip("\n") if answer else answer

    def content_not_captured(self, reading: Reading) -> str | None:
        spans = (reading.anchor, *reading.llms, *reading.tools)
        redacted = sorted({key for span in spans for key in self.CONTENT_KEYS if self._redacted(span, key)})
        if redacted:
            return (
                f"Strands redacted its {', '.join(redacted)} ({self.REDACTED}): list them in "
                f"{self.OPT_IN}'s {self.UNREDACTED}= ({self.UNREDACTED}={';'.join(self.CONTENT_KEYS)}) to "
                "judge its runs"
            )
        if any(self.OUTPUT_MESSAGES in span.attributes for span in (reading.anchor, *reading.llms)):
            return None
        return (
            f"it recorded no {self.OUTPUT_MESSAGES} or {self.INPUT_MESSAGES} on its spans, nor its messages "
            "as span events (Strands' default; the exporter or a Collector processor may drop them): set "
            f"{self.OPT_IN}={self.CONTENT_ON_SPANS} where the agent runs to record them on the spans"
        )

    def _node_answer(self, reading: Reading, node: DecodedSpan) -> str | None:
        own = self.own_answer(node)
        if own:
            return own
        inside = {s.span_id for s in reading.trace.descendants(node)}
        return last_text([s for s in reading.llms if s.span_id in inside], self.llm_answer)

    def _is_strands(self, span: DecodedSpan) -> bool:
        # Two lookups, no generator: this runs on every span of every trace no earlier reader covered.
        get = span.attributes.get
        return get(self.PROVIDER) == self.STRANDS or get(self.SYSTEM) == self.STRANDS

    def _relays_agent(self, trace: Trace, tool: DecodedSpan) -> bool:
        """Whether the tool's result is another agent's words: an agent called as a tool (its answer), or a
        Swarm's handoff (the handing agent's message); never evidence for the answer."""
        if tool.attributes.get(self.TOOL_NAME) == self.HANDOFF_TOOL:
            return True
        return any(self.kind(span) == self.INVOKE_AGENT for span in trace.descendants(tool))

    def _redacted(self, span: DecodedSpan, key: str) -> bool:
        return span.attributes.get(key) == self.REDACTED

    def _returned(self, result: Any) -> Any:
        """What the tool returned, out of its content blocks: the texts (one text as is, which may be the JSON
        of a list of documents) and JSON values; a redacted result is none."""
        if result == self.REDACTED:
            return None
        blocks = parse_json(result)
        if not isinstance(blocks, list) or not blocks:
            return result
        returned = []
        for block in blocks:
            if not isinstance(block, Mapping) or len(block) != 1:
                return result  # not Strands' content blocks
            [(key, value)] = block.items()
            if key not in (self.TEXT_BLOCK, self.JSON_BLOCK):
                return result
            returned.append(value)
        return returned[0] if len(returned) == 1 else returned
