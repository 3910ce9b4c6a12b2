"""The service both `tracescore alert` and `tracescore conversations` are: stage 1 re-keys the evaluation
records onto a keyed topic, stage 2 keeps state per key with a state topic partitioned like it. One loop
polls both, ticks, checkpoints, and stops on request or when idle."""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError, KafkaTimeoutError

from tracescore._kafka import (
    caught_up,
    connect,
    lag,
    protocol_checked,
    ready_to_read,
    rekeying_clients,
)
from tracescore._kafka_config import KafkaConnection, RebalanceProtocol
from tracescore._plural import counted
from tracescore._service._bounded import BoundedCall, StopBudget
from tracescore._service._changelog import Changelog
from tracescore._service._clock import StreamClock
from tracescore._service._counts import StateCount
from tracescore._service._crash import crash_point
from tracescore._service._group_check import GroupCheck, GroupLook, client_id
from tracescore._service._keyed import KeyedStage
from tracescore._service._keyed_logic import KeyedLogic
from tracescore._service._outputs import OutputLog, close_shares
from tracescore._service._overdue import OverdueExit
from tracescore._service._reach import BrokerReach, Reach
from tracescore._service._rekey import Forward, RekeyStage
from tracescore._service._stop_checkpoint import final_checkpoint, restore_given_up

__all__ = ["LoopConfig", "LoopService", "ServiceLoop", "ServiceTopics"]

_POLL_MS = 200
# Of the stop's budget, kept for closing every client (a quarter of a shorter budget): the steps before give
# up that much earlier, so a broker that does not answer costs the closes their share, never the backstop's.
_CLOSE_S = 1.0
_OWN_CLOSE_PART = 0.8  # of an also_close's share, told to the close itself
_SAVE_RESERVE_S = 5.0  # of the stop's budget, kept from deliveries for the closing checkpoint (half at most)
# What a stop that outlives its budget leaves (`OverdueExit`: the process exits, status OVERDUE_EXIT).
_OVERDUE_LEAVES = (
    "without the closing checkpoint, so what was decided, the state and the offsets read since the last "
    "checkpoint are not written, saved or committed; the next start reads those records again from the last "
    "commit (nothing is lost; what they decide may be decided again)"
)


class LoopConfig(Protocol):
    """What the loop reads of a service's config: `ServiceSettings`' fields and the two each service names
    itself (`tracescore.alert.AlertConfig`, `tracescore.conversations.ConversationsConfig`)."""

    @property
    def group_id(self) -> str: ...  # stage 1's group; stage 2's is `<group_id>.<stage>`
    @property
    def session_timeout_ms(self) -> int: ...
    @property
    def rebalance_protocol(self) -> RebalanceProtocol: ...
    @property
    def max_poll_interval_ms(self) -> int: ...
    @property
    def tick_seconds(self) -> float: ...
    @property
    def health_file(self) -> Path | None: ...
    @property
    def stop_timeout_s(self) -> float: ...
    @property
    def restore_retries(self) -> int: ...
    def named(self, name: str) -> str: ...  # a setting as messages name it (`FileSettings.named`)


@dataclass(frozen=True)
class ServiceTopics:
    inputs: Sequence[str]  # what stage 1 reads (never created: waited for when missing)
    keyed: str  # stage 1 -> stage 2
    keyed_partitions: int  # when stage 1's topic is created; an existing one keeps its own (said at start)
    state: str  # stage 2's state, partitioned like `keyed`
    legacy_state: str | None  # the single-partition state topic of earlier versions, read once
    outputs: Sequence[str] = field(default_factory=tuple)  # created when missing
    verified: Sequence[str] = field(default_factory=tuple)  # outputs looked for after a crash


def topic_setting(config: LoopConfig, topic: str) -> str | None:
    """The `*_topic` setting of `config` that names `topic`."""
    fields = getattr(type(config), "model_fields", {})
    return next((name for name in fields if name.endswith("_topic") and getattr(config, name) == topic), None)


