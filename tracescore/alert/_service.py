"""`tracescore alert`: evaluation records from Kafka -> alert state per (service, route, metric) -> sinks.

    tracescore.evaluations --(group G, keyed by trace id)--> re-keyed by (service, route, metric)
        --> tracescore.alert.routes --(group G.routes)--> AlertEvaluator --> sinks
                                                              |
                                                              v  each alert's state on its route's
                                                       tracescore.alert.changelog  partition (compacted)

The routes and state topics are group G's own (named above for the default G, tracescore-alert; another G's
are G.routes and G.routes.changelog: AlertConfig, never `tracescore conversations`'), so a second group
neither counts records twice nor takes over the first group's alerts.

Evaluation records are keyed by trace id, so one route's records are spread over every partition. The first
stage writes them again (what alerting reads of them: no details) keyed by route, so with several alert
instances each owns whole routes and its alert state is complete. The service base (tracescore/_service)
does the Kafka part: after a restart or rebalance an instance reads back the state of its partitions only
(what it notified, and whatever else the evaluator keeps per route) and rebuilds its routes' windows by
re-reading the routes topic from the window's start without notifying: a firing alert is neither repeated
nor forgotten, and one that recovered meanwhile is resolved.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kafka.consumer.fetcher import ConsumerRecord

from tracescore._kafka import LogOnce
from tracescore._kafka_config import KafkaConnection
from tracescore._service import Forward, LoopService, ServiceLoop, ServiceTopics, StateCount
from tracescore.alert._config import AlertConfig
from tracescore.alert._conversations import record_key
from tracescore.alert._delivery import deliver
from tracescore.alert._evaluator import AlertEvaluator
from tracescore.alert._logic import UNIT_HEADER, AlertLogic
from tracescore.alert._notification import Notification
from tracescore.alert._sinks import AlertmanagerSink, Sink
from tracescore.alert._standing import SUMMARY_ROUTES, Standing, worst_first
from tracescore.model import (
    ConversationRecord,
    EvaluationRecord,
    ServiceSkip,
    UnreadableRecord,
    read_conversation_record,
    read_evaluation_record,
)

__all__ = ["AlertService", "AlertStats", "start_line"]

_log = logging.getLogger("tracescore.alert")
Clock = Callable[[], datetime]
_ROUTES_REASON_CHARS = 1_000


@dataclass
class AlertStats:
    records: int = 0
    skipped: Counter[ServiceSkip] = field(default_factory=Counter)  # by reason
    notifications: int = 0
    evicted_routes: int = 0
    # At the stop: the routes whose drop rule cannot arm at their traffic (each said once a run in the log).
    cannot_arm_routes: int = 0
    delivery_failures: int = 0
    # state topic: alert states restored, carried over from the old state topic (migrated), the topic
    # recreated after it was deleted
    state: Counter[StateCount] = field(default_factory=Counter)
    # At the stop: the routes held, worst first (at most SUMMARY_ROUTES), and how many more there were.
    routes: list[Standing] = field(default_factory=list)
    more_routes: int = 0


def start_line(config: AlertConfig, sinks: Sequence[Sink]) -> str:
    """What the service runs, said when it starts (so a changed rule is seen in force after a restart): the
    rules in the order they match, and the sinks without their URLs' paths (a Slack URL's path is its
    secret)."""
    rules = "; ".join(f"{n}. {rule.describe()}" for n, rule in enumerate(config.rules, 1))
    named = ", ".join(sink.where for sink in sinks) or "none"
    return (
        f"rules, the first matching applies: {rules}; a route no rule matches is not watched | sinks: {named}"
    )


def _for_routes(record: EvaluationRecord) -> bytes:
    return record.slim(_ROUTES_REASON_CHARS).model_dump_json().encode()


def _conversation_for_routes(record: ConversationRecord) -> bytes:
    """What alerting reads of a conversation record: without its turns' ids and the worst turn."""
    slim = record.model_copy(update={"trace_ids": [], "span_ids": [], "worst_turn": None})
    return slim.model_dump_json().encode()


