"""Grounding across turns without Kafka: a follow-up's claim that only an earlier turn's retrieval supports
is grounded (a revision of its record, the claim's evidence_source naming the earlier trace), a restated or
invented one is not, and the bad input of real chats: another user under the same session id, turns out of
order or a day apart, an earlier turn never scored, a 1,000-turn conversation, documents not recorded, an
LLM record without an LLM judge; never a turn counted twice, never a revision number given twice."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from _helpers import judge_client, nothing_left_open
from grounding_turns import (
    INVENTED,
    RESTATED,
    T0,
    Harness,
    evidence_of,
    figures_judge,
    grounded_in,
    interaction,
    scored,
    trace_of,
)

from tracescore.alert import EstimateWindow
from tracescore.consume import decode_message
from tracescore.conversations._stored import TurnState
from tracescore.conversations._windows import WINDOW_START_HEADER, window_start
from tracescore.emit import evaluation_record
from tracescore.model import (
    ConversationSource,
    EvaluationRecord,
    Interaction,
    MetricResult,
    TurnEvidence,
    history_conversation_id,
    revision_key,
    turn_digest,
)
from tracescore.score import OpenAIJudge, evaluate
from tracescore.testing.judge_server import JudgeServer


def chat(harness: Harness, third: str | None = None, first: str | None = None, **turn: object) -> list:
    """Three turns, each turn's documents then its record; the third answers `third`."""
    turns = [
        interaction(1, answer=first, **turn),  # type: ignore[arg-type]
        interaction(2, **turn),  # type: ignore[arg-type]
        interaction(3, answer=third, **turn),  # type: ignore[arg-type]
    ]
    for t in turns:
        harness.feed(evidence_of(t), scored(t))
    return turns


def judged_by_llm(harness: Harness, llm: OpenAIJudge) -> MetricResult:
    """A chat whose third turn the LLM judge scored, its record (picked by the cascade) fed; its verdict."""
    turns = chat(harness)
    [verdict] = evaluate(turns[2].record, ["faithfulness"], llm)
    harness.feed(evaluation_record(turns[2], verdict, None, selection="cascade", inclusion_probability=1.0))
    return verdict


def test_a_follow_up_resting_on_an_earlier_turns_retrieval_is_grounded_in_a_revision() -> None:
    harness = Harness()
    turns = chat(harness)
    first = scored(turns[2])
    assert first.label == "hallucinated", "alone, this turn's documents do not give the price"
    [revised] = harness.checkpoint()
    assert (revised.trace_id, revised.metric, revised.judge) == (first.trace_id, "faithfulness", "offline")
    assert (revised.revision, revised.supersedes) == (1, revision_key(first.trace_id, first.span_id, 0))
    assert (revised.label, revised.score) == ("faithful", 1.0)
    [source] = grounded_in(revised)
    assert source["trace_id"] == trace_of(1) and source["turns_back"] == 2
    assert source["retrieved_as"] == "retriever" and source["kind"] == "earlier_turn"
    assert revised.details["earlier_turns"]["status"] == "grounded"
    assert "trace " + trace_of(1) in (revised.reason or "")
    # The conversation counts the revised verdict, the turn once.
    assert harness.outcome(revised) == (1, "ok", 1.0, "faithful")
    conversation = harness.tracker.get(("support-chat", "c-1"))
    assert conversation is not None and len(conversation.turns) == 3
    [(_, record)] = conversation.records(0.95, T0)
    assert (record.turns, record.turns_flagged, record.label) == (3, 0, "passed")
    # Read back (Kafka brings it to stage 1 again): nothing new to decide, and never judged twice.
    assert harness.checkpoint() == []
    assert harness.stats.grounding.counts["rejudged"] == 1


