"""What a service supplies to stage 2 (`KeyedStage`, the Kafka part): how its keys' state changes, what
the state decides, and which states to save."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from kafka.consumer.fetcher import ConsumerRecord

from tracescore._service._codec import StateCodec, StateRecord
from tracescore._service._outputs import Output
from tracescore.model import ServiceSkip

__all__ = ["KeyedLogic", "Saved"]

Saved = tuple[int, bytes, StateRecord | None]  # (partition, key, state; None deletes the key)


class KeyedLogic(Protocol):
    """What a service does with its keys; `KeyedStage` does the Kafka part."""

    codec: StateCodec[Any]

    def restore(self, partition: int, key: bytes, state: Any, migrated: bool) -> None:
        """A key's saved state (`migrated`: read from the old state topic: save it again)."""

    def restored(self) -> None:
        """A restore (of one or more partitions) is complete."""

    def legacy(self, key: bytes, value: bytes) -> StateRecord:
        """A value of the old, unversioned state topic as the current model (UnreadableState if none)."""

    def rewind_ms(self) -> int | None:
        """Read a restored partition again from this time (to refill windows), not only from its commit."""

    def apply(self, message: ConsumerRecord, replay: bool) -> None:
        """One record; `replay`: read again after a restore, its effect is already in the saved state."""

    def tick(self, now: datetime, stream_time: Callable[[int], int]) -> None:
        """`stream_time(partition)`: every input record that reached the input before it (ms) and belongs to
        the partition is applied (docs: `_service/_clock.py`)."""

    def outputs(self, found: Mapping[str, str]) -> list[Output]:
        """The outputs decided since the last call; `found`: ids (-> digest) already on the output topics."""

    def written(self, outputs: Sequence[Output], found: Mapping[str, str]) -> None:
        """`outputs` are on Kafka (written now, or `found` there after a crash)."""

    def to_save(self) -> list[Saved]:
        """States to save now."""

    def after_save(self) -> list[Saved]:
        """What waited for a saved state (deliveries outside Kafka, kept in the state until done), done now;
        the states that say so, saved next (what a stop left undone stays in them)."""

    def not_delivered(self) -> str | None:
        """What the last `after_save` left undone at a stop and what the next start does about it, in words
        (None: nothing)."""

    def everything(self) -> list[Saved]:
        """Every held state (the state topic was deleted: all are saved again)."""

    def commit_floors(self, positions: dict[int, int]) -> dict[int, int]:
        """Per partition, the offset to commit: its position, or the oldest change not saved yet."""

    def undecided(self, partition: int, before_ms: int) -> bool:
        """A key of `partition` that began before `before_ms` (ms, the stream clock's) waits for its outputs
        to be decided: the outputs a crash left on the topic may be its own."""

    def forget_partitions(self, partitions: set[int]) -> None: ...

    def skip(self, reason: ServiceSkip, detail: str) -> None:
        """Count (and say once) an unreadable state or record."""
