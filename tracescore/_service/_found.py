"""What a restore found on the verified output topics after a crash: the outputs written after a partition's
last saved state (see `_outputs.py`), held until no key they may belong to waits for a decision any more.

While they are held, the partition's meta is saved with the output marks its restore read from, not the
topics' ends now: killed again in that window, the next restart reads the same outputs again (and those
written since), so it knows them too. Moved on with the ends, the marks would pass them and the next restart
would write a decision twice. The ids themselves are not saved: there may be a million of them, and a
partition meta must fit in one Kafka message whatever the crash left; re-reading costs only the outputs of
the window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tracescore._service._outputs import Marks

__all__ = ["FoundOutputs"]


class FoundOutputs:
    def __init__(self) -> None:
        self._ids: dict[int, dict[str, str]] = {}  # partition -> output id -> digest
        self._restored_at: dict[int, int] = {}  # partition -> when restored (ms, the stream clock's)
        self._since: dict[int, Marks] = {}  # partition -> the marks its restore read from
        self._looked: dict[int, Marks] = {}  # partition -> where its next look for outputs starts

    def add(self, partition: int, found: dict[str, str], since: Marks, restored_at: int) -> None:
        """`found`: the outputs on the topics from `since` (the partition's saved marks) to their ends."""
        self._ids[partition] = found
        self._since[partition] = {topic: dict(ends) for topic, ends in since.items()}
        self._looked[partition] = {topic: dict(ends) for topic, ends in since.items()}
        self._restored_at[partition] = restored_at

    def held(self) -> bool:
        """A restore's window is open: some partition may still decide again what its previous owner sent."""
        return bool(self._since)

    def look_again(self, find: Callable[[Marks], dict[str, str]], ends: Marks) -> dict[str, str]:
        """The held partitions' outputs appended since their restore (or the look before) read the topics
        (`find`, from marks to the topics' ends): a send the previous owner gave up on (a stop or a crash
        while the broker did not answer) may be appended once the broker answers again. `ends`: the topics'
        ends read just before, where the next look starts. Every held output's id -> digest."""
        start: Marks = {}
        for looked in self._looked.values():
            for topic, offsets in looked.items():
                held = start.setdefault(topic, {})
                for p, offset in offsets.items():
                    held[p] = min(offset, held.get(p, offset))
        found = find(start)
        after = {
            topic: {p: max(offset, ends.get(topic, {}).get(p, offset)) for p, offset in offsets.items()}
            for topic, offsets in start.items()
        }
        for partition in self._looked:
            self._ids[partition] = {**self._ids.get(partition, {}), **found}
            self._looked[partition] = {topic: dict(offsets) for topic, offsets in after.items()}
        return self.ids()

    def ids(self) -> dict[str, str]:
        """Every held output's id -> digest."""
        return {i: d for table in self._ids.values() for i, d in table.items()}

    def release(self, decided_again: Callable[[int, int], bool]) -> None:
        """Let go of each partition for which `decided_again(partition, restored_at)`."""
        for partition in [p for p, at in self._restored_at.items() if decided_again(p, at)]:
            self.forget([partition])

    def marks(self, partition: int, ends: Marks) -> Marks:
        """The output marks saved with `partition`'s meta: the topics' `ends`, held back to where its restore
        read from while what it found is held."""
        since = self._since.get(partition)
        out = {topic: dict(offsets) for topic, offsets in ends.items()}
        for topic, offsets in (since or {}).items():
            held = out.setdefault(topic, {})
            for p, offset in offsets.items():
                held[p] = min(offset, held.get(p, offset))
        return out

    def forget(self, partitions: Iterable[int]) -> None:
        for partition in partitions:
            for table in (self._ids, self._restored_at, self._since, self._looked):
                table.pop(partition, None)
