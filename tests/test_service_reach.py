"""`BrokerReach`, the service base's word on a broker outage: said once per outage after a grace (a
coordinator moving is found again within it), with the time of the last answer, again every minute while
it lasts, and its end; a consumer that never joined its group says nothing either way. The services' own
tests pause a real broker (tests/consume/test_consume_broker_outage_kafka.py,
tests/conversations/test_conversations_broker_outage_kafka.py)."""

from __future__ import annotations

import logging
import math
from datetime import datetime
from types import SimpleNamespace

import pytest

from tracescore._service import BrokerReach, Reach

WALL = 1_800_000_000.0  # the wall clock at monotonic 1000 s
LOG = logging.getLogger("tracescore.test_reach")


class Seen:
    """`BrokerReach.seen` at monotonic `now`, the wall clock going with it."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        caplog.set_level(logging.INFO, logger=LOG.name)
        self.now = 0.0
        self.reach = BrokerReach(
            LOG,
            "tracescore test",
            "broker:9092",
            lambda: (None, -math.inf),
            lambda: "holds 3 things",
            retry_s=30.0,
            wall=lambda: WALL + self.now - 1000.0,
        )

    def __call__(self, reachable: bool | None, last_answer: float, now: float) -> None:
        self.now = now
        self.reach.seen(reachable, last_answer, now)


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOG.name]


def clock(at: float) -> str:
    """HH:MM:SS of monotonic `at`, on the wall clock given the reach (at 1000 s: WALL)."""
    return datetime.fromtimestamp(WALL - (1000.0 - at)).strftime("%H:%M:%S")


def test_an_outage_is_said_once_after_the_grace_with_its_last_answer_then_each_minute_then_its_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen = Seen(caplog)
    reach = seen.reach
    seen(True, 900.0, 900.0)
    seen(False, 900.0, 930.0)  # unknown from here: a coordinator moving, maybe
    seen(False, 900.0, 934.0)
    assert lines(caplog) == [] and not reach.unreachable

    # Said at the end of the grace, since the last answer (a heartbeat is cleared only once it times out).
    seen(False, 900.0, 945.0)
    [(level, said)] = lines(caplog)
    assert level == logging.WARNING and reach.unreachable and reach.outages == 1
    assert said.startswith(
        f"the Kafka broker is unreachable since {clock(900.0)}, for 45s (bootstrap broker:9092"
    )
    assert "meanwhile tracescore test holds 3 things; it retries on its own" in said
    assert "a backoff of 30s at most" in said and said.endswith("nothing is lost")

    seen(False, 900.0, 1004.0)  # less than a minute after: not again
    assert len(lines(caplog)) == 1
    seen(False, 900.0, 1005.0)
    assert len(lines(caplog)) == 2
    assert f"unreachable since {clock(900.0)}, for 105s" in lines(caplog)[1][1]

    seen(True, 1010.0, 1010.0)
    assert lines(caplog)[2] == (
        logging.INFO,
        "the Kafka broker is reachable again after 110s (bootstrap broker:9092): tracescore test goes on "
        "where it was",
    )
    assert not reach.unreachable
    seen(True, 1011.0, 1011.0)
    assert len(lines(caplog)) == 3  # once


def test_a_short_loss_is_not_said_and_a_second_outage_is_said_again(caplog: pytest.LogCaptureFixture) -> None:
    seen = Seen(caplog)
    reach = seen.reach
    seen(False, -math.inf, 100.0)
    seen(True, 100.0, 104.0)  # back within the grace
    seen(False, 104.0, 200.0)
    seen(False, 104.0, 204.0)
    assert lines(caplog) == []
    seen(False, 104.0, 205.5)
    seen(True, 206.0, 206.0)
    seen(False, -math.inf, 300.0)  # no heartbeat answered yet: since it was first seen unknown
    seen(False, -math.inf, 306.0)
    said = [text for level, text in lines(caplog) if level == logging.WARNING]
    assert len(said) == 2 and reach.outages == 2
    assert f"since {clock(300.0)}, for 6s" in said[1], said[1]


def test_not_joined_says_nothing_either_way(caplog: pytest.LogCaptureFixture) -> None:
    seen = Seen(caplog)
    reach = seen.reach
    for at in range(0, 300, 10):
        seen(None, -math.inf, float(at))
    assert lines(caplog) == [] and not reach.unreachable


def member(coordinator_id: str | None, last_receive: float = -math.inf) -> SimpleNamespace:
    """A consumer as `Reach` reads it: kafka-python's coordinator id and heartbeat."""
    heartbeat = SimpleNamespace(last_receive=last_receive)
    return SimpleNamespace(_coordinator=SimpleNamespace(coordinator_id=coordinator_id, heartbeat=heartbeat))


def test_the_broker_is_unreachable_only_once_every_joined_member_lost_its_coordinator() -> None:
    waiting, joined = member(None), member("coordinator-1", 50.0)
    reach = Reach([waiting, joined])
    assert reach() == (True, 50.0)
    joined._coordinator.coordinator_id = None
    assert reach() == (False, 50.0)  # the one that never joined does not count
    waiting._coordinator.coordinator_id = "coordinator-1"
    assert reach() == (True, 50.0)
    assert Reach([member(None)])() == (None, -math.inf)
    assert Reach([SimpleNamespace()])() == (None, -math.inf)  # a client without one (kafka-python changed)
