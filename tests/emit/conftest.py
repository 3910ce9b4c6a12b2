"""`phoenix_server`: a real Arize Phoenix server (`phoenix serve` from PyPI), started once per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tracescore.testing.phoenix import PhoenixServer


@pytest.fixture(scope="session")
def phoenix_server() -> Iterator[PhoenixServer]:
    # No skip on failure: a test that needs Phoenix and cannot get it must fail loudly (PhoenixUnavailable).
    with PhoenixServer() as server:
        yield server
