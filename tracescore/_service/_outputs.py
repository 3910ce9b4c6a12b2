"""What a stateful stage writes because of its state, written at least once and never twice after a crash.

Every output names the decision it carries (`id`: the same decision taken again after a restart has the same
id) and what it says (`digest`), in two headers. The state topic's partition meta holds where the verified
output topics ended when that partition's state was last saved; after a crash, the stage reads those
topics from there to their end and collects the ids it finds, so a decision taken again whose output is
already on the topic is marked written instead of written twice. A verified topic partition the marks lack
(its end was never learnt: a stop before any look, a probe that got no answer, a partition or topic added
since) is read from its log start (`since`): the partition's owners may have written there anywhere. Topics
shared with other producers (the spans topic) are not read back: their outputs go first, and are written
again only if the crash came after them and before the verified ones.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.producer.future import FutureRecordMetadata

from tracescore._kafka import known_partitions, log_reader, probe_consumer, read_with, topic_partitions
from tracescore._kafka_config import KafkaConnection
from tracescore._service._bounded import BROKER_WAIT_S, STOP_CHECK_S, ClosedAtStop
from tracescore._service._crash import crash_point

__all__ = [
    "FOUND_AT_MOST",
    "OUTPUT_DIGEST_HEADER",
    "OUTPUT_ID_HEADER",
    "Output",
    "OutputLog",
    "delivered",
    "delivered_until",
    "lowest",
    "seconds_left",
]

OUTPUT_ID_HEADER = "tracescore.output.id"
OUTPUT_DIGEST_HEADER = "tracescore.output.digest"
_log = logging.getLogger("tracescore")
Marks = dict[str, dict[int, int]]  # topic -> partition -> offset
_BROKER_WAIT_MS = int(BROKER_WAIT_S * 1000)
_REFRESH_S = 60.0  # how stale the known end offsets may get (other instances write to the same partitions)
# The most ids a restore holds (about 180 bytes each in memory: some 180 MB); past it the oldest are let go.
FOUND_AT_MOST = 1_000_000


@dataclass(frozen=True, slots=True)
class Output:
    """One message a stage writes because of a key's state."""

    topic: str
    key: bytes | None
    value: bytes
    id: str
    digest: str
    headers: tuple[tuple[str, bytes], ...] = ()
    verified: bool = True  # looked for after a crash; False for a topic other producers share

    def all_headers(self) -> list[tuple[str, bytes]]:
        identity = [(OUTPUT_ID_HEADER, self.id.encode()), (OUTPUT_DIGEST_HEADER, self.digest.encode())]
        return [*self.headers, *identity]


def delivered(
    producer: KafkaProducer,
    futures: Iterable[FutureRecordMetadata],
    until: Callable[[], float | None] = lambda: None,
) -> list[Exception]:
    """Wait until every send of `futures` is acknowledged or failed (the producer retries a restarting broker
    up to its delivery timeout), and no longer than `until()` (a stop's deadline, time.monotonic; None: none
    yet, looked at while waiting): KafkaTimeoutError then. The failures."""
    failures = delivered_until(producer, futures, until)
    if failures is None:
        raise KafkaTimeoutError("not acknowledged before the stop's deadline")
    return failures


def delivered_until(
    producer: KafkaProducer,
    futures: Iterable[FutureRecordMetadata],
    stop_deadline: Callable[[], float | None],
) -> list[Exception] | None:
    """`delivered`, given up on once `stop_deadline()` (a stop's, None until one is asked for) has passed:
    looked at while waiting, a stop may come meanwhile. None when given up on."""
    pending = list(futures)
    while True:
        try:
            producer.flush(STOP_CHECK_S)
        except KafkaTimeoutError:
            deadline = stop_deadline()
            if deadline is not None and time.monotonic() >= deadline:
                return None
            continue
        return _failures(pending)


def _failures(futures: Iterable[FutureRecordMetadata]) -> list[Exception]:
    return [f.exception for f in futures if f.failed() and f.exception is not None]


def seconds_left(deadline: float | None) -> float | None:
    """What is left until `deadline` (time.monotonic; None: no deadline), never below 0."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


_CLOSE_MIN_S = 0.05  # a client's close given no time at all (the steps before overran) still tries


def close_shares(deadline: float, count: int) -> Iterator[float]:
    """`count` closes' timeouts, one after another: each an even share of what is left until `deadline`
    (time.monotonic) when it is taken, so what one leaves unused is shared by those after it; never below
    _CLOSE_MIN_S. kafka-python's producer waits its whole timeout for sends not acknowledged: the first
    close to wait on a broker that does not answer must not take the others' time."""
    for n in range(count, 0, -1):
        yield max(_CLOSE_MIN_S, (seconds_left(deadline) or 0.0) / n)


