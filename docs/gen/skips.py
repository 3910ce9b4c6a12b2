"""The skip reasons' tables on the troubleshooting page, one row per member of the enums the services count
with (`ServiceSkip`, shared by `tracescore alert` and `tracescore conversations`; `ConversationSkip`,
conversations' own), in the enums' order: a reason added to an enum without a row here fails the check.
Which commands count each reason is read from the code (`counted_by`), not written here."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

import tracescore
from gen import GENERATED, Undocumented, cell, code, table
from tracescore.conversations import ConversationSkip
from tracescore.model import ServiceSkip

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
    ServiceSkip.INVALID_RECORD: (
        "not JSON, not a JSON object, or not the record's fields "
        "(`not an evaluation record: missing trace_id, ...`)",
        "keep other producers off the evaluations topic",
    ),
    ServiceSkip.UNKNOWN_SCHEMA_VERSION: (
        "a record of a `schema_version` this version does not read (or none)",
        "run the same tracescore version as the consumers",
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


def _trees(where: str) -> list[ast.Module]:
    return [ast.parse(f.read_text(encoding="utf-8")) for f in _files(where)]


def _imported(trees: list[ast.Module]) -> set[str]:
    """The tracescore packages `trees` import (`from tracescore.model import ...`: "model")."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
    return {n.split(".")[1] for n in names if n.startswith("tracescore.") and n.count(".") >= 1}


def _named(trees: list[ast.Module], reasons: type[StrEnum]) -> set[StrEnum]:
    """The members of `reasons` that `trees` name (`ServiceSkip.INVALID_STATE`)."""
    return {
        reasons[node.attr]
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == reasons.__name__
        and node.attr in reasons.__members__
    }


def counted_by(reasons: type[StrEnum]) -> dict[StrEnum, list[str]]:
    """Per member of `reasons`, the commands whose code (or the shared code they import) names it."""
    out: dict[StrEnum, list[str]] = {r: [] for r in reasons}
    for command, where in COMMANDS.items():
        own = _trees(where)
        trees = own + [t for shared in SHARED if shared in _imported(own) for t in _trees(shared)]
        for reason in _named(trees, reasons):
            out[reason].append(command)
    return out


def _table(reasons: type[StrEnum], explained: Mapping[StrEnum, tuple[str, str]] = EXPLAINED) -> str:
    missing = [
        f"{reasons.__name__}.{r.name}: no row in docs/gen/skips.py" for r in reasons if r not in explained
    ]
    by = counted_by(reasons)
    missing += [f"{reasons.__name__}.{r.name}: no command counts it" for r in reasons if not by[r]]
    if missing:
        raise Undocumented(missing)
    rows = [
        [code(r.value), ", ".join(f"`{c}`" for c in by[r]), cell(explained[r][0]), cell(explained[r][1])]
        for r in reasons
    ]
    return GENERATED + table(["reason", "counted by", "meaning", "what to do"], rows)


def service_table() -> str:
    """The reasons both services count (`tracescore tail` the record ones)."""
    return _table(ServiceSkip)


def conversations_table() -> str:
    """The reasons `tracescore conversations` alone counts."""
    return _table(ConversationSkip)
