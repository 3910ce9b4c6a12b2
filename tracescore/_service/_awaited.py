"""A group member's subscription to inputs that their writers create: never to a topic that does not exist,
and every rejoin it starts waited for until it completes.

Subscribed to a topic not created yet, members join on metadata without its partitions: the leader assigns
none of it, and rejoins when they appear, while each member's metadata catches up in its own time. So a
member subscribes only to the inputs that exist, looks for the others every `LOOK_EVERY_S` (on one client of
its own for the whole wait, which never creates them, off the poll thread so a stop is never kept waiting)
and extends its subscription when one appears, its own metadata brought up to date first: its join, and its
assignment when it leads, see every partition of every topic it subscribes to.

Extending it is a rejoin, and kafka-python 3.0.12 waits for a rejoin in later polls only when its
coordinator asked for one (`rejoin_needed`: a first join, a rebalance the broker announced). A rejoin that a
changed subscription starts (or, for the leader, a change of the metadata it assigned from) is waited for in
the poll that sends it alone: once the JoinGroup is sent (`_joined_subscription` updated), or the leader has
assigned (`_assignment_snapshot`), `need_rejoin()` is false and no later poll waits for it. When it takes
longer than that poll (the other members must rejoin too), the member never takes its assignment, its
heartbeats stay off, the group drops it after its session, and it never notices: two members whose input
appeared, one of them read nothing from then on (its LeaveGroup at the stop: UnknownMemberIdError). So
before each poll a join under way that no poll would wait for is asked for (`_join_waited_for`): the poll
waits for it as for a first join.

A join that a poll waited for too briefly is not finished with either: kafka-python 3.0.12 leaves it under way
for the next poll, but a join that completes between two polls (the other members rejoined meanwhile) is
thrown away by the next, which sends a new JoinGroup. A follower gets the same generation back; a leader's
new JoinGroup starts another rebalance, which completes at the other members' pace, most likely between two
of its polls again: a member whose loop spends most of its time outside the poll (checkpoints, restores,
the other stage's poll) rebalanced the group once a heartbeat interval for as long as it ran, never taking
the partitions it assigned itself (no member read them), its heartbeats off meanwhile. So each member takes
a join that completed while no poll waited at its next poll (`take_completed_joins`), as the Java client
does.

These guards are `GuardedJoins`, which every group member of tracescore's joins through: stage 1's and
`tracescore consume`'s (`AwaitedInputs`), and stage 2's (`KeyedStage`), whose leader assigned none of the
keyed topic when its first join came before its own metadata had the topic (created by another client just
before), and rejoined once it had: a rejoin its metadata started, the hazard above.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer
from kafka import __version__ as kafka_version
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.structs import MemberState

from tracescore._kafka import (
    BROKER_WAIT_S,
    RebalanceListener,
    made_or_closed,
    not_creating_topics,
    subscribe_topics,
    topic_partitions,
)
from tracescore._service._bounded import BoundedCall, ClosedAtStop

__all__ = ["LOOK_EVERY_S", "AwaitedInputs", "GuardedJoins", "take_completed_joins"]

_log = logging.getLogger("tracescore")

LOOK_EVERY_S = 1.0  # how often a member looks for the inputs no writer created yet


class GuardedJoins:
    """`consumer`'s joins guarded against kafka-python 3.0.12 leaving one undone (the hazard above): each one
    that completed between two polls taken by the next (`take_completed_joins`), its own metadata fresh after
    each subscription (`subscribe`), and before each poll a rejoin under way asked for, so the poll waits for
    it (`before_poll`). `stopping`: a stop was asked for (the metadata is waited for no longer then)."""

    def __init__(self, consumer: KafkaConsumer, stopping: Callable[[], bool] = lambda: False) -> None:
        self._consumer = consumer
        take_completed_joins(consumer)
        self._stopping = stopping
        # Its subscription's alone, as its own refreshes ask (`consumer.topics()` asked for every topic).
        self._metadata = BoundedCall(
            lambda: topic_partitions(consumer, consumer.subscription() or ()),
            "the member's metadata before joining",
        )

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        """`consumer` subscribed to `topics` (each of them exists), its own metadata brought up to date
        before its (re)join."""
        subscribe_topics(self._consumer, topics, listener)
        # A metadata update that changes what it subscribes to mid-rebalance makes a leader rejoin at once
        # (the hazard above), and a leader whose metadata lacks a topic assigns none of it. Waited for
        # BROKER_WAIT_S at most, and not once a stop is asked for (kafka-python's request timeout is 30 s):
        # its next metadata refresh brings it otherwise.
        try:
            self._metadata(self._stopping, BROKER_WAIT_S)
        except KafkaError as exc:  # no broker this moment
            _log.debug("metadata before joining with %s: %s", ", ".join(topics), exc)

    def before_poll(self) -> None:
        """On the poll thread, before each poll: a rejoin under way that the poll would not wait for asked
        for again (`_join_waited_for`)."""
        _join_waited_for(self._consumer)


class AwaitedInputs:
    """`consumer` subscribed to those of `topics` that exist; `absent` (`ready_to_read`) waited for, each
    added to the subscription once it exists (`look`, before each poll). The looks share one client, made
    at the first and closed once nothing is absent or at `close()` (the service's stop): a fleet waiting
    for its input does not connect to the broker anew every second. `stopping`: a stop was asked for (the
    member's own metadata is waited for no longer then). Its joins are taken however brief its polls
    (`take_completed_joins`)."""

    def __init__(
        self,
        consumer: KafkaConsumer,
        topics: Sequence[str],
        listener: RebalanceListener,
        absent: Collection[str],
        client_config: Mapping[str, Any],
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self._joins = GuardedJoins(consumer, stopping)
        self._listener = listener
        self._present = [t for t in topics if t not in absent]
        self._absent = [t for t in topics if t in absent]
        self._client_config = dict(client_config)
        self._probe = ClosedAtStop(self._new_probe, "the looks for the inputs not written yet")
        self._closed = False
        self._looking = BoundedCall(self._existing, "looking for the inputs not written yet")
        self._next_look = time.monotonic() + LOOK_EVERY_S
        listener.subscribed(self._present, self._absent)  # idle (`--idle-timeout`) from now if nothing exists
        if self._present:
            self._subscribe()

    @property
    def absent(self) -> tuple[str, ...]:
        """The inputs not subscribed to yet: no writer created them."""
        return tuple(self._absent)

    def look(self) -> None:
        """On the poll thread, before a poll: a rejoin under way waited for by the poll (`_join_waited_for`);
        at most every LOOK_EVERY_S, whether an absent input exists now (waiting for the look a moment at most:
        it runs on a thread of its own), and if so subscribed to."""
        self._joins.before_poll()
        if not self._absent or self._closed or time.monotonic() < self._next_look:
            return
        try:
            existing = self._looking(timeout_s=0)
        except KafkaTimeoutError:  # the look under way: its answer at the next call
            return
        except KafkaError as exc:  # no broker now: looked for again
            _log.debug("looking for %s: %s", ", ".join(self._absent), exc)
            existing = set()
        self._next_look = time.monotonic() + LOOK_EVERY_S
        appeared = [t for t in self._absent if t in existing]
        if not appeared:
            return
        _log.info("the topic(s) %s now exist: reading them", ", ".join(appeared))
        self._absent = [t for t in self._absent if t not in appeared]
        self._present += appeared
        self._listener.subscribed(self._present, self._absent)  # joining: idle once assigned
        if not self._absent:
            self.close()  # nothing more to look for
        self._subscribe()

    def close(self) -> None:
        """No more looks; the looks' client closed, a look under way on it cancelled (a broker that does not
        answer would keep it open for BROKER_WAIT_S). From the poll thread, at the service's stop."""
        self._closed = True
        self._probe.close()

    def _subscribe(self) -> None:
        self._joins.subscribe(self._present, self._listener)

    def _existing(self) -> set[str]:
        """The absent inputs that exist now, each with its partitions known, asked by the looks' client, which
        never creates a topic (on BoundedCall's thread)."""
        found = topic_partitions(self._probe.get(), self._absent)  # those alone, never every topic
        return {t for t, partitions in found.items() if partitions}

    def _new_probe(self) -> KafkaConsumer:
        wait_ms = int(BROKER_WAIT_S * 1000)
        return made_or_closed(
            KafkaConsumer,
            **self._client_config,
            group_id=None,
            enable_auto_commit=False,
            **not_creating_topics(),
            request_timeout_ms=wait_ms,
            bootstrap_timeout_ms=wait_ms,  # its first connection (30 s by default)
        )


def _join_waited_for(consumer: KafkaConsumer) -> None:
    """A join of `consumer`'s under way that its next poll would not wait for (the member rebalancing while
    its coordinator needs no rejoin: the hazard above) asked for again, so that poll waits for it, and the
    ones after it until it completes. kafka-python has no public call for either."""
    coordinator = consumer._coordinator
    if consumer.group_metadata().state is MemberState.REBALANCING and not coordinator.need_rejoin():
        coordinator.request_rejoin()


def take_completed_joins(consumer: KafkaConsumer) -> None:
    """A join of `consumer`'s that completed while no poll waited for it (the hazard above) taken by the next
    poll rather than thrown away for a new JoinGroup. kafka-python starts each attempt with
    `_do_join_and_sync_async` and finishes the one it waited for with `_on_join_complete_async`, and has no
    public call for either: an attempt's assignment is held from its completion until one finishes, and
    the next attempt returns it instead of joining again while the member is still in the rebalance that
    attempt joined (no reset of its generation since)."""
    coordinator = consumer._coordinator
    if getattr(coordinator, _TAKES_COMPLETED_JOINS, False):
        return  # installed already (one consumer, two stages' set-up): a second wrapper would hold twice
    join_and_sync = getattr(coordinator, "_do_join_and_sync_async", None)
    complete = getattr(coordinator, "_on_join_complete_async", None)
    if join_and_sync is None or complete is None or not hasattr(coordinator, "_generation"):
        # Another kafka-python than 3.0.x: its joins are left to it (this guard is for 3.0.12's hazard).
        _log.warning(
            "kafka-python %s: its coordinator is not the one tracescore guards (a join completed between two "
            "polls may be thrown away and the group rebalanced again); see the docs' Rebalances page",
            kafka_version,
        )
        return
    held: list[tuple[object, Any]] = []  # (the generation joined, its assignment), not taken yet

    async def joined_once() -> Any:
        if held and coordinator.state is MemberState.REBALANCING and coordinator._generation is held[0][0]:
            _log.debug("taking the join of group %s that completed between two polls", coordinator.group_id)
            return held[0][1]  # held until taken: a poll that waits for this attempt too briefly leaves it
        held.clear()
        assignment = await join_and_sync()
        held.append((coordinator._generation, assignment))
        return assignment

    async def taken(*args: Any, **kwargs: Any) -> Any:
        held.clear()
        return await complete(*args, **kwargs)

    coordinator._do_join_and_sync_async = joined_once
    coordinator._on_join_complete_async = taken
    setattr(coordinator, _TAKES_COMPLETED_JOINS, True)


_TAKES_COMPLETED_JOINS = "_tracescore_takes_completed_joins"
