"""Grounding across turns through the real broker, on chats recorded from the real libraries in the forms a
chat app's history is kept in (earlier tool results resent in the prompt, only questions and answers, or kept
by the model's service: the Responses API's previous_response_id, nothing resent):
`EvaluationConsumer` scores every turn and writes each turn's documents, `ConversationService` judges again
the claims a turn's own documents did not support, against the same user's earlier turns.

The faithful follow-up ends grounded (its own trace resent turn 1's result, or a revision of its record whose
claim names turn 1's trace); the invented and restated ones stay flagged; the conversation records count
the revised verdicts, each turn once."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace

import pytest
from _helpers import consumer_settings, judge_client
from grounding_turns import figures_judge
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from recorded_chats import Turn, chat_turns, named_nothing

from tracescore.consume import EvaluationConsumer, decode_message
from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.model import ConversationRecord, EvaluationRecord, read_evaluation_record
from tracescore.score import OfflineJudge
from tracescore.score.judges import Judge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.judge_server import JudgeServer
from tracescore.testing.kafka_topics import input_producer, read_topic

pytestmark = pytest.mark.kafka

# Every recorded multi-turn source (issue 31): each turn's grounding and each conversation's record checked.
# (mastra_memory: the history Mastra's memory keeps, the earlier tool results recalled or filtered out.)
SOURCES = ("openinference_openai_conversation", "vercel_ai_conversation", "haystack_conversation",
           "haystack_otel", "mlflow_conversation", "autogen_conversation", "google_adk",
           "google_adk_v1", "spring_ai_conversation", "strands_conversation", "logfire_conversation",
           "openlit_conversation", "mastra_conversation", "mastra_memory", "genkit_conversation",
           "agno_conversation", "agent_framework_conversation", "beeai_conversation",
           "agent_framework_responses", "langchain_js_conversation", "langgraph_conversation",
           "llamaindex_conversation", "openai_agents_conversation", "smolagents_conversation",
           "langsmith_conversation", "langfuse_v3_conversation", "openllmetry_conversation",
           "semantic_kernel_conversation")  # fmt: skip
# Chats whose trace records the earlier turns' results though the app kept only questions and answers for the
# model: Mastra's memory recalls them into the generation's input before ToolCallFilter removes them from the
# prompt. Read there, the follow-up is grounded in its own trace, as a resent one is.
RECALLED_IN_TRACE = ("mastra_memory",)
# Haystack's own tracer with content tracing off records no document and no answer: its turns are skipped
# (content_not_captured), never guessed about.
NOT_CAPTURED = "content_off_"


def run(
    bootstrap: str,
    prefix: str,
    turns: list[Turn],
    judge: Judge,
    llm_judge: Judge | None = None,
    in_conversation: bool = True,
    infer: bool = False,
) -> tuple[dict[tuple[str, str], EvaluationRecord], list[EvaluationRecord], list[ConversationRecord]]:
    """Consume the turns, then run the conversation service; the latest record per (trace, judge), every
    record on the evaluations topic, and the conversation records written. Each turn's documents are written
    for grounding if it is `in_conversation` (its trace names one), none if not; with `infer` (consume's
    `infer_conversations`) those of a turn that names none too."""
    producer = input_producer(bootstrap, [f"{prefix}.spans"], acks="all")
    for turn in turns:
        for value in (turn.payload, *([turn.logs] if turn.logs is not None else [])):
            producer.send(f"{prefix}.spans", key=turn.trace_id.encode(), value=value)
    producer.flush()
    producer.close()
    settings = consumer_settings(
        bootstrap, prefix, conversation_evidence_topic=f"{prefix}.evidence", infer_conversations=infer
    )
    stats = EvaluationConsumer(settings, judge=judge, metrics=[Faithfulness()]).run()
    evidence = stats.interactions if in_conversation else 0
    if not infer:
        assert stats.conversation_evidence == evidence, "every conversation turn's documents, scored or not"
    config = ConversationsConfig(
        bootstrap_servers=bootstrap, evaluations_topic=f"{prefix}.evaluations",
        conversations_topic=f"{prefix}.conversations", turns_topic=f"{prefix}.turns",
        state_topic=f"{prefix}.state", spans_topic=None, group_id=f"{prefix}.conversations",
        evidence_topic=f"{prefix}.evidence", quiet_seconds=1.0, tick_seconds=0.2,
    )  # fmt: skip
    written: list[ConversationRecord] = []
    ConversationService(config, on_record=written.append, llm_judge=llm_judge).run(idle_timeout_s=4)
    records = [read_evaluation_record(m.value) for m in read_topic(bootstrap, f"{prefix}.evaluations")]
    latest: dict[tuple[str, str], EvaluationRecord] = {}
    for record in records:
        key = (record.trace_id, record.judge)
        if key not in latest or latest[key].revision < record.revision:
            latest[key] = record
    return latest, records, written


def earlier_traces(record: EvaluationRecord) -> set[str]:
    sources = [c.get("evidence_source") for c in record.details.get("claims", []) if isinstance(c, dict)]
    return {s["trace_id"] for s in sources if isinstance(s, dict) and "trace_id" in s}


def check_turns(turns: list[Turn], latest: dict[tuple[str, str], EvaluationRecord], judge: str) -> None:
    by_chat: dict[tuple[str, str], dict[int, Turn]] = defaultdict(dict)
    for turn in turns:
        by_chat[(turn.source, turn.chat)][turn.turn] = turn
    for (source, chat), chat_by_turn in by_chat.items():
        first, third = chat_by_turn[1], chat_by_turn[3]
        where = f"{source} {chat} turn 3 ({judge})"
        if chat.startswith(NOT_CAPTURED):
            assert all((t.trace_id, judge) not in latest for t in chat_by_turn.values()), where
            continue
        final = latest[(third.trace_id, judge)]
        if third.ending != "faithful":
            assert final.label == "hallucinated", f"{where}: stays flagged"
            assert final.revision == 0 or final.details["earlier_turns"]["status"] != "grounded", where
            continue
        assert final.label == "faithful", where
        if final.revision == 0:  # judged faithful in its own trace: the app resent turn 1's result
            in_trace = third.form == "resent" or source in RECALLED_IN_TRACE
            assert in_trace, f"{where}: only questions and answers, yet grounded in its trace"
            continue
        assert final.details["earlier_turns"]["status"] == "grounded", where
        assert first.trace_id in earlier_traces(final), f"{where}: the price is turn 1's retrieval"


def replays(turns: list[Turn]) -> list[list[Turn]]:
    """The chats in as few replays as keep each conversation (service and session id) to one chat: the
    recordings of one app (Haystack under OpenInference and under its own tracer, ADK's schemas) reuse the
    chats' service and session ids, so replayed together two chats would be one conversation of six turns."""
    groups: list[dict[tuple[str, str], str]] = []  # conversation -> its chat, per replay
    out: list[list[Turn]] = []
    for turn in turns:
        chat, key = f"{turn.source}/{turn.chat}", (turn.service, turn.session_id)
        index = next(i for i, g in enumerate([*groups, {}]) if g.get(key, chat) == chat)
        if index == len(groups):
            groups.append({})
            out.append([])
        groups[index][key] = chat
        out[index].append(turn)
    return out


# The chats nothing names, tested apart below: the Responses API chats whose app names none (`service_*`: a
# conversation only with infer_conversations, joined from their response ids), Semantic Kernel's thread as its
# docs run it (`unnamed_*`: its spans name none).
UNNAMED = {"agent_framework_responses": "service_", "semantic_kernel_conversation": "unnamed_"}


def unnamed(turn: Turn) -> bool:
    prefix = UNNAMED.get(turn.source)
    return prefix is not None and turn.chat.startswith(prefix)


REPLAYS = replays([t for s in SOURCES for t in chat_turns(s) if not unnamed(t)])


@pytest.mark.parametrize("replay", range(len(REPLAYS)), ids=lambda n: f"replay{n}")
def test_a_follow_up_grounded_in_an_earlier_turns_retrieval_in_every_history_form(
    bootstrap: str, topic_prefix: str, replay: int
) -> None:
    turns = REPLAYS[replay]
    assert {t.form for t in turns} >= {"resent", "qa_only"}
    latest, records, written = run(bootstrap, topic_prefix, turns, OfflineJudge())
    check_turns(turns, latest, "offline")
    qa_only = [
        t
        for t in turns
        if t.form in ("qa_only", "service")
        and t.ending == "faithful"
        and t.turn == 3
        and t.source not in RECALLED_IN_TRACE
    ]
    assert all(latest[(t.trace_id, "offline")].revision == 1 for t in qa_only), "revised once, by grounding"

    # Never two records under one revision of a turn (a revision number is given once).
    revisions = defaultdict(set)
    for record in records:
        revisions[(record.trace_id, record.judge, record.revision)].add(
            record.model_dump_json(exclude={"timestamp"})
        )
    assert all(len(versions) == 1 for versions in revisions.values())

    # The conversation records count the revised verdicts, each turn once.
    final: dict[tuple[str, str], ConversationRecord] = {}
    for record in written:
        key = (record.service_name, record.conversation_id)
        if key not in final or final[key].revision < record.revision:
            final[key] = record
    read = [t for t in turns if not t.chat.startswith(NOT_CAPTURED)]
    for chat in {(t.source, t.chat, t.session_id) for t in read}:
        service = latest[
            (next(t.trace_id for t in read if t.chat == chat[1] and t.source == chat[0]), "offline")
        ]
        record = final[(service.service_name, chat[2])]
        flagged = {"faithful": 0, "invented": 1, "restated": 2}[chat[1].rsplit("_", 1)[-1]]
        assert (record.turns, record.turns_scored, record.turns_flagged) == (3, 3, flagged), (chat, record)
        assert len(set(record.trace_ids)) == 3


def test_an_llm_judges_records_are_grounded_by_the_same_llm_judge(bootstrap: str, topic_prefix: str) -> None:
    turns = chat_turns("openinference_openai_conversation")
    with JudgeServer() as server:
        server.responder = figures_judge
        llm = judge_client(server.base_url)
        latest, _, _ = run(bootstrap, topic_prefix, turns, llm, llm_judge=llm)
    check_turns(turns, latest, "openai:judge-test")
    grounded = [r for r in latest.values() if r.revision > 0]
    # The app that resent turn 1's result is grounded in its own trace; the one that kept only questions
    # and answers, by a revision.
    third = next(t for t in turns if (t.chat, t.turn) == ("qa_only_faithful", 3))
    assert [r.trace_id for r in grounded] == [third.trace_id]
    assert all(r.details["earlier_turns"]["judge"] == "openai:judge-test" for r in grounded)


def test_a_chat_nothing_names_is_no_conversation(bootstrap: str, topic_prefix: str) -> None:
    """The Responses API chat whose app names no conversation (`service_*`: only response ids chain the turns,
    each trace its own), without `infer_conversations`: nothing joins their turns, so a follow-up is judged on
    its own trace alone and stays flagged, faithful or not. The same chats under the app's session.id are
    grounded (the replays above); with the setting, their chain of responses is joined (below)."""
    turns = [t for t in chat_turns("agent_framework_responses") if unnamed(t)]
    judge = OfflineJudge()
    latest, _, written = run(bootstrap, topic_prefix, turns, judge, in_conversation=False, infer=False)
    third = [latest[(t.trace_id, "offline")] for t in turns if t.turn == 3]
    assert third and [(r.label, r.revision) for r in third] == [("hallucinated", 0)] * len(third)
    assert all(r.session_id is None for r in latest.values())
    assert written == [], "no conversation record: no turn named one"


def test_a_chain_of_responses_the_service_keeps_is_a_conversation(bootstrap: str, topic_prefix: str) -> None:
    """With `infer_conversations`, the Responses API chat whose app names no conversation (`service_*`: each
    request names the previous response and resends nothing) is joined from its chain of response ids: the
    faithful third turn, whose trace names only turn 2's response, is grounded by a revision naming turn 1's
    trace; the invented and restated ones stay flagged. The revisions and the conversation records name the
    chain (`responses:`, `conversation_source: response_chain`); turn 1, told from a one-shot only by a later
    turn, keeps a record of no conversation, and each conversation record counts the two follow-ups once."""
    turns = [t for t in chat_turns("agent_framework_responses") if unnamed(t)]
    assert {t.chat for t in turns} == {"service_faithful", "service_invented", "service_restated"}
    latest, records, written = run(bootstrap, topic_prefix, turns, OfflineJudge(), infer=True)
    check_turns(turns, latest, "offline")
    third = {t.chat: latest[(t.trace_id, "offline")] for t in turns if t.turn == 3}
    assert third["service_faithful"].revision == 1, "grounded by a revision"
    chains = set()
    scored = {
        (t.chat, t.turn): next(r for r in records if (r.trace_id, r.revision) == (t.trace_id, 0))
        for t in turns
    }
    for turn in turns:
        first = scored[(turn.chat, turn.turn)]
        assert first.session_id is None, "consume cannot know the chain: the records name the response before"
        before = scored.get((turn.chat, turn.turn - 1))
        assert first.previous_response_id == (before.response_id if before else None), turn
        revised = latest[(turn.trace_id, "offline")]
        if revised.revision > 0:
            assert revised.conversation_source == "response_chain", turn
            assert revised.session_id is not None and revised.session_id.startswith("responses:"), turn
            chains.add((turn.chat, revised.session_id))
    final: dict[tuple[str, str], ConversationRecord] = {}
    for record in written:
        key = (record.service_name, record.conversation_id)
        if key not in final or final[key].revision < record.revision:
            final[key] = record
    assert len(final) == 3 and all(k[1].startswith("responses:") for k in final)
    by_chat = {t.trace_id: t.chat for t in turns}
    flagged = {"service_faithful": 0, "service_invented": 1, "service_restated": 1}
    for record in final.values():
        [chat] = {by_chat[t] for t in record.trace_ids}
        assert sorted(record.trace_ids) == sorted(t.trace_id for t in turns if t.chat == chat and t.turn > 1)
        assert (record.turns, record.turns_scored, record.turns_flagged) == (2, 2, flagged[chat]), record
        assert (chat, record.conversation_id) in chains or chat != "service_faithful"


@pytest.mark.parametrize("infer", [False, True], ids=["named_only", "infer_conversations"])
def test_semantic_kernels_thread_nothing_names_is_read_from_its_log_records(
    bootstrap: str, topic_prefix: str, infer: bool
) -> None:
    """Semantic Kernel's thread as its docs run it (`unnamed_*`: no span carries its id): its model calls'
    messages are log records, written to the spans topic beside the spans (the Collector's logs pipeline).
    Nothing names the conversation, so no turn is in one; the faithful follow-up whose thread resent turn 1's
    result is grounded in its own trace (the result is in its chat's log records), the one whose app kept only
    questions and answers stays flagged, unless the conversation is inferred from that history (in the log
    records too): then a revision grounds it in turn 1's trace. The invented and restated stay flagged."""
    turns = [t for t in chat_turns("semantic_kernel_conversation") if unnamed(t)]
    assert all(t.logs is not None for t in turns)
    latest, _, written = run(
        bootstrap, topic_prefix, turns, OfflineJudge(), in_conversation=False, infer=infer
    )
    for turn in (t for t in turns if t.turn == 3):
        record = latest[(turn.trace_id, "offline")]
        if turn.ending != "faithful":
            assert record.label == "hallucinated", turn.chat
        elif turn.form == "resent":
            assert (record.label, record.revision) == ("faithful", 0), turn.chat
        elif infer:
            assert (record.label, record.conversation_source) == ("faithful", "history"), turn.chat
            first = next(t for t in turns if (t.chat, t.turn) == (turn.chat, 1))
            assert first.trace_id in earlier_traces(record), turn.chat
        else:
            assert (record.label, record.revision) == ("hallucinated", 0), turn.chat
    if not infer:
        assert all(r.session_id is None for r in latest.values())
        assert written == [], "no conversation record: no turn named one"


# One source per convention whose recorded prompt resends the question/answer history (the chats' form with
# only questions and answers), read as if the app named no conversation (`named_nothing`).
INFERRED = ("openinference_openai_conversation", "vercel_ai_conversation", "logfire_conversation",
            "langfuse_v3_conversation", "genkit_conversation", "openllmetry_conversation",
            "mastra_conversation", "haystack_otel", "langsmith_conversation",
            "strands_conversation")  # fmt: skip


def test_a_chat_no_app_named_is_grounded_in_the_question_and_answer_history_it_resent(
    bootstrap: str, topic_prefix: str
) -> None:
    """With `infer_conversations`, a follow-up whose app named no conversation but resent its questions and
    answers is a turn of the conversation that history shows: the faithful one is grounded by a revision
    naming turn 1's trace, the invented and restated ones stay flagged (an earlier answer is never evidence).
    Its records say where the id came from; a first turn, told from a one-shot only by a later turn, keeps a
    record of no conversation, and each conversation record counts the follow-ups."""
    turns = [named_nothing(t) for s in INFERRED for t in chat_turns(s) if t.form == "qa_only"]
    assert {t.source for t in turns} == set(INFERRED)
    latest, _, written = run(bootstrap, topic_prefix, turns, OfflineJudge(), infer=True)
    check_turns(turns, latest, "offline")
    for turn in turns:
        record = latest[(turn.trace_id, "offline")]
        if turn.turn == 1:
            assert (record.session_id, record.conversation_source) == (None, None), turn
            continue
        assert record.conversation_source == "history", turn
        assert record.session_id is not None and record.session_id.startswith("history:"), turn
        assert len(record.history_turns) == turn.turn - 1, turn
    final: dict[tuple[str, str], ConversationRecord] = {}
    for written_record in written:
        key = (written_record.service_name, written_record.conversation_id)
        if key not in final or final[key].revision < written_record.revision:
            final[key] = written_record
    # Each follow-up counted once. Two chats that opened with the same question and answer and recorded no
    # user (Genkit's spans name none) are one conversation: its record counts both, yet neither chat's turns
    # are evidence for the other's (check_turns above).
    follow_ups = {t.trace_id: t for t in turns if t.turn > 1}
    counted = [trace for r in final.values() for trace in r.trace_ids]
    assert sorted(counted) == sorted(follow_ups)
    flagged = {"faithful": 0, "invented": 1, "restated": 1}
    for record in final.values():
        chats = {(follow_ups[t].source, follow_ups[t].chat) for t in record.trace_ids}
        endings = [chat.rsplit("_", 1)[-1] for _, chat in chats]
        assert (record.turns, record.turns_scored) == (2 * len(chats), 2 * len(chats)), chats
        assert record.turns_flagged == sum(flagged[e] for e in endings), chats
    assert sum(len(r.trace_ids) == 4 for r in final.values()) == 1, "Genkit's two chats that opened alike"


def searched_nothing(turn: Turn) -> Turn:
    """`turn` as if its search had returned nothing (the recorded spans otherwise as they are): every
    recorded form of the tool's result (the result itself, the tool message the agent sent on) left empty.
    The agent answered all the same; there is nothing to judge that answer against."""
    spans = decode_message(turn.payload)
    [result] = {
        s.attributes["gen_ai.tool.call.result"] for s in spans if "gen_ai.tool.call.result" in s.attributes
    }
    request = ExportTraceServiceRequest.FromString(turn.payload)
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                for attribute in span.attributes:
                    text = attribute.value.string_value
                    for form in (result, json.dumps(result)[1:-1]):
                        text = text.replace(form, "")
                    if text != attribute.value.string_value:
                        attribute.value.string_value = text
    return replace(turn, payload=request.SerializeToString(), chat=f"searched_nothing_{turn.chat}")


def test_a_chain_whose_first_turn_had_nothing_to_judge_is_joined_all_the_same(
    bootstrap: str, topic_prefix: str
) -> None:
    """With `infer_conversations`, the Responses API chat whose app names no conversation, its first turn's
    search returning nothing: that turn is not scored (`empty_context`), but it still says which response
    answered it, so its follow-ups, which name only the response before them, are one conversation (the
    chain's, named by turn 1's response) counting each once. The third turn's price rested on turn 1's
    search, which found nothing: it stays flagged."""
    chat = sorted(
        (t for t in chat_turns("agent_framework_responses") if t.chat == "service_faithful"),
        key=lambda t: t.turn,
    )
    turns = [searched_nothing(chat[0]), *chat[1:]]
    latest, _, written = run(bootstrap, topic_prefix, turns, OfflineJudge(), infer=True)
    assert (turns[0].trace_id, "offline") not in latest, "turn 1: nothing to judge, not scored"
    final: dict[str, ConversationRecord] = {}
    for record in written:
        if record.conversation_id not in final or final[record.conversation_id].revision < record.revision:
            final[record.conversation_id] = record
    [record] = final.values()
    assert record.conversation_id.startswith("responses:")
    assert sorted(record.trace_ids) == sorted(t.trace_id for t in turns[1:]), "each follow-up once"
    assert (record.turns, record.turns_flagged) == (2, 1), record
    assert latest[(turns[2].trace_id, "offline")].label == "hallucinated", "nothing grounds its price"
