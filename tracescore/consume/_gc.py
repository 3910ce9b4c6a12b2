"""Python's cyclic garbage collector, tuned for the consumer's allocation pattern.

Decoding a message allocates thousands of short-lived containers (spans, attribute dicts, documents) that
reference counting frees on its own; with Python's default generation-0 threshold (700) the collector
still runs every few messages, and the older generations (clients, models, buffered traces) are walked
in proportion. Measured in BENCHMARKS.md "Trace assembly" (Python's 700 costs ~12% of that CPU).
"""

from __future__ import annotations

import gc

__all__ = ["tune_gc"]


def tune_gc(gen0_threshold: int) -> None:
    """Set generation 0's threshold for the whole process (0: leave Python's); the older generations keep
    theirs, so long-lived cycles are still collected."""
    if gen0_threshold > 0:
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(gen0_threshold, gen1, gen2)
