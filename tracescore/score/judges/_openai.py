"""An LLM judge over any OpenAI-compatible chat completions endpoint (OpenAI, vLLM, Ollama, a test server).

One retry policy (tenacity; the openai client's own retries are off), a per-judge concurrency limit,
structured output with a json_object fallback for servers that reject json_schema, one repair round for
invalid replies, and usage/cost accounting that includes every HTTP call made.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import openai
from pydantic import ValidationError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from tracescore.model import Usage
from tracescore.score.judges._openai_settings import MissingApiKey, OpenAIJudgeSettings
from tracescore.score.judges._prompt import (
    TrimmedField,
    fit_to_budget,
    log_trimmed,
    minimal_schema,
    render_messages,
    repair_message,
    schema_name,
)
from tracescore.score.judges._protocol import InT, JudgeError, Judgement, JudgeTask, OutT

# Builds the messages; the flag says whether the output schema must be spelled out in the prompt.
_Prompt = Callable[[bool], list[dict[str, str]]]

__all__ = ["OpenAIJudge", "OpenAIJudgement", "TrimmedField"]

logger = logging.getLogger(__name__)

_TRANSIENT_STATUS = frozenset({408, 409, 429})


@dataclass(frozen=True)
class OpenAIJudgement(Judgement[OutT]):
    """A Judgement that also says which input fields were trimmed to fit `max_context_chars`."""

    trimmed: tuple[TrimmedField, ...] = ()


class _Spent:
    """Usage of one `run`, accumulated across retries, the fallback and the repair call."""

    def __init__(self, settings: OpenAIJudgeSettings) -> None:
        self._settings = settings
        self.usage = Usage()

    def add(self, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        cost = self._settings.cost_usd(prompt_tokens, completion_tokens)
        self.usage += Usage(
            calls=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost
        )


class _InvalidReply(Exception):
    """The reply could not become the output model; `content` goes back in the repair call."""

    def __init__(self, problem: str, content: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.content = content


@dataclass
class _LoopState:
    client: openai.AsyncOpenAI
    limiter: asyncio.Semaphore
    closer: AsyncGenerator[None, None] | None = None


async def _close_at_loop_shutdown(client: openai.AsyncOpenAI) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.close()


class OpenAIJudge:
    """Judge backed by chat completions. Safe to share across concurrent records and across event loops."""

    def __init__(
        self, settings: OpenAIJudgeSettings | None = None, *, client: openai.AsyncOpenAI | None = None
    ) -> None:
        self.settings = settings or OpenAIJudgeSettings()
        # An injected client is used as is (its owner closes it) except that its own retries are turned off.
        self._client = client.with_options(max_retries=0) if client is not None else None
        # Clients and semaphores bind to the event loop they first ran on, so each loop gets its own.
        self._loops: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._loops_lock = threading.Lock()
        # Config discovery, not per-call state: once the server rejects json_schema, stop offering it.
        # A plain bool: writes are atomic and every writer writes the same value.
        self._json_object_only = self.settings.structured_output == "json_object"
        if self._client is None and self.settings.api_key is None and self.settings.base_url is None:
            raise MissingApiKey(
                f"OpenAIJudge needs an API key: set {' or '.join(OpenAIJudgeSettings.key_variables())}, or "
                f"give a local server's base_url ({' or '.join(OpenAIJudgeSettings.base_url_variables())}), "
                "which takes none"
            )

    @property
    def name(self) -> str:
        return f"openai:{self.settings.model}"

    @property
    def base_url(self) -> str:
        """Where the requests go (the settings' base_url, else the OpenAI API; an injected client's own), for
        messages: without a user, password, query or fragment, so no credential is ever shown."""
        with self._loops_lock:
            client = self._client or next((state.client for state in self._loops.values()), None)
        url = urlsplit(str((client or self._build_client()).base_url))
        shown = url._replace(
            netloc=url.netloc.rpartition("@")[2], path=url.path.rstrip("/"), query="", fragment=""
        )
        return urlunsplit(shown)

    @property
    def structured_output_mode(self) -> Literal["json_schema", "json_object"]:
        """What the next call sends as response_format."""
        return "json_object" if self._json_object_only else "json_schema"

    async def aclose(self) -> None:
        """Close the client this judge built for the running loop now (an injected client is left alone).

        Optional: a client built for a loop is closed anyway when asyncio.run() finalises that loop.
        """
        with self._loops_lock:
            state = self._loops.pop(asyncio.get_running_loop(), None)
        if state is not None and state.closer is not None:
            await state.closer.aclose()

    async def __aenter__(self) -> OpenAIJudge:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def run(self, task: JudgeTask[InT, OutT], data: InT) -> OpenAIJudgement[OutT]:
        spent = _Spent(self.settings)
        payload, trimmed = fit_to_budget(data.model_dump(mode="json"), self.settings.max_context_chars)
        if trimmed:
            log_trimmed(logger, task.name, self.settings.max_context_chars, trimmed)

        def prompt(with_schema: bool) -> list[dict[str, str]]:
            return render_messages(task, payload, schema_in_prompt=with_schema)

        try:
            content = await self._complete(task, prompt, spent)
            try:
                output = _parse(task, content)
            except _InvalidReply as bad:
                # One repair round: the model sees its own reply and what is wrong with it.
                turns = repair_message(bad.content, bad.problem)
                content = await self._complete(task, lambda with_schema: prompt(with_schema) + turns, spent)
                try:
                    output = _parse(task, content)
                except _InvalidReply as still_bad:
                    raise JudgeError(f"invalid judge output after one repair: {still_bad.problem}") from None
        except JudgeError as exc:
            raise JudgeError(exc.cause, usage=spent.usage) from exc.__cause__
        warnings = tuple(t.warning for t in trimmed)
        return OpenAIJudgement(output=output, usage=spent.usage, warnings=warnings, trimmed=trimmed)

    # -- one completion: fallback, retries, refusals ----------------------------------------------------
    async def _complete(self, task: JudgeTask[Any, Any], messages: _Prompt, spent: _Spent) -> _Reply:
        use_schema = not self._json_object_only
        try:
            return await self._with_retries(task, messages, spent, use_schema=use_schema)
        except openai.BadRequestError as exc:
            if use_schema and self.settings.structured_output == "auto" and _rejects_json_schema(exc):
                logger.info("%s rejected json_schema; using json_object from now on", self.name)
                self._json_object_only = True
                try:
                    return await self._with_retries(task, messages, spent, use_schema=False)
                except openai.OpenAIError as again:
                    raise JudgeError(_describe(again, 1)) from again
            raise JudgeError(_describe(exc, 1)) from exc

    async def _with_retries(
        self, task: JudgeTask[Any, Any], messages: _Prompt, spent: _Spent, *, use_schema: bool
    ) -> _Reply:
        attempts = 0
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(_is_transient),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    return await self._call(task, messages, spent, use_schema=use_schema)
        except openai.BadRequestError:
            raise  # _complete decides between fallback and failure
        except openai.OpenAIError as exc:
            raise JudgeError(_describe(exc, attempts, self.settings.timeout_s)) from exc
        raise AssertionError("unreachable: tenacity either returns or re-raises")

    async def _call(
        self, task: JudgeTask[Any, Any], messages: _Prompt, spent: _Spent, *, use_schema: bool
    ) -> _Reply:
        state = await self._state()
        if use_schema:
            schema = minimal_schema(task.output_model)
            fmt: Any = {
                "type": "json_schema",
                "json_schema": {"name": schema_name(task), "schema": schema, "strict": False},
            }
        else:
            fmt = {"type": "json_object"}
        async with state.limiter:
            try:
                response = await state.client.chat.completions.create(
                    model=self.settings.model,
                    # With json_schema the schema travels in response_format (and the server enforces
                    # it), so the prompt need not repeat it; json_object mode carries it in the prompt.
                    messages=messages(not use_schema),  # type: ignore[arg-type]
                    temperature=self.settings.temperature,
                    response_format=fmt,
                    timeout=self.settings.timeout_s,
                )
            except openai.OpenAIError:
                spent.add()  # a failed attempt is still a call
                raise
        usage = response.usage
        spent.add(usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)
        if not response.choices:
            raise JudgeError("judge returned no choices")
        choice = response.choices[0]
        message = choice.message
        if message.refusal:
            raise JudgeError(f"judge refused: {_one_line(message.refusal)}")
        if choice.finish_reason == "content_filter":
            raise JudgeError("judge refused: the reply was blocked by the content filter")
        if not (message.content or "").strip() and choice.finish_reason != "length":
            raise JudgeError("judge refused: empty reply")
        return _Reply(content=message.content or "", finish_reason=choice.finish_reason or "")

    async def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._loops_lock:
            state = self._loops.get(loop)
            if state is not None:
                return state
            # States of loops that have ended are dead weight (their clients were closed at loop shutdown).
            for old in [old for old in self._loops if old.is_closed()]:
                del self._loops[old]
            client = self._client or self._build_client()
            state = _LoopState(client=client, limiter=asyncio.Semaphore(self.settings.concurrency))
            self._loops[loop] = state
        if self._client is None:
            # asyncio.run (and pytest-asyncio) finalise pending async generators before closing the loop:
            # a suspended generator is the loop-shutdown hook that closes the client we built for it.
            state.closer = _close_at_loop_shutdown(client)
            await anext(state.closer)
        return state

    def _build_client(self) -> openai.AsyncOpenAI:
        key = self.settings.api_key.get_secret_value() if self.settings.api_key else "unused"
        return openai.AsyncOpenAI(
            api_key=key, base_url=self.settings.base_url, timeout=self.settings.timeout_s, max_retries=0
        )

    def _wait(self, state: RetryCallState) -> float:
        """Jittered exponential backoff, stretched to the server's retry-after when it asks for longer."""
        backoff = wait_random_exponential(
            multiplier=self.settings.retry_base_s, max=self.settings.retry_max_s
        )(state)
        exc = state.outcome.exception() if state.outcome else None
        hint = _retry_after(exc)
        return min(self.settings.retry_max_s, max(backoff, hint)) if hint is not None else backoff


