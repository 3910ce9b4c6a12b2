"""The skip reasons' tables on the troubleshooting page, one row per member of the enums they are counted
with (`ExtractSkip`, why `tracescore consume` did not score an interaction; `ServiceSkip`, shared by
`tracescore alert` and `tracescore conversations`; `ConversationSkip`, conversations' own), in the enums'
order: a reason added to an enum without a row here fails the check. Which commands count each service
reason is read from the code (`counted_by`), not written here."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from enum import StrEnum
from functools import cache
from pathlib import Path

import tracescore
from gen import GENERATED, Undocumented, cell, code, table
from tracescore.conversations import ConversationSkip
from tracescore.model import ExtractSkip, ServiceSkip

PACKAGE = Path(tracescore.__file__).parent
# The commands that skip what they cannot read, each by its own code (a package, or a module of the CLI's);
# the shared code a command imports (the services' base, the model's record readers) counts for it too.
COMMANDS = {
    "tracescore alert": "alert",
    "tracescore conversations": "conversations",
    "tracescore tail": "cli/_tail.py",
}
SHARED = ("_service", "model")

# reason -> (meaning, what to do): Markdown, one table cell each.
EXPLAINED: dict[StrEnum, tuple[str, str]] = {
    ExtractSkip.NOT_RAG: (
        "no span of a known convention in the trace (the log line names the conventions read and points to "
        "the [Integrations](../integrations/index.md) page, where every producer read is listed, to "
        "[Documents in the prompt](../integrations/index.md#documents-in-the-prompt), and to "
        "`@tracescore.rag`). Counted quietly after the first log line: most traffic is not RAG",
        "if it is your RAG traffic: check the instrumentation writes content (OpenLLMetry: "
        "`TRACELOOP_TRACE_CONTENT=true`; GenAI util: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`), "
        "or, for a producer not listed there, add `@tracescore.rag`",
    ),
    ExtractSkip.MISSING_ANSWER: (
        "no answer text, or only a repr (`<generator object ...>`, `ChatMessage(...)`)",
        "return text (join a stream before the span ends); a Haystack or LlamaIndex answer is read from the "
        "LLM span when it has one",
    ),
    ExtractSkip.EMPTY_CONTEXT: (
        "a question and an answer but no retrieved documents to check it against (an agent that answered "
        "without a tool); the log says where it looked",
        "put retrieval on a span: a retriever, a tool returning the documents, or "
        "`tracescore.record_contexts(docs)`; or, where the app pastes the documents into the prompt, put them"
        " under a label that names them (`Context:`, a `## Context` heading, `<context>...</context>`: "
        "[Documents in the "
        "prompt](../integrations/index.md#documents-in-the-prompt))",
    ),
    ExtractSkip.CONTENT_NOT_CAPTURED: (
        "the producer's content capture is off: its spans are there, their inputs and outputs are not "
        "(Haystack's tracer without `HAYSTACK_CONTENT_TRACING_ENABLED`, the OTel GenAI util with "
        "`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY`, Spring AI without its `log-prompt` "
        "/ `log-completion` settings and the Spring AI page's ObservationFilter, or a Spring AI chat client "
        "span read without the spans below it, its advisors' documents not copied onto it by the Spring AI "
        "page's filter, or OpenInference's `OPENINFERENCE_HIDE_OUTPUTS` / "
        "`OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS` masking the answer or the documents as `__REDACTED__`); "
        "the log names the setting",
        "turn content capture on for the traffic you want judged",
    ),
    ExtractSkip.NO_RETRIEVAL: (
        "an OpenLLMetry workflow (or an AI SDK call) whose documents exist only inside the LLM prompt with no"
        " label naming them (traceloop's LangChain instrumentation reads its documents under `Context:`)",
        "label them in the prompt ([Documents in the "
        "prompt](../integrations/index.md#documents-in-the-prompt)), name the retrieval step "
        '(`@task(name="retrieve")`) or add `@tracescore.rag`',
    ),
    ExtractSkip.INTERLEAVED_RUNS: (
        "the steps of chains that ran at once, with nothing on the spans saying which is whose (OpenLLMetry's"
        " LangChain.js handler records no run id or parent run: concurrent requests or `Promise.all` chains "
        "interleave in one trace); the log names the questions. Each model call is still read on its own",
        "run LangChain.js with `LANGCHAIN_CALLBACKS_BACKGROUND=false` so each request gets its own trace "
        "([Chains run at once](../integrations/langchain.md#openllmetry-concurrent-chains))",
    ),
    ExtractSkip.SPAN_EVENTS_DROPPED: (
        "not a skip: the interaction is scored from what its spans kept, but some of the span events it was "
        "read from were lost: past tracescore's bound (a span's last 128 events within 4 MiB are kept) or "
        "past the producer SDK's own limit (OTLP's `dropped_events_count`), and messages the producer wrote "
        "there (Strands' default) are missing; counted on the status line and summary "
        '("whose spans lost span events past the limits") and in the metric '
        "`tracescore.interactions.read_partly{reason}`, said once per service naming the spans",
        "raise the SDK's span event limit (`OTEL_SPAN_EVENT_COUNT_LIMIT`), or have the producer write the "
        "messages as span attributes ([Strands](../integrations/strands.md))",
    ),
    ExtractSkip.SESSION_ID_SCRUBBED: (
        "not a skip: the interaction is scored, but its `session.id` was replaced by Logfire's default "
        "scrubbing, so it is read as a one-turn interaction (in no conversation, not grounded in earlier "
        'turns); counted on the status line and summary ("with their session id scrubbed") and in the metric '
        "`tracescore.interactions.read_partly{reason}`, said once per service",
        "keep the id through scrubbing "
        "([Logfire](../integrations/logfire.md#keep-the-session-id-through-scrubbing))",
    ),
    ServiceSkip.INVALID_RECORD: (
        "not JSON, not a JSON object, or not the record's fields "
        "(`not an evaluation record: missing trace_id, ...`)",
        "keep other producers off the evaluations topic",
    ),
    ServiceSkip.UNKNOWN_SCHEMA_VERSION: (
        "a record of a `schema_version` this version does not read (or none); the message says which kind "
        "(`a conversation record of schema_version 2, written by a newer tracescore; ...`)",
        "upgrade: run the same tracescore version as the consumers",
    ),
    ServiceSkip.OVERSIZED_RECORD: (
        "a record too large for the service's own re-keyed topic (alert's routes, conversations' turns): "
        "only names of hundreds of KB get there",
        "shorten service and route names (or session ids)",
    ),
    ServiceSkip.INVALID_STATE: (
        "an entry of the service's state topic that tracescore did not write (not JSON, no `schema_version`, "
        "not the state's fields, a key that is none of the service's): that key starts anew",
        "keep other producers off the state topics (`tracescore.alert.changelog`, "
        "`tracescore.conversations.changelog`)",
    ),
    ServiceSkip.FUTURE_STATE_VERSION: (
        "a state saved by a newer tracescore (a higher `schema_version`): skipped, that key starts anew",
        "run one tracescore version across the group; roll back only to a version that reads it",
    ),
    ServiceSkip.OLD_STATE_VERSION: (
        "a state of a version this one no longer reads",
        "let the version that wrote it finish, or delete the key",
    ),
    ConversationSkip.NO_CONVERSATION: (
        "a turn's record has no `session_id`: its interaction carries no `session.id` / "
        "`gen_ai.conversation.id` (AutoGen records none); it is scored, never part of a conversation",
        "set the session on the spans (`tracescore.attributes(session_id=...)`)",
    ),
    ConversationSkip.RECORDS_PAST_CAP: (
        "records of turns beyond `max_turns` in one conversation (a session id shared by unrelated users), "
        "ignored; the record says how many",
        "give each conversation its own id, or raise `max_turns`",
    ),
    ConversationSkip.EVICTED: (
        "conversations written early and forgotten past `max_conversations` held by one instance",
        "raise `max_conversations`, or run more instances",
    ),
    ConversationSkip.STATE_TOO_LARGE: (
        "a conversation whose state does not fit `max_message_bytes` even without its turns' reasons: "
        "written, but a restart resumes it without its turns read so far; a turn held for grounding that "
        "does not fit is saved without its documents",
        "lower `max_turns` (or `evidence_chars`)",
    ),
    ConversationSkip.INVALID_EVIDENCE: (
        "a message on `evidence_topic` that is not a turn's documents as `tracescore consume` writes them "
        "(another producer, another version): skipped, nothing is grounded on it",
        "point `evidence_topic` at consume's `conversation_evidence_topic` only",
    ),
}


def _files(where: str) -> list[Path]:
    path = PACKAGE / where
    return [path] if path.suffix == ".py" else sorted(path.glob("*.py"))


@cache
def _read(where: str) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """What the code at `where` imports of tracescore (`from tracescore.model import ...`: "model") and the
    enum members it names (`ServiceSkip.INVALID_STATE`: ("ServiceSkip", "INVALID_STATE")): each file parsed
    and walked once, though three commands and two enums ask."""
    modules, named = set(), set()
    for path in _files(where):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module)
            elif isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                named.add((node.value.id, node.attr))
    packages = {n.split(".")[1] for n in modules if n.startswith("tracescore.") and n.count(".") >= 1}
    return frozenset(packages), frozenset(named)


def counted_by(reasons: type[StrEnum]) -> dict[StrEnum, list[str]]:
    """Per member of `reasons`, the commands whose code (or the shared code they import) names it."""
    out: dict[StrEnum, list[str]] = {r: [] for r in reasons}
    for command, where in COMMANDS.items():
        imported, named = _read(where)
        named = named.union(*(_read(shared)[1] for shared in SHARED if shared in imported))
        found = {
            reasons[attr] for name, attr in named if name == reasons.__name__ and attr in reasons.__members__
        }
        for reason in found:
            out[reason].append(command)
    return out


def _table(
    reasons: type[StrEnum],
    explained: Mapping[StrEnum, tuple[str, str]] = EXPLAINED,
    *,
    by_command: bool = True,
) -> str:
    missing = [
        f"{reasons.__name__}.{r.name}: no row in docs/gen/skips.py" for r in reasons if r not in explained
    ]
    by = counted_by(reasons) if by_command else {}
    missing += [f"{reasons.__name__}.{r.name}: no command counts it" for r in by if not by[r]]
    if missing:
        raise Undocumented(missing)
    rows = [
        [code(r.value), *([", ".join(f"`{c}`" for c in by[r])] if by else []), *map(cell, explained[r])]
        for r in reasons
    ]
    header = ["reason", *(["counted by"] if by else []), "meaning", "what to do"]
    return GENERATED + table(header, rows)


def extract_table() -> str:
    """The reasons `tracescore consume` did not score an interaction (or read it partly): all its own."""
    return _table(ExtractSkip, by_command=False)


def service_table() -> str:
    """The reasons both services count (`tracescore tail` the record ones)."""
    return _table(ServiceSkip)


def conversations_table() -> str:
    """The reasons `tracescore conversations` alone counts."""
    return _table(ConversationSkip)