def test_an_invented_figure_and_a_restated_hallucination_stay_flagged_and_write_nothing() -> None:
    invented = Harness()
    chat(invented, third=INVENTED)
    assert invented.checkpoint() == []
    restated = Harness()
    turns = chat(restated, third="The weekend add-on costs 7 euros a month.", first=RESTATED)
    assert scored(turns[0]).label == "hallucinated"
    assert restated.checkpoint() == [], "an earlier answer is no evidence: its documents say 9 euros"
    for harness in (invented, restated):
        # A later turn changes nothing earlier: the third is not judged again against the same documents.
        harness.feed(evidence_of(interaction(4)))
        assert harness.checkpoint() == []
        assert harness.stats.grounding.counts["rejudged"] == 1
        assert harness.stats.grounding.counts["unsupported"] == 1
        [(_, record)] = harness.tracker.get(("support-chat", "c-1")).records(0.95, T0)  # type: ignore[union-attr]
        assert record.label == "flagged"


def test_another_users_turns_under_the_same_session_id_are_never_evidence() -> None:
    harness = Harness()
    other = interaction(1, user="u-other")
    mine = interaction(3, user="u-1")
    harness.feed(evidence_of(other), scored(other), evidence_of(mine), scored(mine))
    assert harness.checkpoint() == []
    assert harness.stats.grounding.counts["other_user_turns_left_out"] == 1
    # The same documents from the same user ground it.
    harness.feed(evidence_of(interaction(2, user="u-1", documents=other.record.contexts)))
    [revised] = harness.checkpoint()
    assert grounded_in(revised)[0]["trace_id"] == trace_of(2)


def inferred(
    turn: Interaction, history: list[str] | None = None
) -> tuple[TurnEvidence, EvaluationRecord | None]:
    """`turn` of a conversation inferred from its resent history (`tracescore consume`'s
    `infer_conversations`): its documents under its own (question, answer) digest, and with `history` (the
    digests its prompt resent) its record."""
    digest = turn_digest(turn.record.query or "", turn.record.answer)
    evidence = evidence_of(turn).model_copy(update={"turn_digest": digest})
    if history is None:
        return evidence, None
    return evidence, scored(turn, conversation_source=ConversationSource.HISTORY, history_turns=history)


def test_an_inferred_conversation_is_grounded_only_in_the_turns_its_history_resent() -> None:
    """Two chats that opened alike share an inferred id: another chat's later turn (which retrieved the price)
    is never evidence for this one, whose history does not hold it; this chat's own first turn is."""
    harness = Harness()
    conversation = "history:opened-alike"
    other = interaction(2, conversation=conversation, user=None, documents=interaction(1).record.contexts)
    mine_first = interaction(1, conversation=conversation, user=None)
    mine = interaction(3, conversation=conversation, user=None)
    first_digest = turn_digest(mine_first.record.query or "", mine_first.record.answer)
    other_evidence, _ = inferred(other)
    mine_evidence, mine_record = inferred(mine, history=[first_digest])
    assert mine_record is not None and mine_record.label == "hallucinated"
    harness.feed(other_evidence, mine_evidence, mine_record)
    assert harness.checkpoint() == [], "the other chat's turn is not in this turn's history"
    assert harness.stats.grounding.counts["turns_not_in_history"] == 1
    harness.feed(inferred(mine_first)[0])
    [revised] = harness.checkpoint()
    assert revised.label == "faithful" and grounded_in(revised)[0]["trace_id"] == mine_first.span.trace_id
    assert revised.details["earlier_turns"]["turns_not_in_history"] == 1


def window_copy(turn: Interaction, history: list[str]) -> TurnEvidence:
    """A follow-up's documents as stage 1 re-keys them also where a window starting with its pair is read."""
    evidence, _ = inferred(turn)
    first = history_conversation_id(evidence.service_name, None, history[0])
    evidence = evidence.model_copy(update={"session_id": first, "history_turns": history})
    start = window_start(evidence)
    assert start is not None
    return evidence.model_copy(update={"session_id": start})


