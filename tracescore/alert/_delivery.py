"""Notifications to the sinks, waited for only until a stop's budget runs out.

A delivery may take long: a receiver that hangs costs `timeout_seconds` a try, `max_attempts` tries with a
backoff between them, and no signal interrupts a request under way. So the sinks are called on a worker
thread: while the service runs it waits for every delivery; once a stop is asked for, only until the stop's
deadline. A notification not delivered by then (the one under way included: it may have reached its
receiver) stays in its alert's saved state, the outbox, and the next start sends it to every sink.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tracescore._service import STOP_CHECK_S
from tracescore.alert._notification import Notification
from tracescore.alert._sinks import Sink

__all__ = ["Delivered", "deliver"]


@dataclass
class Delivered:
    done: list[tuple[Notification, int]] = field(default_factory=list)  # with how many sinks failed it
    not_done: list[Notification] = field(default_factory=list)  # the stop's deadline came first


def deliver(
    sinks: Sequence[Sink], notifications: Sequence[Notification], stop_deadline: Callable[[], float | None]
) -> Delivered:
    """Each notification to every sink, in order, until `stop_deadline()` (time.monotonic; None until a stop
    is asked for) passes; a sink's exception is raised here."""
    delivered = Delivered()
    lock = threading.Lock()
    given_up = False
    error: list[BaseException] = []

    def past_deadline() -> bool:
        deadline = stop_deadline()
        return deadline is not None and time.monotonic() >= deadline

    def run() -> None:
        try:
            for note in notifications:
                failures = sum(not sink.send(note) for sink in sinks)
                with lock:
                    if given_up:
                        return
                    delivered.done.append((note, failures))
        except BaseException as exc:  # raised in the caller's thread
            error.append(exc)

    if past_deadline():
        return Delivered(not_done=list(notifications))
    worker = threading.Thread(target=run, name="tracescore-alert-delivery", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(STOP_CHECK_S)
        if worker.is_alive() and past_deadline():
            with lock:
                given_up = True  # the worker records nothing more and starts no other notification
            break
    if error:
        raise error[0]
    delivered.not_done = list(notifications[len(delivered.done) :])
    return delivered
