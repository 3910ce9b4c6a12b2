"""docs/instrumenting.md, "A chat": the page's chat app (docs/examples/chat.py), then its `tracescore
consume`, `tracescore conversations` and `tracescore tail` commands, through the real broker, each output
compared with the page's (`steps.PageRun`); and what the page says of them, checked on the records."""

from __future__ import annotations

import json
import sys

import pytest
from pages import DOCS
from steps import PageRun, commands_not_shown, tracescore

pytestmark = pytest.mark.kafka

PAGE = DOCS / "instrumenting.md"
COMMANDS = (
    "python docs/examples/chat.py",
    "tracescore consume --infer-conversations --idle-timeout 10",
    "tracescore conversations --quiet-seconds 5 --idle-timeout 10",
    "tracescore tail",
    "tracescore tail --evaluations-topic tracescore.conversations",
)


def test_the_page_shows_the_commands_this_test_runs() -> None:
    assert commands_not_shown(PAGE, COMMANDS) == [], f"{PAGE.name} does not show them"
    assert '--8<-- "docs/examples/chat.py:chat"' in PAGE.read_text(encoding="utf-8")


def test_a_chat_named_by_its_app_has_its_follow_up_grounded_in_turn_one(
    bootstrap: str, topic_prefix: str
) -> None:
    group = f"{topic_prefix}-conversations"  # its turns and state topics are named after it
    conversations = f"{topic_prefix}.conversation-records"
    page = PageRun(
        PAGE,
        bootstrap,
        topic_prefix,
        env={
            "TRACESCORE_CONVERSATIONS_GROUP_ID": group,
            "TRACESCORE_CONVERSATIONS_EVALUATIONS_TOPIC": f"{topic_prefix}.evaluations",
            "TRACESCORE_CONVERSATIONS_EVIDENCE_TOPIC": f"{topic_prefix}.evidence",
            "TRACESCORE_CONVERSATIONS_CONVERSATIONS_TOPIC": conversations,
            "TRACESCORE_CONVERSATIONS_SPANS_TOPIC": f"{topic_prefix}.spans",
        },
        renames={  # the longer names first: one holds another
            f"{group}.turns.changelog": "tracescore.conversations.changelog",
            f"{group}.turns": "tracescore.conversations.turns",
            conversations: "tracescore.conversations",
        },
    )
    page.check("chat-app", page.run([sys.executable, "docs/examples/chat.py"]))
    page.run(tracescore("consume", "--infer-conversations", "--idle-timeout", "10"))
    page.check_service(
        "chat-conversations",
        page.run(tracescore("conversations", "--quiet-seconds", "5", "--idle-timeout", "10")),
    )
    page.check("chat-tail", page.run(tracescore("tail")))
    page.check("chat-tail-conversations", page.run(tracescore("tail", "--evaluations-topic", conversations)))

    # What the page says of them, on the records themselves.
    records = [json.loads(line) for line in page.run(tracescore("tail", "--json")).splitlines()[:-1]]
    by_chat: dict[str | None, list[dict]] = {}
    for record in sorted(records, key=lambda r: (r["span_started_at"], r["revision"])):
        by_chat.setdefault(record["session_id"], []).append(record)
    first, follow_up, grounded = by_chat["chat-1"]
    assert (follow_up["label"], grounded["label"]) == ("hallucinated", "faithful")
    assert (grounded["revision"], grounded["trace_id"]) == (1, follow_up["trace_id"])
    [claim] = grounded["details"]["claims"]
    assert claim["evidence_source"]["trace_id"] == first["trace_id"], "grounded in turn 1's documents"
    assert [r["label"] for r in by_chat["chat-2"]] == ["faithful", "hallucinated"], "the invented price stays"
    # `tail --flagged` prints the revision 0 of chat-1's follow-up, then the revision 1 that clears it.
    flagged = page.run(tracescore("tail", "--flagged"))
    assert flagged.count(f"trace {follow_up['trace_id']}") == 2 and "replaces revision 0" in flagged
    assert "5 records shown, 3 filtered out" in flagged, flagged
    # The chat named by nothing: its conversation inferred from the history it resent (infer_conversations
    # auto, the default), its follow-up grounded in its turn 1 as chat-1's is.
    [unnamed_first] = by_chat[None]
    [inferred] = [chat for chat in by_chat if chat is not None and chat.startswith("history:")]
    unnamed_follow_up, unnamed_grounded = by_chat[inferred]
    assert (unnamed_first["label"], unnamed_first["user_id"]) == ("faithful", "u-3")
    assert (unnamed_follow_up["label"], unnamed_grounded["label"]) == ("hallucinated", "faithful")
    [claim] = unnamed_grounded["details"]["claims"]
    assert claim["evidence_source"]["trace_id"] == unnamed_first["trace_id"]