def test_a_window_fallen_to_one_pair_is_grounded_in_that_turns_documents_unless_two_chats_share_it() -> None:
    """Turn 3 resent only turn 2's pair (LlamaIndex's token limit after a long answer): it is read under the
    id that pair names, where turn 2's documents (a follow-up of another conversation, which retrieved the
    price) are held too, so it is grounded in them. That copy is only evidence: it says nothing of which turn
    follows which, and decides no window's join. Where another chat's turn of the same pair (a thank-you
    both got) is held there too, neither copy counts."""
    second = interaction(2, conversation="a", user=None, documents=interaction(1).record.contexts)
    digest = turn_digest(second.record.query or "", second.record.answer)
    window = history_conversation_id(second.span.service_name, None, digest)
    third = interaction(3, conversation=window, user=None)
    third_evidence, third_record = inferred(third, history=[digest])
    assert third_record is not None and third_record.label == "hallucinated"
    alone = Harness()
    alone.feed(window_copy(second, ["d1"]), also=[(WINDOW_START_HEADER, b"1")])
    assert alone.logic.windows is not None and alone.logic.windows.open() == 0, "no tail announced"
    assert not alone.grounder.store.holds_turn((second.span.service_name, window), digest), "decides no join"
    alone.feed(third_evidence, third_record)
    [revised] = alone.checkpoint()
    assert revised.label == "faithful" and grounded_in(revised)[0]["trace_id"] == second.span.trace_id
    shared = Harness()
    other = interaction(2, conversation="b", user=None, at=T0 + timedelta(seconds=90))
    for turn in (second, other):
        shared.feed(window_copy(turn, ["d1"]), also=[(WINDOW_START_HEADER, b"1")])
    shared.feed(third_evidence, third_record)
    assert shared.checkpoint() == [], "a pair two chats share is no evidence of whose chat this is"
    assert shared.stats.grounding.counts["window_pairs_shared"] == 2


def test_a_restated_hallucination_in_an_inferred_conversation_stays_flagged() -> None:
    """Turn 1 said 7 euros where its documents say 9; turn 3, resending turn 1's question and answer, repeats
    7 euros: turn 1's documents are judged, never its answer."""
    harness = Harness()
    conversation = "history:restated"
    first = interaction(1, conversation=conversation, user=None, answer=RESTATED)
    third = interaction(
        3, conversation=conversation, user=None, answer="The weekend add-on costs 7 euros a month."
    )
    first_evidence, _ = inferred(first)
    third_evidence, third_record = inferred(third, history=[first_evidence.turn_digest or ""])
    harness.feed(first_evidence, third_evidence, third_record)
    assert harness.checkpoint() == []
    assert harness.stats.grounding.counts["unsupported"] == 1


def test_an_earlier_turn_read_after_the_follow_up_grounds_it_then() -> None:
    harness = Harness()
    third, first = interaction(3), interaction(1)
    harness.feed(evidence_of(third), scored(third))
    assert harness.checkpoint() == [], "nothing earlier yet"
    harness.feed(evidence_of(first), scored(first))
    [revised] = harness.checkpoint()
    assert revised.label == "faithful" and grounded_in(revised)[0]["turns_back"] == 1


def test_turns_started_within_one_millisecond_are_ordered_by_their_microseconds() -> None:
    """A fast app (or a script trying the feature) starts its follow-up within the millisecond of the
    turn before: the follow-up is still grounded in it, and the order survives the state topic."""
    first_at = T0 + timedelta(microseconds=200)
    first, third = interaction(1, at=first_at), interaction(3, at=first_at + timedelta(microseconds=300))
    harness = Harness()
    harness.feed(evidence_of(third), scored(third))
    harness.feed(evidence_of(first), scored(first))
    held = sorted(
        (state for _, _, state in harness.logic.to_save() if isinstance(state, TurnState)),
        key=lambda t: t.trace_id,
    )
    [revised] = harness.checkpoint()
    assert revised.label == "faithful" and grounded_in(revised)[0]["turns_back"] == 1
    raw = [harness.logic.codec.decode(harness.logic.codec.encode(t)) for t in held]
    assert [t.started for t in raw] == [t.started for t in held]
    assert raw[0].started is not None and raw[1].started == raw[0].started + 300


def test_an_earlier_turn_never_scored_still_counts_by_its_documents() -> None:
    harness = Harness()
    first, third = interaction(1), interaction(3)
    harness.feed(evidence_of(first))  # sampled out, or its judge failed: documents, no record
    harness.feed(evidence_of(third), scored(third))
    [revised] = harness.checkpoint()
    assert grounded_in(revised)[0]["trace_id"] == first.span.trace_id


