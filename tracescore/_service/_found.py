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

from collections.abc import Callable, Iterable, Mapping
from itertools import islice

from tracescore._service._outputs import FOUND_AT_MOST, Marks, lowest

__all__ = ["FoundOutputs"]


class FoundOutputs:
    def __init__(self) -> None:
        # Output id -> digest, of every held partition together: one table (a look from a log start may find
        # a million, and held once per partition they were as many times that). An id is one decision of one
        # key, so another partition's ids only ever say "written" of what was written.
        self._ids: dict[str, str] = {}
        self._restored_at: dict[int, int] = {}  # partition -> when restored (ms, the stream clock's)
        self._since: dict[int, Marks] = {}  # partition -> the marks its restore read from
        self._looked: dict[int, Marks] = {}  # partition -> where its next look for outputs starts

    def add(self, since: Mapping[int, Marks], found: Mapping[str, str], restored_at: int) -> None:
        """`found`: the outputs on the topics from the restored partitions' marks (`since`, per partition:
        the saved ones, a log start where none was saved) to their ends."""
        self._ids.update(found)
        for partition, marks in since.items():
            self._since[partition] = lowest(marks)
            self._looked[partition] = lowest(marks)
            self._restored_at[partition] = restored_at

    def held(self) -> bool:
        """A restore's window is open: some partition may still decide again what its previous owner sent."""
        return bool(self._since)

    def look_again(self, find: Callable[[Marks], tuple[dict[str, str], Marks]]) -> dict[str, str]:
        """The held partitions' outputs appended since their restore (or the look before) read the topics
        (`find`, from marks to the topics' ends, and those ends, where the next look starts): a send the
        previous owner gave up on (a stop or a crash while the broker did not answer) may be appended once
        the broker answers again. Every held output's id -> digest."""
        start = lowest(*self._looked.values())
        found, ends = find(start)
        self._ids.update(found)
        # A window held long (a conversation open for hours) adds every look's finds: the oldest go first.
        for identity in list(islice(self._ids, max(0, len(self._ids) - FOUND_AT_MOST))):
            del self._ids[identity]
        after = {
            topic: {p: max(offset, ends.get(topic, {}).get(p, offset)) for p, offset in offsets.items()}
            for topic, offsets in start.items()
        }
        for partition in self._looked:
            self._looked[partition] = lowest(after)
        return self.ids()

    def ids(self) -> dict[str, str]:
        """Every held output's id -> digest (the table itself: read it, never change it)."""
        return self._ids

    def release(self, decided_again: Callable[[int, int], bool]) -> None:
        """Let go of each partition for which `decided_again(partition, restored_at)`."""
        for partition in [p for p, at in self._restored_at.items() if decided_again(p, at)]:
            self.forget([partition])

    def marks(self, partition: int, ends: Marks) -> Marks:
        """The output marks saved with `partition`'s meta: the topics' `ends`, held back to where its restore
        read from while what it found is held."""
        return lowest(ends, self._since.get(partition, {}))

    def forget(self, partitions: Iterable[int]) -> None:
        for partition in partitions:
            for table in (self._restored_at, self._since, self._looked):
                table.pop(partition, None)
        if not self._since:
            self._ids = {}  # a new table: one handed out before is left as it was