@dataclass(frozen=True)
class _Reply:
    content: str
    finish_reason: str


def _parse(task: JudgeTask[Any, OutT], reply: _Reply) -> OutT:
    if reply.finish_reason == "length":
        raise _InvalidReply(
            "it was cut off (finish_reason=length); keep it shorter and complete", reply.content
        )
    text = _strip_code_fence(reply.content)
    try:
        return task.output_model.model_validate_json(text)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False)
        problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in errors[:3])
        raise _InvalidReply(_one_line(problem), reply.content) from None


def _strip_code_fence(text: str) -> str:
    # Models in json_object mode still like ```json fences.
    match = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", text, re.DOTALL)
    return match.group(1) if match else text


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    return isinstance(exc, openai.APIStatusError) and (
        exc.status_code in _TRANSIENT_STATUS or exc.status_code >= 500
    )


def _rejects_json_schema(exc: openai.BadRequestError) -> bool:
    text = f"{exc.message} {exc.param or ''}".lower()
    return any(word in text for word in ("response_format", "json_schema", "unsupported", "not supported"))


def _retry_after(exc: BaseException | None) -> float | None:
    if not isinstance(exc, openai.APIStatusError):
        return None
    raw = exc.response.headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None  # an HTTP date; the backoff is good enough


def _describe(exc: BaseException, attempts: int, timeout_s: float | None = None) -> str:
    after = f" after {attempts} attempt{'s' if attempts != 1 else ''}"
    if isinstance(exc, openai.APITimeoutError):
        return f"timeout{after}" + (f" ({timeout_s:g}s each)" if timeout_s else "")
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error{after}: {_one_line(str(exc))}"
    if isinstance(exc, openai.APIStatusError):
        # exc.body is the API's error object; its message reads better than the "Error code: ..." repr.
        body = exc.body if isinstance(exc.body, dict) else {}
        message = body.get("message") or exc.message
        described = f"HTTP {exc.status_code}{after if attempts > 1 else ''}: {_one_line(str(message))}"
        return described + _base_url_hint(exc)
    return f"{type(exc).__name__}: {_one_line(str(exc))}"


def _base_url_hint(exc: openai.APIStatusError) -> str:
    """A 404 from a base URL without its API version (`http://localhost:8000`, not `.../v1`): the client
    adds /chat/completions to the base URL as given, and the server's own 404 does not say what is missing.
    (A 404 of a model that does not exist comes from a path with the version in it, and gets no hint.)"""
    path = exc.request.url.path if exc.status_code == 404 else ""
    if not path or any(part.startswith("v") and part[1:].isdigit() for part in path.split("/")):
        return ""
    return f" (POST {exc.request.url}: is the base URL missing its version path, such as /v1?)"


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
