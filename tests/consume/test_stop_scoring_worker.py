"""The scoring worker at a stop: closing it waits no longer than it is given, even when a call blocks its
loop (it is left behind, on a daemon thread); calls its loop hands to threads (`asyncio.to_thread`) run on
daemon threads, so one that never returns does not hold the process at exit."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest
from _zygote import run
from kafka_helpers import REPO
from service_processes import checkout_env

from tracescore.consume._scoring import ScoringWorker

GENEROUS_S = 30.0  # far above what each step takes on a loaded machine


def test_closing_gives_up_on_a_loop_a_call_blocks_within_the_time_it_is_given() -> None:
    release = threading.Event()
    entered = threading.Event()

    async def blocking() -> None:
        entered.set()
        release.wait(GENEROUS_S)  # a blocking call on the loop: no cancel interrupts it

    worker = ScoringWorker()
    worker.submit(blocking())
    assert entered.wait(GENEROUS_S)
    try:
        started = time.monotonic()
        assert worker.close(0.2) is False, "the loop is still held"
        assert time.monotonic() - started < GENEROUS_S
    finally:
        release.set()
    # Once the call returns, the cancel asked for runs and the loop stops: its thread ends.
    assert worker.close(GENEROUS_S) is True


def test_a_call_handed_to_a_thread_gives_its_result_or_error() -> None:
    async def on_a_thread() -> int:
        return await asyncio.to_thread(sum, [1, 2])

    async def failing() -> None:
        await asyncio.to_thread(int, "not a number")

    worker = ScoringWorker()
    try:
        assert worker.submit(on_a_thread()).result(GENEROUS_S) == 3
        with pytest.raises(ValueError, match="not a number"):
            worker.submit(failing()).result(GENEROUS_S)
    finally:
        assert worker.close(GENEROUS_S) is True


# A program embedding the worker (as one embedding EvaluationConsumer): a call handed to a thread never
# returns; the worker is closed and the program ends as any does, by the interpreter's exit.
EMBEDDED = """
import asyncio
import threading

from tracescore.consume._scoring import ScoringWorker

entered = threading.Event()


def never_returns() -> None:
    entered.set()
    threading.Event().wait()


async def held() -> None:
    await asyncio.to_thread(never_returns)


worker = ScoringWorker()
worker.submit(held())
entered.wait()
assert worker.close(5.0), "the loop ended: the call runs on its own thread"
print("closed")
"""


def test_a_call_on_a_thread_that_never_returns_does_not_hold_the_process_at_exit() -> None:
    # Before, the loop's default executor was a ThreadPoolExecutor: the interpreter joins its threads at exit.
    done = run([sys.executable, "-c", EMBEDDED], env=checkout_env(), cwd=REPO, timeout=GENEROUS_S)
    assert (done.returncode, done.stdout.strip()) == (0, "closed"), done.stderr