class AlertService(LoopService):
    def __init__(
        self,
        config: AlertConfig,
        sinks: Sequence[Sink],
        *,
        kafka: KafkaConnection | None = None,
        clock: Clock = lambda: datetime.now(UTC),
        on_notification: Callable[[Notification], None] | None = None,
    ) -> None:
        self.config = config
        self.sinks = list(sinks)
        self.evaluator = AlertEvaluator(config, streamed=True)
        self.stats = AlertStats()
        self._on_notification = on_notification
        self._clock = clock
        self._warn_once = LogOnce(_log)
        self._last_resend: float = time.monotonic()
        # Plaintext to config.bootstrap_servers unless given (`tracescore alert` gives TRACESCORE_KAFKA__*).
        self.connection = kafka or KafkaConnection(bootstrap_servers=config.bootstrap_servers)
        self._logic = AlertLogic(
            config,
            self.evaluator,
            deliver=self._deliver,
            resend_firing=self._resend_firing,
            skip=self._skip,
            count_record=self._count_record,
            clock=clock,
        )
        c = config
        inputs = [c.evaluations_topic, *([c.conversations_topic] if c.watches_conversations else [])]
        topics = ServiceTopics(
            inputs=inputs,
            keyed=c.routes_topic,
            keyed_partitions=c.routes_partitions,
            state=c.state_topic,
            legacy_state=c.legacy_state_topic,
        )
        # BrokerUnreachable (one line) when no broker answers within the connect timeout.
        self._loop = ServiceLoop(
            c,
            log=_log,
            connection=self.connection,
            service="tracescore alert",
            stage="routes",
            topics=topics,
            forward=self._forward,
            logic=self._logic,  # its `skip` counts the records the loop skips too (oversized)
            state=self.stats.state,
            open_keys=lambda: 0,
            clock=clock,
            checkpoint_every_batch=True,
            also_close=[("closing the sinks", self._close_sinks)],
            before_close=self._read_routes,
        )

    def run(self, idle_timeout_s: float | None = None) -> AlertStats:
        _log.info("%s", start_line(self.config, self.sinks))
        try:
            self._loop.run(idle_timeout_s)  # closes the sinks last, within the stop's budget
        finally:
            self.stats.evicted_routes = self.evaluator.evicted
        return self.stats

    def _read_routes(self) -> None:
        standings = self.evaluator.standings(self._clock())
        self.stats.routes, self.stats.more_routes = worst_first(standings, SUMMARY_ROUTES)
        self.stats.cannot_arm_routes = sum(s.cannot_arm for s in standings)

    def _close_sinks(self, _timeout_s: float) -> None:
        for sink in self.sinks:  # each closes at once: nothing of theirs waits on a peer
            sink.close()

    # -- stage 1: re-key by route -----------------------------------------------------------------------
    def _forward(self, message: ConsumerRecord) -> Forward | None:
        conversation = message.topic == self.config.conversations_topic
        try:
            record = (
                read_conversation_record(message.value)
                if conversation
                else read_evaluation_record(message.value)
            )
        except UnreadableRecord as unreadable:
            self._skip(unreadable.reason, unreadable.detail)
            return None
        key = record_key(record).encode()
        if isinstance(record, ConversationRecord):
            return Forward(key, _conversation_for_routes(record), (UNIT_HEADER,))
        return Forward(key, _for_routes(record))

    def _skip(self, reason: ServiceSkip, detail: str) -> None:
        self.stats.skipped[reason] += 1
        self._warn_once(reason, "skipped a message (%s): %s; further ones are only counted", reason, detail)

    def _count_record(self) -> None:
        self.stats.records += 1

    # -- stage 2's outputs: notifications ---------------------------------------------------------------
    def _deliver(self, notifications: Sequence[Notification]) -> list[Notification]:
        """To every sink; the ones a stop left undelivered (its budget ran out)."""
        with self._loop.waiting(f"the sinks (delivering {len(notifications)} notification(s))"):
            delivered = deliver(self.sinks, notifications, self._loop.deliveries_deadline)
        for note, failures in delivered.done:
            self.stats.notifications += 1
            self.stats.delivery_failures += failures
            if self._on_notification:
                self._on_notification(note)
        return delivered.not_done

    def _resend_firing(self, now: datetime) -> None:
        managers = [s for s in self.sinks if isinstance(s, AlertmanagerSink)]
        if not managers:
            return
        interval = min(s.resend_seconds for s in managers)
        if time.monotonic() - self._last_resend < interval:
            return
        self._last_resend = time.monotonic()
        # Repeats: one a stop cuts short is sent by the next start's first re-send.
        with self._loop.waiting("Alertmanager (re-sending the firing alerts)"):
            deliver(managers, self.evaluator.firing(now), self._loop.deliveries_deadline)