class OutputLog:
    """Sends a stage's outputs and finds them again after a crash."""

    def __init__(self, connection: KafkaConnection, producer: KafkaProducer, verified: Sequence[str]) -> None:
        self.connection = connection
        self.producer = producer
        self.verified = list(verified)
        self._ends: Marks = {}
        self._ends_at = 0.0
        # Made by the first look (a restore's, on its thread), closed at the stop with a look under way on it.
        self._probe = ClosedAtStop(self._new_probe, "the output topics' probe")
        # The reader `find` keeps between looks (`_reader`): used by one look at a time.
        self._guard = threading.Lock()
        self._kept: KafkaConsumer | None = None
        self._reading = False
        self._closed = False
        # Sent, and a stop gave up waiting for their acknowledgement: id -> (digest, its send). The closing
        # checkpoint waits for these sends again instead of writing the same outputs twice.
        self._unacknowledged: dict[str, tuple[str, FutureRecordMetadata]] = {}

    def marks(self, refresh: bool = True) -> Marks:
        """Where each verified topic's partitions end, as far as known: a lower bound (other instances write
        there too), refreshed from the broker every minute (if `refresh`)."""
        if refresh and self.verified and time.monotonic() - self._ends_at > _REFRESH_S:
            self._refresh()
        return {topic: dict(ends) for topic, ends in self._ends.items()}

    def ends(self) -> Marks:
        """`marks`, refreshed from the broker now (kept as known when it does not answer)."""
        if self.verified:
            self._refresh()
        return self.marks(refresh=False)

    def log_starts(self) -> Marks:
        """Every partition of the verified topics, at its log start (a topic not created yet has none: nothing
        was written to it). Its partitions are looked up anew: a client's metadata is refreshed only every
        `metadata_max_age_ms` (5 minutes), and a partition added since it was fetched would be missing, its
        outputs never read, and written again (KafkaError when the broker does not answer)."""
        probe = self._ready_probe()
        tps = self._partitions(topic_partitions(probe, self.verified))  # a fresh look, at these alone
        out: Marks = {topic: {} for topic in self.verified}
        for tp, offset in (probe.beginning_offsets(tps, timeout_ms=_BROKER_WAIT_MS) if tps else {}).items():
            out[tp.topic][tp.partition] = offset
        return out

    def _ready_probe(self) -> KafkaConsumer:
        return self._probe.get()

    def _new_probe(self) -> KafkaConsumer:
        # A verified topic may be an input no writer created yet (the evaluations topic, grounding).
        return probe_consumer(
            self.connection.client_config(),
            request_timeout_ms=_BROKER_WAIT_MS,  # a metadata look's wait (30 s by default)
            bootstrap_timeout_ms=_BROKER_WAIT_MS,  # its first connection (30 s by default)
        )

    def _partitions(self, found: Mapping[str, Sequence[int]]) -> list[TopicPartition]:
        """Every partition of the verified topics, as `found` (a look at them) gives them."""
        return [TopicPartition(topic, p) for topic in self.verified for p in found.get(topic, ())]

    def _refresh(self) -> None:
        probe = self._ready_probe()
        try:
            tps = self._partitions(known_partitions(probe, self.verified))
            ends = probe.end_offsets(tps, timeout_ms=_BROKER_WAIT_MS) if tps else {}
        except KafkaError:  # kept as known: still a lower bound
            return
        self._learnt(ends)
        self._ends_at = time.monotonic()

    def _learnt(self, ends: Mapping[TopicPartition, int]) -> None:
        """`ends`, ends the broker gave or acknowledged: the known ones moved on to them (never back)."""
        for tp, end in ends.items():
            known = self._ends.setdefault(tp.topic, {})
            known[tp.partition] = max(known.get(tp.partition, 0), end)

    def send(self, outputs: Sequence[Output], until: Callable[[], float | None] = lambda: None) -> None:
        """Write `outputs`: the unverified ones first and acknowledged, then the verified ones; raises the
        first failure, KafkaTimeoutError past `until()` (a stop's deadline, see `delivered`; nothing is
        committed then: a restart decides them again)."""
        sent: list[tuple[Output, FutureRecordMetadata]] = []
        try:
            for group in ([o for o in outputs if not o.verified], [o for o in outputs if o.verified]):
                if not group:
                    continue
                futures = [self._send(output) for output in group]
                sent += zip(group, futures, strict=True)
                failures = delivered(self.producer, futures, until)
                if failures:
                    raise failures[0]
                written = (future.value for future in futures)
                self._learnt({TopicPartition(m.topic, m.partition): m.offset + 1 for m in written})
        except KafkaTimeoutError:
            # Given up on for a stop: the closing checkpoint waits for these sends (the acknowledged ones
            # too) instead of writing the same outputs again.
            self._unacknowledged.update({o.id: (o.digest, f) for o, f in sent})
            raise
        crash_point("outputs.written")

    def _send(self, output: Output) -> FutureRecordMetadata:
        sent = self._unacknowledged.pop(output.id, None)
        if sent is not None and sent[0] == output.digest and not sent[1].failed():
            return sent[1]  # sent before a wait a stop gave up on: not written a second time
        future = self.producer.send(
            output.topic, key=output.key, value=output.value, headers=output.all_headers()
        )
        crash_point("output.sent" if output.verified else "shared.sent", before=self.producer.flush)
        return future

    def since(self, marks: Mapping[str, Mapping[int, int]], log_starts: Marks) -> Marks:
        """Where a restore looks on the verified topics for what a partition's owners wrote after its meta
        (`marks`): from each partition's mark, or from its log start where the marks have none (`log_starts`:
        every partition of the verified topics now). Outputs of a partition go out only after its first
        meta, and every meta after that holds the ends its states cover; a partition without a mark is one
        whose end that meta's writer did not know, so it may have written there from any offset."""
        return {
            topic: {p: marks.get(topic, {}).get(p, start) for p, start in starts.items()}
            for topic, starts in log_starts.items()
            if topic in self.verified
        }

    def find(
        self,
        since: Mapping[str, Mapping[int, int]],
        limit: int = FOUND_AT_MOST,
        give_up: Callable[[], bool] = lambda: False,
    ) -> dict[str, str]:
        """`find_to_ends`' ids."""
        return self.find_to_ends(since, limit, give_up)[0]

    def find_to_ends(
        self,
        since: Mapping[str, Mapping[int, int]],
        limit: int = FOUND_AT_MOST,
        give_up: Callable[[], bool] = lambda: False,
    ) -> tuple[dict[str, str], Marks]:
        """The ids (and digests) of every output on the verified topics from `since` to their ends now (ends
        read as the look starts, so it ends however much is written meanwhile). Memory is bounded by the ids
        held, never the messages read: past `limit` the oldest found are let go (the marks move on every
        minute, so the outputs that matter are the newest; more means many writers, or a look from a log
        start, and one let go may be written twice: said in a warning). Only the id and digest headers are
        looked at: every topic in one read, by a reader kept for the next look (a look again before each
        write while a restore's window is open would otherwise connect and learn the metadata anew). With
        them, the ends read to (where a next look starts; the known ends moved on to them): one end-offsets
        call for the look and its ends."""
        start: dict[TopicPartition, int | None] = {
            TopicPartition(topic, p): offset
            for topic, offsets in since.items()
            if topic in self.verified
            for p, offset in sorted(offsets.items())
        }
        found: dict[str, str] = {}
        order: deque[str] = deque()
        dropped = 0
        if give_up():  # no reader connected for a look given up on (its first connection waits)
            raise KafkaTimeoutError("looking for the outputs written: given up on, a stop was asked for")
        with self._reader() as reader:
            ends = reader.end_offsets(list(start), timeout_ms=_BROKER_WAIT_MS) if start else {}
            for message in read_with(reader, start, give_up, end=ends):
                output_id = digest = None
                for name, value in message.headers or ():
                    if name == OUTPUT_ID_HEADER:
                        output_id = value
                    elif name == OUTPUT_DIGEST_HEADER:
                        digest = value
                if output_id is None:
                    continue
                identity = output_id.decode()
                if identity not in found:
                    order.append(identity)
                found[identity] = digest.decode() if digest is not None else ""
                if len(order) > limit:
                    found.pop(order.popleft(), None)
                    dropped += 1
        if dropped:
            _log.warning(
                "looking for outputs already written since the last saved state: found more than %d, let go "
                "of the %d oldest; a record decided again that one of them carried may be written twice",
                limit,
                dropped,
            )
        self._learnt(ends)
        read_to: Marks = {}
        for tp, end in ends.items():
            read_to.setdefault(tp.topic, {})[tp.partition] = end
        return found, read_to

    @contextmanager
    def _reader(self) -> Iterator[KafkaConsumer]:
        """The kept reader, or one of this look's own while another thread's look holds it (a restore given
        up on for a stop may still read, for BROKER_WAIT_S at most) or after `close`. A read broken off (a
        stop, the broker not answering) closes the kept one: the next look starts a new one."""
        with self._guard:
            kept = not self._reading and not self._closed
            self._reading |= kept
            reader = self._kept if kept else None
        done = False
        try:
            if reader is None:  # made outside the guard: a first connection may wait BROKER_WAIT_S
                reader = log_reader(self.connection)
            yield reader
            done = True
        finally:
            keep = False
            if kept:
                with self._guard:
                    self._reading = False
                    keep = done and not self._closed
                    self._kept = reader if keep else None
            if reader is not None and not keep:
                reader.close()

    def close(self, timeout_s: float | None = None) -> None:
        """Both clients closed within `timeout_s`, together (None: each within its request timeout)."""
        close_by = None if timeout_s is None else time.monotonic() + timeout_s
        self._probe.close()
        with self._guard:
            self._closed = True
            reader, self._kept = (None, self._kept) if self._reading else (self._kept, None)
        if reader is not None:  # one still reading is closed as its look ends
            left = seconds_left(close_by)
            reader.close(timeout_ms=None if left is None else int(left * 1000))


def lowest(*marks: Mapping[str, Mapping[int, int]]) -> Marks:
    """Every topic partition of `marks`, at the lowest offset any of them gives it."""
    out: Marks = {}
    for each in marks:
        for topic, offsets in each.items():
            held = out.setdefault(topic, {})
            for p, offset in offsets.items():
                held[p] = min(offset, held.get(p, offset))
    return out
