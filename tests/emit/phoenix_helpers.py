"""Waiting for what Phoenix shows: it inserts spans and annotations asynchronously."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(fetch: Callable[[], T | None], what: str, timeout_s: float = 60.0) -> T:
    """Poll until `fetch` returns something truthy; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = fetch()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not visible in Phoenix after {timeout_s:.0f}s")
        time.sleep(0.2)
