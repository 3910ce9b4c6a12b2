"""Phoenix span annotations: each evaluation record becomes an annotation on the span it scored (and each
conversation record an annotation on its session).

Arize Phoenix shows annotations next to the trace, so people reading a trace there see its scores. Records
go to `POST {endpoint}/v1/span_annotations` in batches. Phoenix is a viewer, not the record of truth (that
is the evaluations topic), so this sink never raises: when Phoenix is down, slow or rejects a batch, the
batch is dropped, counted in `failed`, and one warning is logged per run of failures. The consumer calls it
on the thread that polls Kafka: after Phoenix timed out or refused (down, overloaded, hung), records are
dropped without a request for `failure_pause_s`, so a Phoenix that hangs costs one timeout per pause, not one
per batch (the poll loop would stall past the group's poll interval and a stop past its budget).

Requests use `sync=false`: Phoenix queues the annotations and, when the scored span has not reached it
yet (the app's exporter and the scorer race), retries inside the server for about ten minutes before
discarding them. The flip side: a span that never reaches Phoenix loses its annotations silently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from tracescore._plural import counted
from tracescore.emit._conversations import session_annotation
from tracescore.model import ConversationRecord, EvaluationRecord, MetricStatus

if TYPE_CHECKING:
    import httpx2

__all__ = ["PhoenixAnnotations", "PhoenixSettings", "span_annotation"]

logger = logging.getLogger(__name__)


_IDENTIFIER_PREFIX = "tracescore"
_TRANSIENT_STATUS = frozenset({408, 429})
_KEY_VARIABLES = "TRACESCORE_PHOENIX_API_KEY or PHOENIX_API_KEY"


class PhoenixSettings(BaseSettings):
    """Where and how to send annotations; each field reads TRACESCORE_PHOENIX_<FIELD> from the environment."""

    # populate_by_name: a keyword sets api_key, whose variables are aliases, without the bare name becoming a
    # variable too (a shell's generic API_KEY must not be sent to Phoenix).
    model_config = SettingsConfigDict(
        env_prefix="TRACESCORE_PHOENIX_", frozen=True, extra="ignore", populate_by_name=True
    )

    endpoint: str = Field(
        default="http://127.0.0.1:6006",
        description="Phoenix's base URL, without /v1. A command posts nothing without --phoenix-endpoint "
        "(or its variable): this default is for `PhoenixSettings()` in code.",
    )
    api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("TRACESCORE_PHOENIX_API_KEY", "PHOENIX_API_KEY"),
        description="Sent as Authorization: Bearer <key> (Phoenix with auth on); falls back to "
        "PHOENIX_API_KEY.",
    )
    timeout_s: float = Field(default=5.0, gt=0, description="Per request.")
    max_retries: int = Field(
        default=2, ge=0, description="Retries after the first attempt, while Phoenix is healthy."
    )
    retry_base_s: float = Field(
        default=0.5, ge=0, description="Exponential backoff with full jitter from here..."
    )
    retry_max_s: float = Field(default=5.0, ge=0, description="...capped here.")
    batch_size: int = Field(default=100, ge=1, description="Annotations per request.")
    failure_pause_s: float = Field(
        default=30.0,
        ge=0,
        description="After Phoenix timed out, refused or answered 5xx/429, drop annotations (counted) "
        "without asking it for this long, then try one batch: a hung Phoenix costs the consumer one timeout "
        "per pause, not one per batch.",
    )

    @field_validator("api_key", mode="before")
    @classmethod
    def _blank_key_is_none(cls, value: object) -> object:
        # `export PHOENIX_API_KEY=` (set but empty) means no key, not the header `Bearer ` httpx refuses.
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        return None if isinstance(text, str) and not text.strip() else value


def span_annotation(record: EvaluationRecord) -> dict[str, Any]:
    """One element of the `data` list of POST /v1/span_annotations.

    Failed evaluations are sent too, with no score, label "error" and the cause as the explanation: in
    Phoenix a missing annotation looks like "not scored yet", an error label can be filtered on.
    """
    if record.status == MetricStatus.ERROR:
        label: str | None = MetricStatus.ERROR.value
        explanation = f"error: {record.reason}" if record.reason else "error"
    else:
        label = record.label
        if label is None and record.status != MetricStatus.OK:
            label = record.status.value  # "not_applicable": say why there is no score
        explanation = record.reason
    return {
        "span_id": record.span_id,
        "name": record.metric,
        "annotator_kind": record.annotator_kind,
        # Phoenix upserts on (span, name, identifier): a replayed record (the consumer is at-least-once)
        # or a later revision (late spans changed what was judged) overwrites the earlier one, while two
        # judges scoring the same span keep one annotation each.
        "identifier": f"{_IDENTIFIER_PREFIX}:{record.judge}",
        "result": {"label": label, "score": record.score, "explanation": explanation},
        "metadata": record.model_dump(
            mode="json",
            include={
                "trace_id",
                "judge",
                "status",
                "service_name",
                "route",
                "evaluation_span_id",
                "details",
                "revision",
            },
        ),
    }


class PhoenixAnnotations:
    """Posts evaluation records to Phoenix as span annotations. Synchronous; one thread at a time.

    `send` never raises. `sent` and `failed` count records over the sink's life.
    """

    def __init__(
        self, settings: PhoenixSettings | None = None, *, transport: httpx2.BaseTransport | None = None
    ) -> None:
        import httpx2  # only with Phoenix configured: every service loads this module (emit)

        self.settings = settings or PhoenixSettings()
        headers = {}
        if self.settings.api_key is not None:
            headers["Authorization"] = f"Bearer {self.settings.api_key.get_secret_value()}"
        self._client = httpx2.Client(
            base_url=self.settings.endpoint,
            headers=headers,
            timeout=self.settings.timeout_s,
            transport=transport,
        )
        # For log lines: credentials in the URL stay out of the logs like the API key does.
        self._where = str(httpx2.URL(self.settings.endpoint).copy_with(userinfo=b""))
        self.sent = 0
        self.failed = 0
        self._failing = False
        self._dropped_while_failing = 0
        self._paused_until = 0.0  # time.monotonic() before which no request is made

    def send(self, records: Iterable[EvaluationRecord]) -> int:
        """Post `records` as span annotations, in batches; returns how many Phoenix accepted."""
        return self._send_all("/v1/span_annotations", [span_annotation(r) for r in records])

    def send_sessions(self, records: Iterable[ConversationRecord]) -> int:
        """Post conversation records as session annotations (the session is the conversation id, as its
        spans' `session.id`), in batches; returns how many Phoenix accepted."""
        return self._send_all("/v1/session_annotations", [session_annotation(r) for r in records])

    def _send_all(self, path: str, pending: Sequence[dict[str, Any]]) -> int:
        if pending and time.monotonic() < self._paused_until:
            self._dropped(len(pending), None)
            return 0
        accepted = 0
        size = self.settings.batch_size
        for start in range(0, len(pending), size):
            batch = pending[start : start + size]
            try:
                self._post(path, list(batch))
            except Exception as exc:  # never into the caller: scoring must go on without Phoenix
                if _transient(exc):
                    # Down, overloaded or hung: the rest of this call, and the calls of the pause after it,
                    # would only wait the same way.
                    self._paused_until = time.monotonic() + self.settings.failure_pause_s
                    self._dropped(len(pending) - start, exc)
                    break
                self._dropped(len(batch), exc)
                continue
            accepted += len(batch)
            self.sent += len(batch)
            if self._failing:
                logger.info(
                    "Phoenix at %s accepts annotations again; %s dropped meanwhile",
                    self._where,
                    counted(self._dropped_while_failing, "annotation"),
                )
                self._failing = False
                self._dropped_while_failing = 0
        return accepted

    def close(self) -> None:
        self._client.close()
        if self.failed:
            # The warning said only the first batch: the run's total, beside the consumer's summary.
            logger.warning(
                "Phoenix at %s: %s dropped, %d posted; the records are on the evaluations topic",
                self._where,
                counted(self.failed, "annotation"),
                self.sent,
            )

    def __enter__(self) -> PhoenixAnnotations:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _post(self, path: str, data: list[dict[str, Any]]) -> None:
        # While Phoenix is failing, one attempt per batch: retries would only stall the scoring loop.
        attempts = 1 if self._failing else self.settings.max_retries + 1
        settings = self.settings
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=wait_random_exponential(multiplier=settings.retry_base_s, max=settings.retry_max_s),
            retry=retry_if_exception(_transient),
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                response = self._client.post(path, params={"sync": False}, json={"data": data})
                response.raise_for_status()

    def _dropped(self, count: int, exc: Exception | None) -> None:
        """`exc` None: dropped unasked, during the pause after a failure."""
        self.failed += count
        self._dropped_while_failing += count
        cause = "unasked, pausing after a failure" if exc is None else self._describe(exc)
        if self._failing:
            logger.debug("Phoenix at %s: dropped %s: %s", self._where, counted(count, "annotation"), cause)
            return
        self._failing = True
        logger.warning(
            "Phoenix at %s is not accepting annotations (%s); dropped %d. "
            "Further failures are not logged until it accepts again.",
            self._where,
            cause,
            count,
        )

    def _describe(self, exc: Exception) -> str:
        import httpx2

        if isinstance(exc, httpx2.HTTPStatusError):
            status = exc.response.status_code
            # Phoenix's error body says what it rejected ("Spans ... do not exist", a validation error).
            said = f"HTTP {status}: {exc.response.text[:300]}"
            if status in (401, 403):
                if self.settings.api_key is None:
                    return f"{said}; Phoenix has auth on: set its API key in {_KEY_VARIABLES} (none was sent)"
                return f"{said}; Phoenix refused the API key from {_KEY_VARIABLES}"
            if status in (404, 405):
                return f"{said}; the endpoint is Phoenix's base URL, without /v1 (http://host:6006)"
            return said
        if isinstance(exc, httpx2.UnsupportedProtocol):
            return f"{type(exc).__name__}: the endpoint needs http:// or https:// (http://host:6006)"
        return f"{type(exc).__name__}: {exc}"


def _transient(exc: BaseException) -> bool:
    import httpx2  # loaded already: the client raised it

    if isinstance(exc, httpx2.TransportError):
        return True
    if isinstance(exc, httpx2.HTTPStatusError):
        status = exc.response.status_code
        return status >= 500 or status in _TRANSIENT_STATUS
    return False
