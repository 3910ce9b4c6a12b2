"""Python's cyclic garbage collector, tuned for the consumer's allocation pattern.

Decoding a message allocates thousands of short-lived containers (spans, attribute dicts, documents) that
reference counting frees on its own; with Python's default generation-0 threshold (700) the collector
still runs every few messages, and the older generations (clients, models, buffered traces) are walked
in proportion. Measured in BENCHMARKS.md "Trace assembly" (Python's 700 costs ~12% of that CPU).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_tuned"]


@contextmanager
def gc_tuned(gen0_threshold: int) -> Iterator[None]:
    """Generation 0's threshold raised to `gen0_threshold` while the block runs (0: Python's left alone),
    then put back, so an application that embeds the consumer gets its own settings back when `run()`
    returns. The older generations keep theirs: long-lived cycles are still collected."""
    saved = gc.get_threshold()
    if gen0_threshold > 0:
        gc.set_threshold(gen0_threshold, *saved[1:])
    try:
        yield
    finally:
        if gen0_threshold > 0:
            gc.set_threshold(*saved)
