"""Fixtures for judge tests: a running local OpenAI-compatible server and judges pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tracescore.score.judges import OpenAIJudge, OpenAIJudgeSettings
from tracescore.testing.judge_server import JudgeServer

MakeJudge = Callable[..., OpenAIJudge]


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as running:
        yield running


@pytest.fixture
def make_judge(server: JudgeServer) -> MakeJudge:
    """Judges pointed at the test server, with sub-second backoff and short timeouts."""

    def make(**overrides: Any) -> OpenAIJudge:
        fields: dict[str, Any] = {
            "base_url": server.base_url,
            "api_key": "unused",
            "model": "judge-test",
            "timeout_s": 2.0,
            "max_retries": 2,
            "retry_base_s": 0.001,
            "retry_max_s": 0.01,
        }
        return OpenAIJudge(OpenAIJudgeSettings(**{**fields, **overrides}))

    return make