def test_turns_a_day_apart_ground_within_forget_seconds_and_not_after() -> None:
    within = Harness()
    first, late = interaction(1), interaction(3, at=T0 + timedelta(hours=23))
    within.feed(evidence_of(first))
    within.checkpoint(T0 + timedelta(minutes=5))
    within.feed(evidence_of(late), scored(late), arrival=T0 + timedelta(hours=23))
    [revised] = within.checkpoint(T0 + timedelta(hours=23))
    assert revised.label == "faithful"

    after = Harness()
    later = interaction(3, at=T0 + timedelta(hours=25))
    after.feed(evidence_of(first))
    after.checkpoint(T0 + timedelta(hours=25))  # a day without a turn: forgotten, its documents deleted
    assert after.stats.grounding.counts["forgotten"] == 1 and len(after.grounder.store) == 0
    after.feed(evidence_of(later), scored(later), arrival=T0 + timedelta(hours=25))
    assert after.checkpoint(T0 + timedelta(hours=25)) == []


def test_a_1000_turn_conversation_stays_bounded_and_counts_what_it_dropped() -> None:
    harness = Harness(max_turns=200, evidence_chars=8_000)
    for n in range(1, 1001):
        turn = interaction(n, at=T0 + timedelta(seconds=n), documents=(f"Fact {n}: code {n * 7}. " * 20,))
        harness.feed(evidence_of(turn))
    [held] = harness.grounder.store.held()
    assert len(held.turns) == 200, "the most recent max_turns turns"
    kept = sum(len(d.text) for t in held.turns.values() if t.evidence for d in t.evidence.documents)
    assert kept <= 8_000
    counts = harness.stats.grounding.counts
    assert counts["turns_past_cap"] == 800 and counts["documents_dropped"] > 0
    assert min(t.started_ms or 0 for t in held.turns.values()) > int(
        (T0 + timedelta(seconds=800)).timestamp() * 1000
    )
    assert harness.grounder.store.chars <= 200 * 1_000 + 8_000, "per turn a fixed cost, and the documents"


def test_instance_memory_is_bounded_the_least_recently_active_conversation_dropped() -> None:
    harness = Harness(max_evidence_chars=100_000)
    for c in range(200):
        harness.feed(evidence_of(interaction(1, conversation=f"c-{c}", documents=("x" * 2_000,))))
    assert harness.grounder.store.chars <= 100_000
    assert harness.stats.grounding.counts["evidence_evicted"] > 0
    assert harness.grounder.store.get(("support-chat", "c-0")) is None, "the least recently active first"
    assert harness.grounder.store.get(("support-chat", "c-199")) is not None


def test_a_burst_of_follow_ups_is_judged_over_several_ticks_and_none_is_lost() -> None:
    """A tick judges a bounded number of conversations (the service keeps polling Kafka between ticks); the
    rest stay open for the next tick."""
    harness = Harness()
    for c in range(100):
        chat(harness, conversation=f"c-{c}")
    first = harness.checkpoint()
    assert 0 < len(first) < 100 and harness.grounder.open() > 0, "the rest wait, still open"
    rest = harness.checkpoint()
    assert len(first) + len(rest) == 100 and harness.grounder.open() == 0
    assert {r.session_id for r in first + rest} == {f"c-{c}" for c in range(100)}, "each once"


def test_without_documents_for_the_earlier_turns_the_record_says_so_and_keeps_its_verdict() -> None:
    harness = Harness()
    first, third = interaction(1), interaction(3)
    harness.feed(scored(first), evidence_of(third), scored(third))  # turn 1: its record, no documents
    assert harness.checkpoint(caught_up=False) == [], "its documents may be on their way"
    [noted] = harness.checkpoint()
    assert (noted.revision, noted.label) == (1, "hallucinated")
    assert noted.details["earlier_turns"]["status"] == "not_rejudged"
    assert noted.details["earlier_turns"]["why"] == "not_captured"
    assert "content capture off" in noted.details["earlier_turns"]["note"]
    assert harness.checkpoint() == [], "said once"
    harness.feed(evidence_of(first))  # the documents arrive after all: grounded, a revision above the note
    [revised] = harness.checkpoint()
    assert (revised.revision, revised.label) == (2, "faithful")


