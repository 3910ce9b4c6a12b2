"""Handover: what a committed offset tells the partition's next owner about the messages it reads again.
The filter may keep a finished trace (scored twice, as without a handover), never drop an unfinished one;
it fits Kafka's default metadata limit whatever it holds."""

from __future__ import annotations

import logging
import uuid

import pytest
from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from tracescore.consume import ConsumerSettings, TraceAssembler
from tracescore.consume._checkpoint import Checkpoint
from tracescore.consume._handover import Handover, TraceFilter
from tracescore.consume._rebalance import Rebalance

KAFKA_METADATA_LIMIT = 4096  # offset.metadata.max.bytes, the broker's default


def ids(n: int) -> list[str]:
    return [uuid.uuid4().hex for _ in range(n)]


def test_the_filter_never_drops_a_trace_it_was_given_and_rarely_keeps_another() -> None:
    unfinished, finished = ids(1000), ids(100_000)
    kept = TraceFilter.of(unfinished)
    assert all(t in kept for t in unfinished)
    false_positives = sum(t in kept for t in finished)
    assert false_positives / len(finished) < 0.001, false_positives


def test_below_until_only_unfinished_traces_are_kept_and_past_it_everything() -> None:
    handover = Handover.build(100, ["a", "b"], None)
    assert handover is not None and handover.until == 100
    assert handover.keeps(99, "a") and handover.keeps(0, "b")
    assert not handover.keeps(99, "finished")
    assert handover.keeps(100, "finished") and handover.keeps(10_000, "new")


def test_nothing_left_and_nothing_given_is_no_handover() -> None:
    assert Handover.build(100, None, None) is None


@pytest.mark.parametrize("unfinished", [0, 10, 1_000, 50_000])
def test_it_survives_the_commit_and_fits_kafkas_default_limit(unfinished: int) -> None:
    traces = ids(unfinished)
    handover = Handover.build(7, traces, None)
    assert handover is not None
    text = handover.encode()
    assert len(text.encode()) < KAFKA_METADATA_LIMIT
    back = Handover.decode(text)
    assert back is not None and back.until == 7
    assert all(back.keeps(3, t) for t in traces)


def test_metadata_that_is_not_a_handover_is_none_and_a_broken_one_is_an_error() -> None:
    assert Handover.decode("") is None and Handover.decode(None) is None
    assert Handover.decode("written by another tool") is None
    with pytest.raises(ValueError):
        Handover.decode('{"tracescore_handover":1,"segments":[[5,"not base64!"]]}')
    with pytest.raises(ValueError, match="version"):
        Handover.decode('{"tracescore_handover":99,"segments":[]}')
    for broken in (
        "",
        ',"segments":[]',
        ',"segments":5',
        ',"segments":[[1,"AAAA"]]',
        ',"segments":[["a","x"]]',
    ):
        with pytest.raises(ValueError):  # never anything else: a member reads whatever a commit carries
            Handover.decode('{"tracescore_handover":1' + broken + "}")


def test_a_handover_passed_on_keeps_what_was_not_read_past_and_stays_bounded() -> None:
    handover: Handover | None = None
    # Six members in a row, each given the partition and revoked before reading as far as the one before
    # it: each leaves one trace unfinished below where it stopped.
    for step in range(6):
        handover = Handover.build(100 - 10 * step, [f"trace-{step}"], handover)
    assert handover is not None and handover.until == 100
    assert len(handover.segments) == 4, "neighbours merged: the metadata stays small"
    assert len(handover.encode()) < KAFKA_METADATA_LIMIT
    assert handover.keeps(45, "trace-5") and not handover.keeps(45, "trace-4")
    assert handover.keeps(55, "trace-4") and not handover.keeps(55, "trace-5")
    assert all(handover.keeps(95, f"trace-{step}") for step in range(3)), "merged: kept over both ranges"
    assert not handover.keeps(95, "trace-5")
    assert handover.keeps(100, "anything")


def test_a_later_member_that_read_past_an_earlier_handover_drops_it() -> None:
    earlier = Handover.build(20, ["theirs"], None)
    later = Handover.build(30, ["mine"], earlier)
    assert later is not None and len(later.segments) == 1
    assert later.keeps(25, "mine") and not later.keeps(25, "theirs")


def test_a_handover_of_another_version_is_not_used_and_what_follows_the_offset_is_read_as_new(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Members of two tracescore versions in one group (a rolling upgrade): a committed offset whose handover
    is of a version this member does not read leaves it nothing to skip by, so every message after the offset
    is read as new (a trace may be scored twice, none is lost), said in one warning."""
    checkpoint = Checkpoint(TraceAssembler(), commit_interval_s=5.0)
    rebalance = Rebalance(
        ConsumerSettings(),
        checkpoint,
        TraceAssembler(),
        judging=None,
        consumer=lambda: None,  # type: ignore[arg-type]
    )
    ours, other = TopicPartition("spans", 0), TopicPartition("spans", 1)
    handover = Handover.build(100, ["a"], None)
    assert handover is not None
    rebalance._take_handover(ours, OffsetAndMetadata(40, handover.encode(), -1))
    newer = handover.encode().replace('"tracescore_handover":1', '"tracescore_handover":2')
    with caplog.at_level(logging.WARNING, logger="tracescore.consume"):
        rebalance._take_handover(other, OffsetAndMetadata(40, newer, -1))
    assert list(checkpoint.handovers) == [ours]
    [warning] = caplog.records
    assert "handover version 2, not 1" in warning.getMessage()
    assert "every message after it is read as new" in warning.getMessage()
