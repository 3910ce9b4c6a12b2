"""What `tracescore alert` does with its keys (the service base's `KeyedLogic`): records into the evaluator's
windows, notifications to the sinks, and the evaluator's per-key state into the state topic.

The saved state of a key is a `RouteState`: the evaluator's own `AlertState` (what it persists is its to
define; fields added with a default are additive within schema version 2), `through`, the routes-topic
offset of the last record in it, and the notifications decided but not yet delivered: a notification goes
to the sinks only once the state that decided it is saved (an outbox), so a crash never loses one.

After a restart the windows are refilled by reading the routes topic again from the longest window's start:
a record before the committed offset, or at or before `through`, is a replay (`AlertEvaluator.add(...,
replay=True)`: it refills the windows and notifies nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Literal

from kafka.consumer.fetcher import ConsumerRecord
from pydantic import Field, ValidationError

from tracescore._service import Output, Saved, StateCodec, StateRecord, UnreadableState
from tracescore.alert._config import AlertConfig
from tracescore.alert._conversations import record_key
from tracescore.alert._evaluator import AlertEvaluator, AlertState
from tracescore.alert._notification import AlertKey, Notification
from tracescore.model import (
    ConversationRecord,
    EvaluationRecord,
    ServiceSkip,
    UnreadableRecord,
    read_conversation_record,
    read_evaluation_record,
)

__all__ = ["UNIT_HEADER", "AlertLogic", "RouteState"]

# Marks a conversation record on the routes topic (the rest are evaluation records).
UNIT_HEADER = ("tracescore.unit", b"conversation")


class RouteState(StateRecord):
    """One alert key in the state topic."""

    schema_version: Literal[2] = 2
    through: int = Field(default=-1, description="Routes-topic offset of the last record in this state.")
    alert: AlertState = Field(description="The evaluator's own state of the key.")
    pending: list[Notification] = Field(
        default_factory=list,
        description="Notifications decided but not yet delivered: saved before they go to the sinks, so a "
        "crash in between delivers them after the restart instead of losing them.",
    )


class AlertLogic:
    codec = StateCodec(RouteState)

    def __init__(
        self,
        config: AlertConfig,
        evaluator: AlertEvaluator,
        *,
        deliver: Callable[[Sequence[Notification]], list[Notification]],
        resend_firing: Callable[[datetime], None],
        skip: Callable[[ServiceSkip, str], None],
        count_record: Callable[[], None],
        clock: Callable[[], datetime],
    ) -> None:
        self.config = config
        self.evaluator = evaluator
        self._deliver = deliver
        self._resend_firing = resend_firing
        self._skip = skip
        self._count_record = count_record
        self._clock = clock
        self._through: dict[AlertKey, int] = {}
        self._partition: dict[AlertKey, int] = {}
        self._restored: dict[AlertKey, int] = {}
        self._migrated: set[AlertKey] = set()  # carried over from the old state topic: saved anew
        self._pending: dict[AlertKey, list[Notification]] = {}  # decided, delivered once their state is saved
        self._unheld: dict[AlertKey, AlertState] = {}  # restored with pending notifications
        self._not_delivered = 0  # by the last after_save: a stop's budget ran out

    # -- restore ----------------------------------------------------------------------------------------
    def restore(self, partition: int, key: bytes, state: RouteState, migrated: bool) -> None:
        alert_key = _decode(key)
        self.evaluator.restore(alert_key, state.alert)
        self._through[alert_key] = state.through
        self._partition[alert_key] = partition
        self._restored[alert_key] = partition
        if state.pending:  # saved before a crash that came before their delivery
            self._pending.setdefault(alert_key, []).extend(state.pending)
            self._unheld[alert_key] = state.alert  # saved again without them, held by a rule or not
        if migrated:
            self._migrated.add(alert_key)

    def restored(self) -> None:
        # Held in memory from now on, so a route quiet since the restart still gets its no-data alert and its
        # firing alerts are still re-sent.
        self.evaluator.adopt_restored(self._restored.get)
        self._restored.clear()

    def legacy(self, key: bytes, value: bytes) -> RouteState:
        """An entry of the old state topic: the bare `AlertState` JSON, unversioned."""
        _decode(key)
        try:
            return RouteState(alert=AlertState.model_validate_json(value))
        except ValidationError as exc:
            raise UnreadableState(ServiceSkip.INVALID_STATE, str(exc).splitlines()[0][:200]) from None

    def rewind_ms(self) -> int | None:
        longest = max(r.window_seconds for r in [*self.config.rules, self.config.judge_health])
        return int((self._clock().timestamp() - longest) * 1000)

    # -- process ----------------------------------------------------------------------------------------
    def apply(self, message: ConsumerRecord, replay: bool) -> None:
        conversation = UNIT_HEADER in (message.headers or ())
        try:
            value = message.value
            record: EvaluationRecord | ConversationRecord = (
                read_conversation_record(value) if conversation else read_evaluation_record(value)
            )
        except UnreadableRecord as unreadable:
            self._skip(unreadable.reason, unreadable.detail)
            return
        self._count_record()
        through = self._through.get(record_key(record), -1)
        fresh = not replay and message.offset > through
        key = self.evaluator.add(record, message.partition, replay=not fresh)
        if key is None:
            return
        if fresh:
            self._decided(self.evaluator.evaluate(key, self._clock()))
        self._through[key] = max(through, message.offset)
        self._partition[key] = message.partition

    def tick(self, now: datetime, stream_time: Callable[[int], int]) -> None:
        self._decided(self.evaluator.tick(now, stream_time))
        self._resend_firing(now)  # a repeat by design (Alertmanager forgets an alert nobody re-sends)

    def _decided(self, notifications: Sequence[Notification]) -> None:
        for note in notifications:
            self._pending.setdefault(AlertKey(note.service, note.route, note.metric, note.unit), []).append(
                note
            )

    def outputs(self, found: Mapping[str, str]) -> list[Output]:
        return []  # notifications go to the sinks as they are decided

    def written(self, outputs: Sequence[Output], found: Mapping[str, str]) -> None:
        pass

    # -- state ------------------------------------------------------------------------------------------
    def to_save(self) -> list[Saved]:
        changed = self.evaluator.take_changed_states()
        if self._migrated:
            held = self.evaluator.held_states()
            changed.update({k: held[k] for k in self._migrated if k in held and k not in changed})
            self._migrated.clear()
        return [self._saved(key, state) for key, state in changed.items()]

    def everything(self) -> list[Saved]:
        self.evaluator.take_changed_states()
        return [self._saved(key, state) for key, state in self.evaluator.held_states().items()]

    def after_save(self) -> list[Saved]:
        """Deliver the notifications whose state is saved; their states without them, to save next (a crash
        before that delivers them once more after the restart). Those a stop left undelivered stay in them."""
        self._not_delivered = 0
        if not self._pending:
            return []
        delivered, self._pending = self._pending, {}
        for key, notes in delivered.items():
            left = self._deliver(notes)
            if left:
                self._pending[key] = left
                self._not_delivered += len(left)
        held = {**self._unheld, **self.evaluator.held_states()}
        self._unheld.clear()
        return [self._saved(key, held[key]) for key in delivered if key in held]

    def not_delivered(self) -> str | None:
        if not self._not_delivered:
            return None
        return (
            f"{self._not_delivered} notification(s) not delivered in time (the one under way may have "
            "reached its receiver): kept in their alerts' saved state, the next start sends them to every "
            "sink"
        )

    def _saved(self, key: AlertKey, state: AlertState | None) -> Saved:
        partition = self._partition.get(key, 0)
        if state is None:  # evicted: its state goes too
            self._through.pop(key, None)
            self._partition.pop(key, None)
            return (partition, key.encode(), None)
        through, pending = self._through.get(key, -1), self._pending.get(key, [])
        return (partition, key.encode(), RouteState(through=through, alert=state, pending=pending))

    def commit_floors(self, positions: dict[int, int]) -> dict[int, int]:
        return positions  # every changed state is saved at each checkpoint

    def undecided(self, partition: int, before_ms: int) -> bool:
        return False  # its outputs (notifications) wait for the saved state: none is looked for after a crash

    def forget_partitions(self, partitions: set[int]) -> None:
        self.evaluator.forget_partitions(partitions)
        for key in [k for k, p in self._partition.items() if p in partitions]:
            # Pending notifications go with them: saved, their new owner delivers them.
            for table in (self._partition, self._through, self._pending, self._unheld):
                table.pop(key, None)

    def skip(self, reason: ServiceSkip, detail: str) -> None:
        self._skip(reason, detail)


def _decode(key: bytes) -> AlertKey:
    try:
        return AlertKey.decode(key)
    except ValueError as exc:  # UnicodeDecodeError too
        raise UnreadableState(ServiceSkip.INVALID_STATE, f"not an alert key: {exc}"[:200]) from None
