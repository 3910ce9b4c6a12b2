"""The annotations waiting for Phoenix: bounded, in order, one per thing Phoenix keeps one of.

Phoenix upserts an annotation on (span or session, name, identifier), so only the latest annotation of each
such key is worth posting: a newer one (a revision, a replay) replaces the one waiting, and an annotation
posted twice (a timeout after Phoenix had taken it) lands once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

__all__ = ["Backlog", "Waiting"]

# (path, span or session id, name, identifier): what Phoenix upserts on, under the path it was posted to.
Key = tuple[str, str, str, str]
Waiting = tuple[Key, dict[str, Any]]


def _key(path: str, annotation: dict[str, Any]) -> Key:
    target = annotation.get("span_id") or annotation.get("session_id") or ""
    return (path, str(target), str(annotation.get("name")), str(annotation.get("identifier")))


class Backlog:
    """Oldest first; at most `cap` annotations, the oldest dropped past it. Not thread-safe: the caller
    holds its lock."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._waiting: OrderedDict[Key, dict[str, Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._waiting)

    def put(self, path: str, annotations: Sequence[dict[str, Any]]) -> int:
        """Keep `annotations` (newest last, replacing a waiting one of the same key); returns how many of the
        oldest were dropped to stay within the cap."""
        for annotation in annotations:
            key = _key(path, annotation)
            self._waiting[key] = annotation
            self._waiting.move_to_end(key)
        return self._trim()

    def take(self, most: int) -> tuple[str, list[Waiting]]:
        """Up to `most` of the oldest, all posted to one path (the run of them at the front)."""
        taken: list[Waiting] = []
        path = next(iter(self._waiting))[0]
        while self._waiting and len(taken) < most:
            key = next(iter(self._waiting))
            if key[0] != path:
                break
            taken.append((key, self._waiting.pop(key)))
        return path, taken

    def give_back(self, taken: Sequence[Waiting]) -> int:
        """Put what could not be posted back in front, unless a newer annotation of its key came meanwhile;
        returns how many were dropped past the cap."""
        for key, annotation in reversed(taken):
            if key in self._waiting:
                continue  # superseded while in flight: the newer one is posted instead
            self._waiting[key] = annotation
            self._waiting.move_to_end(key, last=False)
        return self._trim()

    def clear(self) -> int:
        count = len(self._waiting)
        self._waiting.clear()
        return count

    def _trim(self) -> int:
        dropped = 0
        while len(self._waiting) > self.cap:
            self._waiting.popitem(last=False)
            dropped += 1
        return dropped
