"""Stage 1 of a service: the input as it comes (evaluation records keyed by trace id), written again keyed by
what stage 2 keeps state for (a route, a conversation), so each instance owns whole keys.

Poll, write, commit: the input is committed only once every re-keyed record is acknowledged. A crash before
that writes some of them twice, which stage 2 absorbs (a record it already applied changes nothing).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError, MessageSizeTooLargeError, RecordListTooLargeError

from tracescore._kafka import RebalanceListener
from tracescore._service._awaited import AwaitedInputs
from tracescore._service._bounded import BROKER_WAIT_S, poll_or_nothing, why
from tracescore._service._crash import crash_point
from tracescore._service._outputs import delivered_until, seconds_left
from tracescore.model import ServiceSkip

__all__ = ["Forward", "RekeyStage"]

_log = logging.getLogger("tracescore")


@dataclass(frozen=True, slots=True)
class Forward:
    """A record to write again on the keyed topic."""

    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()


class RekeyStage:
    def __init__(
        self,
        consumer: KafkaConsumer,
        producer: KafkaProducer,
        topic: str,
        forward: Callable[[ConsumerRecord], Forward | Sequence[Forward] | None],
        skip: Callable[[ServiceSkip, str], None],
        stop_deadline: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.consumer = consumer
        self.producer = producer
        self.topic = topic
        self._forward = forward
        self._skip = skip  # the service's: counts the reason and says it once
        self._stop_deadline = stop_deadline  # time.monotonic(); None until a stop is asked for
        self._joined: RebalanceListener | None = None
        self._inputs: AwaitedInputs | None = None
        # The batch a stop gave up waiting for: its re-keyed records not acknowledged, of how many sent.
        self.unacknowledged = 0
        self._sent = 0
        # Per input partition, the records whose re-keys were acknowledged but whose input commit failed,
        # since the last commit that succeeded (a later one covers them), and why the last one failed. A
        # partition revoked meanwhile is its next owner's to read again: no longer this member's to say.
        self._not_committed: Counter[TopicPartition] = Counter()
        self._commit_failed = ""

    def subscribe(
        self,
        topics: Sequence[str],
        log: logging.Logger,
        changed: Callable[[Sequence[TopicPartition]], None],
        client_config: Mapping[str, Any],
        absent: Collection[str] = (),
        outnumbered: Callable[[int], bool] | None = None,
    ) -> None:
        """`changed`: partitions assigned to or taken from this member (on the client's IO thread), or none
        when the group's generation changed without changing them (on this thread, after the poll); `absent`:
        the topics of `topics` that no writer created yet (`ready_to_read`), waited for unsubscribed
        (`AwaitedInputs`, looked for before each poll with a client of `client_config`); `outnumbered`:
        `RebalanceListener`'s."""

        def revoked(partitions: Sequence[TopicPartition]) -> None:
            self._revoked(partitions)
            changed(partitions)

        # A generation that changes none of this member's partitions changed the group all the same.
        self._joined = RebalanceListener(
            log, assigned=changed, revoked=revoked, regrouped=lambda: changed(()), outnumbered=outnumbered
        )
        self._inputs = AwaitedInputs(
            self.consumer,
            topics,
            self._joined,
            absent,
            client_config,
            stopping=lambda: self._stop_deadline() is not None,
        )

    def close(self) -> None:
        """At the stop: the look for inputs not written yet ended, its client closed (the stage's clients
        are the service's to close)."""
        if self._inputs is not None:
            self._inputs.close()

    @property
    def idle_from(self) -> float | None:
        """When the group first gave this member its partitions (none, too, when more members than them),
        or, while none of the inputs it reads exists yet, when it started waiting for them
        (`RebalanceListener.idle_from`)."""
        return None if self._joined is None else self._joined.idle_from

    def step(self, timeout_ms: int, before_batch: Callable[[], None] = lambda: None) -> int:
        """Poll once, write the batch again, commit it; the number of records read. `before_batch` runs
        between the poll and the batch: a poll that changed the assignment may bring the batch too, and the
        check of the new group must come before any of it is written (an exception leaves it uncommitted)."""
        count = 0
        futures = []
        if self._inputs is not None:
            self._inputs.look()
        polled = poll_or_nothing(self.consumer, timeout_ms)
        if self._joined is not None:
            self._joined.polled(self.consumer)
        before_batch()
        if any(polled.values()):
            crash_point("rekey.polled")
        for messages in polled.values():
            for message in messages:
                count += 1
                forwards = self._forward(message)
                if forwards is None:
                    continue
                # One record may go to more than one key (a first turn's documents: two conversations).
                for forward in (forwards,) if isinstance(forwards, Forward) else forwards:
                    try:
                        futures.append(
                            self.producer.send(
                                self.topic,
                                key=forward.key,
                                value=forward.value,
                                headers=list(forward.headers),
                            )
                        )
                    except MessageSizeTooLargeError as exc:  # only names of hundreds of KB get here
                        self._skip(ServiceSkip.OVERSIZED_RECORD, str(exc).splitlines()[0][:200])
        if not count:
            return 0
        crash_point("rekey.sent")
        failures = delivered_until(self.producer, futures, self._stop_deadline)
        if failures is None:  # the stop's budget ran out first: not committed, a restart re-keys the batch
            # Only the sends still waiting: the broker may have acknowledged the others already.
            self.unacknowledged = sum(not f.succeeded() for f in futures)
            self._sent = len(futures)
            return count
        for failure in failures:
            if not isinstance(failure, MessageSizeTooLargeError | RecordListTooLargeError):
                raise failure  # not committed: a restart reads the batch again
            self._skip(ServiceSkip.OVERSIZED_RECORD, str(failure).splitlines()[0][:200])
        crash_point("rekey.acknowledged")
        left = seconds_left(self._stop_deadline())
        try:
            self.consumer.commit(
                timeout_ms=int(1000 * (BROKER_WAIT_S if left is None else min(left, BROKER_WAIT_S)))
            )
        except KafkaError as exc:  # written already: a later commit covers it, or it is re-keyed once more
            _log.debug("commit of the input deferred: %s", exc)
            self._not_committed.update({tp: len(messages) for tp, messages in polled.items()})
            self._commit_failed = why(exc)
        else:
            self._not_committed.clear()
        return count

    def _revoked(self, revoked: Sequence[TopicPartition]) -> None:
        # On the client's IO thread, while the poll waits (lost partitions too: the listener's default).
        for tp in revoked:
            self._not_committed.pop(tp, None)

    def not_done(self) -> str | None:
        """What a stop left undone here, in words (None: nothing)."""
        parts = []
        not_committed = self._not_committed.total()
        if not_committed:  # a stop ends the loop: no later commit covers them
            parts.append(
                f"stage 1: the commit of {not_committed} input record(s) already re-keyed onto "
                f"{self.topic} failed ({self._commit_failed}): the next start re-keys them again, which "
                "changes nothing (stage 2 applies each record once)"
            )
        if self.unacknowledged:
            parts.append(
                f"stage 1: {self.unacknowledged} of {self._sent} re-keyed record(s) not acknowledged by "
                f"{self.topic} in time, the batch's input not committed: the next start re-keys them all "
                "(stage 2 applies each once)"
            )
        return "; ".join(parts) or None
