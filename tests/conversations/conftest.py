"""The conversation tests replay the recordings of the real instrumentation libraries: `recorded.py` of
tests/extract, the one reader of their manifests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "extract"))


@pytest.fixture(autouse=True)
def _close_harnesses() -> Iterator[None]:
    """Every grounding harness a test built is closed after it, so no event loop outlives its test."""
    yield
    from grounding_turns import Harness

    while Harness.created:
        Harness.created.pop().close()
