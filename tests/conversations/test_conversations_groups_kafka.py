"""Two conversations groups on the same evaluation records, on the real broker (as tests/alert's
test_alert_groups_kafka for alerting): each group's internal topics (the re-keyed turns, the state) are its
own, so each records every conversation once and restores only its own state."""

from __future__ import annotations

import pytest
from _helpers import both_stages_read, wait_until
from conversation_service import SERVICE_WAIT_S, Running, config, produce
from conversation_turns import turn

from tracescore.conversations import ConversationsConfig

pytestmark = pytest.mark.kafka


def group_config(bootstrap: str, topic_prefix: str, group: str) -> ConversationsConfig:
    """The test's config with the group's internal topics left to their defaults (named after the group)."""
    internal = {"turns_topic", "state_topic", "legacy_state_topic"}
    values = config(bootstrap, topic_prefix).model_dump(exclude=internal)
    return ConversationsConfig(**{**values, "group_id": f"{topic_prefix}-{group}"})


def read_all(bootstrap: str, cfg: ConversationsConfig) -> None:
    both_stages_read(bootstrap, cfg.group_id, cfg.evaluations_topic, "turns", cfg.turns_topic)


def test_two_groups_on_the_same_records_each_record_every_conversation_once(
    bootstrap: str, topic_prefix: str
) -> None:
    first, second = (group_config(bootstrap, topic_prefix, g) for g in ("first", "second"))
    assert first.turns_topic == f"{topic_prefix}-first.turns" != second.turns_topic
    assert first.state_topic == f"{topic_prefix}-first.turns.changelog" != second.state_topic
    conversations = [f"c-{i}" for i in range(4)]
    turns = [turn(10 * i + n, 1.0, c) for i, c in enumerate(conversations) for n in range(3)]
    produce(bootstrap, first.evaluations_topic, list(turns))
    once = [(c, 0, 3) for c in conversations]  # (conversation, revision, turns): recorded once, whole

    for cfg in (first, second):
        with Running(cfg) as running:
            wait_until(
                lambda: len(running.written) >= len(conversations),
                "a record for each conversation",
                timeout_s=SERVICE_WAIT_S,
            )
            read_all(bootstrap, cfg)
            # Sharing the first group's turns topic, the second read its re-keyed turns too: twice as many.
            assert running.service.stats.turn_records == len(turns), cfg.group_id
        assert sorted((r.conversation_id, r.revision, r.turns) for r in running.written) == once, cfg.group_id
        # Sharing its state topic, the second group restored the first's conversations as its own and wrote
        # none of them.
        assert running.service.stats.state["restored"] == 0, cfg.group_id

    # The first group again, and a later turn of c-0: its own state restored, so the record is revised
    # (revision 1, the four turns), not written anew as a one-turn conversation.
    produce(bootstrap, first.evaluations_topic, [turn(3, 1.0, "c-0")])
    with Running(first) as again:
        wait_until(
            lambda: len(again.written) >= 1, "a record from the restarted service", timeout_s=SERVICE_WAIT_S
        )
        read_all(bootstrap, first)
    assert [(r.conversation_id, r.revision, r.turns) for r in again.written] == [("c-0", 1, 4)]
    assert again.service.stats.state["restored"] >= len(conversations)