class ServiceLoop:
    def __init__(
        self,
        config: LoopConfig,
        *,
        log: logging.Logger,
        connection: KafkaConnection,
        service: str,
        stage: str,
        topics: ServiceTopics,
        forward: Callable[[ConsumerRecord], Forward | Sequence[Forward] | None],
        logic: KeyedLogic,
        state: Counter[StateCount],
        open_keys: Callable[[], int],
        clock: Callable[[], datetime],
        checkpoint_every_batch: bool,
        also_close: Sequence[tuple[str, Callable[[float], None]]] = (),
        before_close: Callable[[], None] | None = None,
    ) -> None:
        """`service`: the name it runs as (`tracescore alert`), its clients' id; `stage`: its keyed topic's
        (`routes`, `turns`): stage 2's group `<group_id>.<stage>`, and the settings `<stage>_topic` and
        `<stage>_partitions` that name the topic and its count; `logic.skip` counts (and
        says once) the records the loop skips itself (too large to re-key), as the service's own; `state`:
        the service's counter of what was done with its state (restores, the state topic recreated).
        `also_close`: (what, close) of what the service itself holds (an alert's sinks), closed last and
        within the stop's budget, like the clients: each close is given its share of it (seconds).
        `before_close`: what the service reads of its keys at a stop, called before the clients close
        (closing gives the partitions up, and their keys with them)."""
        self.log = log
        self._service = service
        self._also_close = list(also_close)
        self._before_close = before_close
        self.connection = connection
        self.topics = topics
        self._logic = logic
        self._open_keys = open_keys
        self._clock = clock
        self._tick_s = config.tick_seconds
        self._health_file = config.health_file
        self._every_batch = checkpoint_every_batch
        self._stopping = False
        self._stop_timeout_s = stop_timeout_s = config.stop_timeout_s
        self._budget = StopBudget(stop_timeout_s)  # counted from the signal
        self._close_s = min(_CLOSE_S, stop_timeout_s / 4)
        # A broker call under way (a commit, a metadata look) may wait longer than the budget, and no signal
        # interrupts it: past the budget the process exits, as a crash would (every step of a checkpoint is
        # safe to die at: nothing is lost).
        self._overdue = OverdueExit(self._budget, log, setting="stop_timeout_s", leaves=_OVERDUE_LEAVES)
        self._not_started: str | None = None  # a stop gave up on the startup: what it did not do
        group_id, rebalance_protocol = config.group_id, config.rebalance_protocol
        self._group_id, self._protocol = group_id, rebalance_protocol
        self._config = config
        # The keyed topic's settings, named in messages: a setting renamed fails every start in the tests,
        # rather than a warning naming no setting.
        self._keyed_topic, self._keyed_partitions = f"{stage}_topic", f"{stage}_partitions"
        assert hasattr(config, self._keyed_topic) and hasattr(config, self._keyed_partitions), stage

        def clients(client: dict[str, Any]) -> tuple[KafkaConsumer, KafkaConsumer, KafkaProducer, Changelog]:
            ingest, keyed, producer = rekeying_clients(
                client,
                group_id,
                stage,
                config.session_timeout_ms,
                rebalance_protocol,
                config.max_poll_interval_ms,
                client_id(service),
            )
            changelog = Changelog(connection, topics.state, topics.keyed, stopping=lambda: self._stopping)
            return ingest, keyed, producer, changelog

        # BrokerUnreachable (one line) when no broker answers within the connect timeout.
        self._ingest, keyed, self._producer, self._changelog = connect(connection, clients)
        # GroupShared (one line) once the other service's members are in stage 1's group too.
        self._group_check = GroupCheck(connection, group_id, service, stopping=lambda: self._stopping)
        # Stage 2's own group, looked at as stage 1's is: whether its members outnumber its partitions.
        self._keyed_members = GroupLook(
            connection, keyed.config["group_id"], client_id(service), stopping=lambda: self._stopping
        )
        self.rekey = RekeyStage(
            self._ingest, self._producer, topics.keyed, forward, logic.skip, stop_deadline=self.stop_deadline
        )
        self._outputs = OutputLog(connection, self._producer, topics.verified)
        self._stream = StreamClock(
            connection, group_id, topics.inputs, topics.keyed, clock, stopping=lambda: self._stopping
        )
        self.keyed = KeyedStage(
            log=log,
            connection=connection,
            consumer=keyed,
            topic=topics.keyed,
            changelog=self._changelog,
            outputs=self._outputs,
            logic=logic,
            counts=state,
            legacy_topic=topics.legacy_state,
            clock=clock,
            stop_deadline=self.stop_deadline,
            restore_retries=config.restore_retries,
        )
        # A broker outage said in the service's words (kafka-python's own lines do not say what it holds).
        self._reach = BrokerReach(
            log,
            service,
            connection.bootstrap_servers,
            Reach([self._ingest, keyed]),
            self._meanwhile,
            retry_s=self._ingest.config["reconnect_backoff_max_ms"] / 1000,
        )

    def _meanwhile(self) -> str:
        """What the service does while no broker answers (`BrokerReach`)."""
        unsaved, waiting = self.keyed.unsaved, self._budget.waiting_on
        return (
            "holds its state in memory"
            + (f" ({counted(unsaved, 'state')} not saved yet)" if unsaved else "")
            + (f", waiting on {waiting}" if waiting else "")
            + ", and commits nothing: what it read since its last checkpoint is read again should it stop "
            "before the broker is back"
        )

    def stop(self) -> None:
        """Return from run() after the current pass (no tick after it) within `stop_timeout_s`. Safe from a
        signal handler."""
        if self._budget.started_at is None:
            self._budget.start()
            self._overdue.arm()
        self._stopping = True

    def stop_deadline(self) -> float | None:
        """When the steps of a stop before closing the clients give up (time.monotonic): the budget, counted
        from the signal, less what closing the clients is kept; None until a stop is asked for."""
        deadline = self._budget.deadline
        return None if deadline is None else deadline - self._close_s

    def waiting(self, what: str) -> AbstractContextManager[None]:
        """`what` the block waits on (the broker, a receiver): what a stop that outlives its budget names."""
        return self._budget.waiting(what)

    def deliveries_deadline(self) -> float | None:
        """When what waits outside Kafka (an alert's deliveries) gives up at a stop: early enough to leave the
        closing checkpoint time to save what they did and did not do."""
        deadline = self._budget.deadline
        if deadline is None:
            return None
        return deadline - min(_SAVE_RESERVE_S, self._stop_timeout_s / 2)

    def run(self, idle_timeout_s: float | None = None) -> None:
        with self._overdue.running():
            self._run(idle_timeout_s)

    def _start(self) -> tuple[str, ...]:
        """Create the topics it writes that are missing and wait until the cluster's metadata shows them; the
        inputs, never created (their writers' to create), that do not exist yet, said and returned: waited for
        once subscribed (the admin and metadata calls take no timeout of ours: given up on at a stop, on a
        thread; KafkaTimeoutError)."""
        crash_point("service.starting")
        t = self.topics
        outputs = [o for o in t.outputs if o not in t.inputs]

        def start() -> tuple[str, ...]:
            return ready_to_read(
                self.connection,
                t.inputs,
                self._unwritten,
                create=[NewTopic(t.keyed, t.keyed_partitions, -1), *outputs],
                subscribed=[t.keyed],
            )

        try:
            with self.waiting("the broker (starting: creating the topics)"):
                return BoundedCall(start, "creating the topics")(lambda: self._stopping, math.inf)
        except KafkaTimeoutError:
            self._not_started = "started no further than creating its topics: nothing was read"
            raise

    def _said_partitions(self, found: int) -> None:
        """The keyed topic found with a count other than the setting's, which acts only when the service
        creates it: said once, the service running on the topic's. A warning, not a stop: every instance
        routes keys by the topic's count and the state topic has it too (`Changelog.ensure` stopped the
        start otherwise), so a key's records and state stay together; only the instances that share the
        work are fewer or more than meant."""
        t = self.topics
        if found == t.keyed_partitions:
            return
        self.log.warning(
            "the topic %(keyed)s has %(found)d partition(s), not the %(set)d of %(setting)s: the setting "
            "acts only when %(service)s creates the topic. Running on its %(found)d, the state topic "
            "%(state)s partitioned alike: at most %(found)d instances share its keys. For %(set)d, stop "
            "every instance and give %(topic_setting)s and state_topic new names: they are created with "
            "it, starting with no state (what the old ones hold is not carried over). Never add partitions "
            "to %(keyed)s (kafka-topics --alter): its keys would move away from their state, and the "
            "service stops at the change and at every start after",
            {
                "keyed": t.keyed,
                "found": found,
                "set": t.keyed_partitions,
                "setting": self._config.named(self._keyed_partitions),
                "service": self._service,
                "state": t.state,
                "topic_setting": self._keyed_topic,
            },
        )

    def _unwritten(self, topic: str) -> None:
        # Where a misspelt topic shows: nothing was ever written to it, and nothing will arrive. Named by its
        # setting, as not every topic a service reads has a flag (alert's conversations_topic has none).
        setting = topic_setting(self._config, topic)
        flags = f"`{self._service} --help` lists the flags"
        where = flags if setting is None else f"{self._config.named(setting)}; {flags}"
        self.log.warning(
            "the topic %s that %s reads does not exist, so nothing has been written to it yet: waiting for "
            "it (whatever writes it creates it). If its records are being written, they go to a topic of "
            "another name: give that one in %s",
            topic,
            self._service,
            where,
        )

    def _run(self, idle_timeout_s: float | None) -> None:
        wait_s = self.connection.connect_timeout_s
        clean = False
        try:
            absent = self._start()
            with self.waiting("the broker (starting: the state topic)"):
                # ChangelogError (one line): partitioned unlike the keyed topic; KafkaTimeoutError: no answer
                partitions = self._changelog.ensure(wait_s)  # the keyed topic's, as found
            self._said_partitions(partitions)
            self._group_check()  # before joining: another service's members already there
            # Eager: a stable generation's assignment is whole (an empty one too: the range assignor gives a
            # member none of a few one-partition topics). Cooperative: an empty one may be the first of two.
            cooperative = self._protocol == "cooperative"
            outnumbered = self._group_check.outnumbered if cooperative else None
            self.rekey.subscribe(
                self.topics.inputs,
                self.log,
                changed=self._group_check.changed,
                client_config=self.connection.client_config(),
                absent=absent,
                outnumbered=outnumbered,
            )
            self.keyed.subscribe(self._keyed_members if cooperative else None)
            with (
                protocol_checked(self._group_id, self._protocol, "rebalance_protocol"),
                self._reach.watching(),
            ):
                self._loop(idle_timeout_s)
            clean = True
        except KafkaTimeoutError:
            # stop() starts the budget before it sets `_stopping`, and stage 2 gives up on the budget: a call
            # given up on in between is the stop's too, not an error out of run().
            if self.stop_deadline() is None:
                raise
            # A broker call given up on for the stop (the state topic's look at startup, a checkpoint's
            # wait): the closing steps below run, bounded, and say what is left.
            clean = True
        finally:
            self._budget.start()  # idle, or an error: the closing steps get the same budget
            deadline, steps_deadline = self._budget.deadline, self.stop_deadline()
            assert deadline is not None and steps_deadline is not None
            if clean:
                # A stop (SIGTERM, idle): what is decided goes out and is saved, in the stop's budget.
                with self.waiting("the broker (the closing checkpoint)"):
                    not_done = [
                        self._not_started,
                        restore_given_up(self.keyed),
                        self.rekey.not_done(),
                        final_checkpoint(self.keyed, steps_deadline),
                    ]
                if any(not_done):
                    self.log.warning(
                        "stopping within stop_timeout_s (%gs): %s",
                        self._stop_timeout_s,
                        "; ".join(part for part in not_done if part),
                    )
            if self._before_close is not None:
                self._before_close()
            with self.waiting("the broker (closing the clients)"):
                self._close(deadline)

    def _loop(self, idle_timeout_s: float | None) -> None:
        last_moved = time.monotonic()
        last_tick = 0.0
        while not self._stopping:
            if self._health_file is not None:
                self._health_file.touch()
            with self.waiting("the broker (stage 1: re-keying a batch)"):
                # After a change of stage 1's members, before the batch the same poll brings.
                moved = self.rekey.step(_POLL_MS, before_batch=self._group_check)
            with self.waiting("the broker (stage 2: reading the keyed topic, restoring state)"):
                moved += self.keyed.step(_POLL_MS)
            if moved:
                last_moved = time.monotonic()
            if self._stopping:
                return  # no decision once a stop is asked for: what was applied is saved on the way out
            if time.monotonic() - last_tick >= self._tick_s:
                last_tick = time.monotonic()
                with self.waiting("the broker (the stream time)"):
                    stream_time = self._stream.tick(self.keyed.positions)
                    self._logic.tick(self._clock(), stream_time)
                if self._stopping:  # asked for during the tick: its decisions go out in the stop's budget
                    return
                self._checkpoint(stream_time)
            elif moved and self._every_batch:
                self._checkpoint()
            if idle_timeout_s and self._idle(last_moved, idle_timeout_s):
                self.log.info("no record for %.1fs, nothing left to read or write; stopping", idle_timeout_s)
                return

    def _checkpoint(self, stream_time: Callable[[int], int] | None = None) -> None:
        """The running checkpoint; its waits give up at the stop's deadline, and the closing checkpoint says
        what that left (KafkaTimeoutError out of here only then)."""
        with self.waiting("the broker (a checkpoint: outputs, states, the commit)"):
            self.keyed.checkpoint(stream_time)

    def _idle(self, last_moved: float, idle_timeout_s: float) -> bool:
        """Counted from the first assignment of both stages (a restart may wait out a killed member's session
        first; stage 1 waiting for inputs no writer created yet, none of which exists, from then), and only
        once both have read everything and no key waits for its output."""
        rekey_joined, keyed_joined = self.rekey.idle_from, self.keyed.first_assigned_at
        if rekey_joined is None or keyed_joined is None:
            return False
        if time.monotonic() - max(last_moved, rekey_joined, keyed_joined) <= idle_timeout_s:
            return False
        if not (caught_up(self._ingest) and self.keyed.fully_read()) or self._open_keys():
            return False
        # The fetches' ends may predate what this instance just wrote to its own input (a turn's grounded
        # revision on the evaluations topic): the broker's, which hold every acknowledged write, decide.
        return all(n == 0 for n in lag(self._ingest, ask_broker=True).values())

    def _close(self, deadline: float) -> None:
        """Every client closed by the stop's `deadline`. Each close that may wait (a producer's sends not
        acknowledged, a member's request to leave its group, a peer of the service's own) gets an even
        share of what is left as it starts, so the first to wait on a broker that does not answer does not
        take the others' time: kafka-python's producer waits its whole timeout for such sends."""
        at_once = (
            self.rekey.close,  # the look for the inputs not written yet, on its own client
            self._stream.close,  # an update under way on its clients fails with them
            self._group_check.close,
            self._keyed_members.close,
        )
        waiting: tuple[Callable[[float], None], ...] = (
            lambda s: self._producer.close(timeout=s),
            lambda s: self._ingest.close(autocommit=False, timeout_ms=int(s * 1000)),
            lambda s: self.keyed.consumer.close(autocommit=False, timeout_ms=int(s * 1000)),
            self._outputs.close,
            self._changelog.close,
        )
        shares = close_shares(deadline, len(waiting) + len(self._also_close))
        for close in at_once:
            self._close_client(close)
        for wait in waiting:
            self._close_client(partial(wait, next(shares)))  # its share taken as it starts
        for what, close_other in self._also_close:
            share = next(shares)
            # Told most of its share, so a close that keeps to it (a Phoenix sink counting what it could not
            # post) ends and says so before the thread it runs on is given up on at the end of the share.
            try:
                BoundedCall(partial(close_other, share * _OWN_CLOSE_PART), what)(timeout_s=share)
            except KafkaTimeoutError:
                self.log.warning("stopping: %s given up on within stop_timeout_s", what)
            except Exception as exc:  # closing: said, and the other closes still run
                self.log.warning("stopping: %s failed: %s", what, exc)

    def _close_client(self, close: Callable[[], None]) -> None:
        try:
            close()
        except KafkaError as exc:  # the broker not answering: what was not done is said already
            self.log.debug("closing a client: %s", exc)


class LoopService:
    """What `tracescore alert` and `tracescore conversations` answer alike, from the `ServiceLoop` each runs
    (`_loop`, made in its `__init__`)."""

    _loop: ServiceLoop

    @property
    def first_assigned_at(self) -> float | None:
        """When stage 2 was first assigned partitions (time.monotonic); None until then."""
        return self._loop.keyed.first_assigned_at

    def stop(self) -> None:
        """Return from run() after the current pass. Safe from a signal handler."""
        self._loop.stop()