def test_an_llm_record_without_the_llm_judge_says_so_and_pairs_with_its_grounded_offline_record() -> None:
    harness = Harness()
    turns = chat(harness)
    offline = scored(turns[2])
    llm = scored(
        turns[2], judge="openai:judge-test", selection="baseline", inclusion_probability=0.1,
        offline_score=offline.score, offline_label=offline.label, annotator_kind="LLM",
    )  # fmt: skip
    harness.feed(llm)
    revised = {r.judge: r for r in harness.checkpoint()}
    assert revised["offline"].label == "faithful"
    noted = revised["openai:judge-test"]
    assert noted.details["earlier_turns"]["why"] == "no_judge" and noted.label == "hallucinated"
    # Its pair follows the offline record's grounding, so estimates pair like with like.
    assert (noted.offline_score, noted.offline_label) == (1.0, "faithful")
    assert (noted.selection, noted.inclusion_probability) == ("baseline", 0.1)


def test_a_newer_reading_of_the_turn_never_shares_a_revision_number_with_a_grounding() -> None:
    harness = Harness()
    turns = chat(harness)
    [grounded] = harness.checkpoint()
    assert grounded.revision == 1
    # Late spans: consume scores the turn again, as its revision 1, with the same open claim.
    late = scored(turns[2], revision=1, supersedes=revision_key(grounded.trace_id, grounded.span_id, 0))
    harness.feed(late)
    [again] = harness.checkpoint()
    assert (again.revision, again.label) == (2, "faithful"), "above both"
    assert harness.outcome(again)[0] == 2


def test_a_revision_found_on_the_topic_after_a_crash_is_not_written_again() -> None:
    harness = Harness()
    chat(harness)
    harness.logic.tick(T0, lambda partition: True)
    [output] = harness.logic.outputs({})
    # The restart decides the same again: same id and digest, found on the topic, marked written.
    restarted = Harness()
    chat(restarted)
    restarted.logic.tick(T0, lambda partition: True)
    [again] = restarted.logic.outputs({output.id: output.digest})
    assert (again.id, again.digest) == (output.id, output.digest)
    restarted.logic.written([again], {output.id: output.digest})
    assert restarted.written[-1].revised == [], "found, not written again"
    # Another record already under that revision (a crash between two decisions): the next number.
    other = Harness()
    chat(other)
    other.logic.tick(T0, lambda partition: True)
    [moved] = other.logic.outputs({output.id: "another digest"})
    assert moved.id != output.id and b'"revision":2' in moved.value


def test_held_turns_round_trip_through_the_state_topic_and_decide_the_same_after_a_restart() -> None:
    harness = Harness()
    chat(harness)
    saved = harness.logic.to_save()
    held = [state for _, _, state in saved if isinstance(state, TurnState)]
    assert len(held) == 3, "one entry per turn, not one per conversation: a document is saved once"
    assert [len(t.checks) for t in held] == [0, 0, 1], "the third's open claims beside its documents"
    restarted = Harness()
    for partition, key, state in saved:
        if state is not None:
            raw = restarted.logic.codec.encode(state)
            restarted.logic.restore(partition, key, restarted.logic.codec.decode(raw), migrated=False)
    [revised] = restarted.checkpoint()
    [original] = harness.checkpoint()
    assert revised.model_dump(exclude={"timestamp"}) == original.model_dump(exclude={"timestamp"})


def test_an_llm_record_is_judged_again_by_the_same_llm_judge() -> None:
    with JudgeServer() as server:
        server.responder = figures_judge
        llm = judge_client(server.base_url)
        harness = Harness(llm_judge=llm)
        assert judged_by_llm(harness, llm).label == "hallucinated"
        before = server.stats.chat_requests
        revised = {r.judge: r for r in harness.checkpoint()}
        assert server.stats.chat_requests == before + 1, "one call: the open claims, together"
    judged = revised["openai:judge-test"]
    assert (judged.label, judged.selection, judged.revision) == ("faithful", "cascade", 1)
    assert grounded_in(judged)[0]["trace_id"] == trace_of(1)
    assert judged.details["earlier_turns"]["judge"] == "openai:judge-test"
    assert judged.usage.prompt_tokens > 0, "what judging again cost, on the revision"
    # The offline record's grounding gives the LLM record its pair in the same revision.
    assert (judged.offline_score, judged.offline_label) == (1.0, "faithful")


