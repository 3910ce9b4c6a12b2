"""The emit tests' harness: an HTTP client on the session's real Phoenix (`phoenix_api`)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from tracescore.testing.phoenix import PhoenixServer


@pytest.fixture
def phoenix_api(phoenix_server: PhoenixServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=phoenix_server.base_url, timeout=10.0) as client:
        yield client
