"""Lineage: what an interaction inherits from the spans around it, the same way for every convention. Its
route (results are grouped by it) and its conversation (session and user) are read from the interaction
span, then its ancestors (a request span), then the spans it was read from; an id written JSON-encoded (as
MLflow writes every attribute) is read as the app set it. A `gen_ai.conversation.id` that is an OpenAI
Responses API response id is no conversation's: a session the service keeps by chaining responses
(`previous_response_id`) gets a new one every turn, so reading it would make each turn a conversation of its
own (Microsoft Agent Framework's Responses client writes the session's last response id there): such a chain
is joined from its response ids instead (`Convention.response_chain`, with infer_conversations)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracescore import semconv
from tracescore.extract._read import parse_json
from tracescore.model import RESPONSE_ID_PREFIX, DecodedSpan, Trace

__all__ = ["conversation_of", "route_of"]

_SESSION_KEYS = (semconv.SESSION_ID, semconv.GEN_AI_CONVERSATION_ID)
_USER_KEY = semconv.USER_ID
# Every key the conversation is read from: a span with none of them is passed over in one C call (most spans).
_CONVERSATION_KEYS = frozenset((*_SESSION_KEYS, _USER_KEY))
_ROUTE = semconv.TRACESCORE_ROUTE
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def route_of(trace: Trace, anchor: DecodedSpan, named: str | None = None) -> str:
    """The route results are grouped by: an explicit tracescore route, else the name the convention gives
    the interaction (`named`), else the HTTP route of the request the interaction served (often on an
    ancestor span), else the anchor span's name without the ids some instrumentations put in it (an unnamed
    CrewAI crew's span is `Crew_<a new UUID per Crew()>.kickoff`: one route per crew object would never
    gather a route's results)."""
    if anchor.parent_span_id is None:  # a root, as every span of our own one-span traces: no walk
        lineage: Sequence[DecodedSpan] = (anchor,)
        route = anchor.attributes.get(_ROUTE)
        explicit = route if isinstance(route, str) and route else None
    else:
        lineage = (anchor, *trace.ancestors(anchor))
        explicit = _first_text(lineage, _ROUTE)
    return explicit or named or _first_text(lineage, semconv.HTTP_ROUTE) or _without_ids(anchor.name)


def conversation_of(
    trace: Trace, anchor: DecodedSpan, read_from: Iterable[DecodedSpan] = ()
) -> tuple[str | None, str | None, str | None]:
    """(session, user, scrubbed) of the interaction, `session.id` / `gen_ai.conversation.id` and `user.id`:
    each the first found on its span or an ancestor (a request span), else on a span it was read from (agents
    put them on their LLM calls); `scrubbed`, when no session was read, the key of one a redacting exporter
    replaced (said to the user: the turn is read as a one-turn interaction). One walk for both: every
    interaction on the unsampled path goes through here."""
    lineage = (
        (anchor,) if anchor.parent_span_id is None else itertools.chain((anchor,), trace.ancestors(anchor))
    )
    session: str | None = None
    user: str | None = None
    scrubbed: str | None = None
    for span in itertools.chain(lineage, read_from) if read_from else lineage:
        attrs = span.attributes
        if attrs.keys().isdisjoint(_CONVERSATION_KEYS):
            continue
        if session is None:
            for key in _SESSION_KEYS:
                value = attrs.get(key)
                if value and isinstance(value, str) and not _names_a_response(key, value):
                    if not _scrubbed(attrs, key):
                        session = _unquoted(value)
                        break
                    scrubbed = key
        if user is None:
            value = attrs.get(_USER_KEY)
            if value and isinstance(value, str) and not _scrubbed(attrs, _USER_KEY):
                user = _unquoted(value)
        if session is not None and user is not None:
            break
    return session, user, None if session is not None else scrubbed


def _names_a_response(key: str, value: str) -> bool:
    return key == semconv.GEN_AI_CONVERSATION_ID and value.startswith(RESPONSE_ID_PREFIX)


def _scrubbed(attrs: Mapping[str, Any], key: str) -> bool:
    """Whether a redacting exporter replaced the attribute's value with a placeholder: Logfire's default
    scrubbing replaces every attribute named like `session` (`[Scrubbed due to 'session']`), and one
    placeholder read as the session would make every user's chats one conversation."""
    marker = attrs.get(semconv.LOGFIRE_SCRUBBED)
    if not isinstance(marker, str):
        return False
    entries = parse_json(marker)
    return isinstance(entries, list) and any(
        isinstance(entry, dict) and entry.get("path") == ["attributes", key] for entry in entries
    )


def _unquoted(value: str) -> str:
    """An id as the app set it: MLflow writes every attribute JSON-encoded (`"chat-1"` for chat-1)."""
    if len(value) > 1 and value[0] == '"' and value[-1] == '"':
        decoded = parse_json(value)
        if isinstance(decoded, str) and decoded:
            return decoded
    return value


def _without_ids(name: str) -> str:
    return _UUID.sub("{id}", name) if "-" in name else name


def _first_text(spans: Sequence[DecodedSpan], key: str) -> str | None:
    for span in spans:
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None