def test_a_newer_reading_with_nothing_to_judge_again_is_written_above_a_grounding_that_said_otherwise() -> (
    None
):
    harness = Harness()
    turns = chat(harness)
    [grounded] = harness.checkpoint()
    assert grounded.label == "faithful"
    # Late spans: consume's revision 1 says the turn contradicts its documents (nothing left to ground).
    late = scored(turns[2], revision=1)
    late = late.model_copy(update={"details": {"claims": [], "label_rule": "any_unsupported"}, "score": 0.0})
    harness.feed(late)
    [again] = harness.checkpoint()
    assert (again.revision, again.score, again.label) == (2, 0.0, late.label), "the newer reading stands"
    assert again.details["earlier_turns"]["status"] == "superseded"
    assert harness.checkpoint() == []


def test_an_llm_record_that_passed_follows_its_offline_records_grounding() -> None:
    harness = Harness()
    turns = chat(harness)
    offline = scored(turns[2])
    # The LLM judge found the turn faithful (no claim to judge again); its offline pair was flagged.
    llm = scored(
        turns[2], judge="openai:judge-test", selection="baseline", inclusion_probability=0.1, score=1.0,
        label="faithful", offline_score=offline.score, offline_label=offline.label, annotator_kind="LLM",
    )  # fmt: skip
    llm = llm.model_copy(update={"details": {"claims": [{"claim": "c", "verdict": "FULLY_SUPPORTED"}]}})
    harness.feed(llm)
    revised = {r.judge: r for r in harness.checkpoint()}
    paired = revised["openai:judge-test"]
    assert (paired.revision, paired.label, paired.offline_label) == (1, "faithful", "faithful")
    assert harness.checkpoint() == [], "paired once"


def test_the_revision_has_its_evaluation_span_under_the_turns_span() -> None:
    harness = Harness(spans_topic="spans")
    turns = chat(harness)
    harness.logic.tick(T0, lambda partition: True)
    span_output, record_output = harness.logic.outputs({})
    assert (span_output.topic, span_output.verified, record_output.topic) == (
        "spans",
        False,
        "tracescore.evaluations",
    )
    [span] = decode_message(span_output.value)
    assert (span.trace_id, span.parent_span_id) == (turns[2].span.trace_id, turns[2].span.span_id)
    assert span.attributes["tracescore.evaluation.revision"] == 1
    assert span.attributes["gen_ai.evaluation.score.label"] == "faithful"
    assert json.loads(record_output.value)["evaluation_span_id"] == span.span_id


def test_the_alert_estimate_counts_a_grounded_turn_once_with_its_revised_verdict() -> None:
    harness = Harness()
    turns = chat(harness)
    window = EstimateWindow(maxlen=50, signal="label")
    originals = [scored(t) for t in turns]
    for record in originals:
        window.add(record)
    assert window.estimate(0.95).value == pytest.approx(2 / 3)  # type: ignore[union-attr]
    [revised] = harness.checkpoint()
    window.add(revised)
    window.add(originals[2])  # the older revision read again late changes nothing
    estimate = window.estimate(0.95)
    assert estimate is not None and (len(window), estimate.n, estimate.value) == (3, 3, 1.0)


def test_closing_the_grounder_closes_the_llm_judges_connections() -> None:
    """A stopped `tracescore conversations` leaves no socket of its LLM judge open."""
    with nothing_left_open():
        with JudgeServer() as server:
            server.responder = figures_judge
            llm = judge_client(server.base_url)
            harness = Harness(llm_judge=llm)
            judged_by_llm(harness, llm)
            assert any(r.judge == "openai:judge-test" for r in harness.checkpoint()), (
                "judged again by the LLM"
            )
            Harness.created.remove(harness)
            harness.close()
        del llm, harness
