"""A conversation no app named, inferred from the question/answer history its follow-ups resent: on the chats
recorded from the real libraries, read as if the app had named none (`named_nothing`), every turn of a chat
computes the same id on its own (turn 1 from its question and answer, the follow-ups from the first pair of
their history), and each follow-up's history names the turns before it."""

from __future__ import annotations

import json

import pytest
from recorded import FIXTURES
from recorded_chats import Turn, chat_turns, named_nothing

from tracescore.consume import decode_message
from tracescore.extract import find
from tracescore.model import HISTORY_ID_PREFIX, Interaction, Trace, history_conversation_id

# Every recorded source whose prompt resends the questions and answers in a form its reader reads.
RESENT = ("autogen_conversation", "genkit_conversation", "google_adk_v1", "haystack_conversation",
          "haystack_otel", "langchain_js_conversation", "langfuse_v3_conversation", "langgraph_conversation",
          "langsmith_conversation", "llamaindex_conversation", "logfire_conversation", "mastra_conversation",
          "openai_agents_conversation", "openinference_openai_conversation", "openlit_conversation",
          "openllmetry_conversation", "strands_conversation", "vercel_ai_conversation")  # fmt: skip
# The recorded chats of apps that resend only their last turns (sliding windows), naming only the user.
WINDOWS = ("langchain_window_conversation", "llamaindex_window_conversation")


def read(turn: Turn, infer: bool = True) -> Interaction:
    spans = decode_message(turn.payload)
    [found] = find(Trace(spans[0].trace_id, tuple(spans))).found
    if infer:
        found.infer_conversation()
    return found.interaction()


@pytest.mark.parametrize("source", RESENT)
def test_every_turn_of_a_chat_no_app_named_computes_the_same_conversation_id(source: str) -> None:
    turns = sorted(
        (named_nothing(t) for t in chat_turns(source) if t.chat == "qa_only_faithful"), key=lambda t: t.turn
    )
    assert [t.turn for t in turns] == [1, 2, 3]
    first, second, third = (read(t) for t in turns)
    assert first.session_id is None and first.conversation_source is None, "a first turn: no record names it"
    opened = first.opens_conversation
    assert opened is not None and opened.startswith(HISTORY_ID_PREFIX)
    for follow_up, earlier in ((second, [first]), (third, [first, second])):
        assert (follow_up.session_id, follow_up.conversation_source) == (opened, "history")
        assert follow_up.history == tuple(t.turn_digest for t in earlier)


def test_a_named_conversation_is_never_inferred() -> None:
    """The id the app named wins: its turns read no history, their records say `named`."""
    for turn in chat_turns("openinference_openai_conversation"):
        interaction = read(turn)
        assert interaction.session_id == turn.session_id and interaction.conversation_source == "named"
        assert interaction.history == () and interaction.opens_conversation is None


def test_without_inference_a_chat_no_app_named_is_in_no_conversation() -> None:
    """`infer_conversations` off (`false`): nothing is read from the history."""
    for turn in chat_turns("openinference_openai_conversation"):
        interaction = read(named_nothing(turn), infer=False)
        assert interaction.session_id is None and interaction.opens_conversation is None


@pytest.mark.parametrize("source", WINDOWS)
def test_a_window_chat_names_each_follow_up_by_the_first_pair_it_resent(source: str) -> None:
    """Chats recorded from apps that resend only their last turns, naming only the user: LangChain's
    `trim_messages` keeping the last two questions and answers, LlamaIndex's `ChatMemoryBuffer` keeping what
    fits its token limit (one pair after the Plus plan's long answer). Each follow-up's history is the pairs
    its library resent (the manifest's `resent_turns`), in order, and its id the one its first resent pair
    would open: once turn 1 has fallen out of the window, not turn 1's (joined back, where two consecutive
    pairs show how, by `tracescore conversations`: test_sliding_window_kafka.py)."""
    manifest = json.loads((FIXTURES / source / "manifest.json").read_text(encoding="utf-8"))
    resent_turns = {e["scenario"]: e["conversation"]["resent_turns"] for e in manifest["scenarios"].values()}
    chats: dict[str, list[Turn]] = {}
    for turn in chat_turns(source):
        chats.setdefault(turn.chat, []).append(turn)
    assert set(chats) == {"window_faithful", "window_invented", "window_restated"}
    for turns in chats.values():
        turns.sort(key=lambda t: t.turn)
        read_turns = [read(t) for t in turns]
        assert len(read_turns) == 6
        digests = [r.turn_digest for r in read_turns]
        service, user = turns[0].service, read_turns[0].user_id
        assert user is not None
        assert read_turns[0].opens_conversation == history_conversation_id(service, user, digests[0])
        for turn, follow_up in zip(turns[1:], read_turns[1:], strict=True):
            resent = resent_turns[turn.scenario]
            if source == "langchain_window_conversation":
                assert resent == list(range(max(1, turn.turn - 2), turn.turn)), "the last two"
            assert follow_up.history == tuple(digests[n - 1] for n in resent), turn.scenario
            expected = history_conversation_id(service, user, digests[resent[0] - 1])
            assert (follow_up.session_id, follow_up.conversation_source) == (expected, "history"), (
                turn.scenario
            )
