"""Phoenix span annotations: each evaluation record becomes an annotation on the span it scored (and each
conversation record an annotation on its session).

Arize Phoenix shows annotations next to the trace, so people reading a trace there see its scores. Records
go to `POST {endpoint}/v1/span_annotations` in batches. Phoenix is a viewer, not the record of truth (that
is the evaluations topic), so this sink never raises and never makes its caller wait: `send` only keeps the
annotations (bounded, `max_pending`), and a thread of the sink's own posts them. When Phoenix is down, hung
or overloaded, they stay kept and the thread asks again every `failure_pause_s`; once Phoenix answers, what
was kept is posted in batches. Past `max_pending` the oldest are dropped; a batch Phoenix refuses (4xx) is
dropped too (the same would be refused again); what is still kept when the sink closes is dropped. Each is
counted by reason (`dropped`), logged once per run of failures and in a closing total.

At start the thread asks Phoenix for one project (`GET /v1/projects`): a URL where nothing answers, or that
answers and is not Phoenix's API (another server, Phoenix's web app under a wrong path), is said in a
warning with what to change, before any annotation is lost on it.

Requests use `sync=false`: Phoenix queues the annotations and, when the scored span has not reached it
yet (the app's exporter and the scorer race), retries inside the server for about ten minutes before
discarding them. The flip side: a span that never reaches Phoenix loses its annotations silently. Phoenix
upserts on (span or session, name, identifier), so an annotation posted again (a timeout after Phoenix took
it, a replayed record) lands once.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from tracescore._plural import counted
from tracescore.emit._conversations import session_annotation
from tracescore.emit._phoenix_backlog import Backlog, Waiting
from tracescore.model import ConversationRecord, EvaluationRecord, MetricStatus

if TYPE_CHECKING:
    import httpx2
    from opentelemetry.metrics import CallbackOptions, Meter, Observation

__all__ = [
    "DROP_REASONS",
    "PAST_MAX_PENDING",
    "REJECTED",
    "UNSENT_AT_STOP",
    "PhoenixAnnotations",
    "PhoenixSettings",
    "span_annotation",
]

logger = logging.getLogger(__name__)


_IDENTIFIER_PREFIX = "tracescore"
_TRANSIENT_STATUS = frozenset({408, 429})
_KEY_VARIABLES = "TRACESCORE_PHOENIX_API_KEY or PHOENIX_API_KEY"
_SPANS_PATH = "/v1/span_annotations"
_SESSIONS_PATH = "/v1/session_annotations"
_CHECK_PATH = "/v1/projects"  # cheap, any key may read it, and only Phoenix's API answers it with JSON
_VERSION_HEADER = "x-phoenix-server-version"  # on every answer of Phoenix's, its web app's pages too
_BASE_URL_HINT = "the endpoint is Phoenix's base URL, without /v1 (http://host:6006)"

# Why annotations were dropped (`PhoenixAnnotations.dropped`, the metric's `reason`).
PAST_MAX_PENDING = "past_max_pending"  # Phoenix not accepting, and more kept than max_pending: the oldest
REJECTED = "rejected"  # Phoenix (or what answers there) refused the batch: posting it again would not help
UNSENT_AT_STOP = "unsent_at_stop"  # still kept when the sink closed (Phoenix not accepting at the stop)
DROP_REASONS = (PAST_MAX_PENDING, REJECTED, UNSENT_AT_STOP)
_SAID = {
    PAST_MAX_PENDING: "past max_pending while Phoenix was not accepting",
    REJECTED: "refused by Phoenix",
    UNSENT_AT_STOP: "not posted before the stop",
}


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
    timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="Per request; also the longest closing the sink waits for the annotations still kept "
        "to be posted, while Phoenix accepts them (at the consumer's stop, only what --stop-timeout left).",
    )
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
        description="After Phoenix timed out, refused the connection or answered 5xx/429, keep the "
        "annotations and ask it again this much later, one batch: posting runs beside the scoring, which "
        "never waits for Phoenix.",
    )
    max_pending: int = Field(
        default=10_000,
        ge=1,
        description="Annotations kept while Phoenix does not accept them (2 to 5 KB of memory each), posted "
        "when it does; past this the oldest are dropped, counted as past_max_pending.",
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
    """Posts evaluation records to Phoenix as span annotations, from a thread of its own.

    `send` and `send_sessions` never raise nor wait on Phoenix: they keep the annotations (at most
    `max_pending`) for the thread to post. `sent` counts annotations Phoenix accepted, `dropped` those given
    up on by reason (`DROP_REASONS`), `failed` their sum, `pending` those kept now; over the sink's life.
    With a `meter`: the counter `tracescore.phoenix.annotations` (by `outcome`, `posted` or `dropped`, and
    the dropped ones' `reason`) and the gauge `tracescore.phoenix.pending`.
    """

    def __init__(
        self,
        settings: PhoenixSettings | None = None,
        *,
        transport: httpx2.BaseTransport | None = None,
        meter: Meter | None = None,
        check: bool = True,
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
        self.dropped: Counter[str] = Counter()
        self._backlog = Backlog(self.settings.max_pending)
        self._in_flight = 0
        self._failing = False  # since the last failure, until a batch is accepted
        self._down = False  # the last failure was a timeout, a refused connection, 5xx or 429
        self._dropped_while_failing: Counter[str] = Counter()
        self._paused_until = 0.0  # time.monotonic() before which the thread asks Phoenix nothing
        self._stop_by: float | None = None  # set by close: the thread posts what it can until then
        self._closed = False
        self._changed = threading.Condition()  # guards everything above; notified on each change
        self._counter = None
        if meter is not None:
            self._counter = meter.create_counter(
                "tracescore.phoenix.annotations",
                unit="{annotation}",
                description="Phoenix annotations posted, or dropped (by reason).",
            )
            meter.create_observable_gauge(
                "tracescore.phoenix.pending",
                callbacks=[self._observe_pending],
                unit="{annotation}",
                description="Annotations kept for Phoenix, not yet accepted by it.",
            )
        self._thread = threading.Thread(
            target=self._run, args=(check,), name="tracescore-phoenix", daemon=True
        )
        self._thread.start()

    @property
    def failed(self) -> int:
        """Annotations dropped, whatever the reason."""
        return sum(self.dropped.values())

    @property
    def pending(self) -> int:
        with self._changed:
            return len(self._backlog) + self._in_flight

    def send(self, records: Iterable[EvaluationRecord]) -> int:
        """Keep `records` as span annotations, to be posted; returns how many were kept."""
        return self._keep(_SPANS_PATH, [span_annotation(r) for r in records])

    def send_sessions(self, records: Iterable[ConversationRecord]) -> int:
        """Keep conversation records as session annotations (the session is the conversation id, as its
        spans' `session.id`), to be posted; returns how many were kept."""
        return self._keep(_SESSIONS_PATH, [session_annotation(r) for r in records])

    def flush(self, timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) until Phoenix accepted or refused everything kept; False if some is
        still kept (Phoenix not accepting)."""
        with self._changed:
            return self._changed.wait_for(
                lambda: not self._backlog and not self._in_flight, timeout=timeout_s
            )

    def close(self, timeout_s: float | None = None) -> None:
        """Post what is kept while Phoenix accepts, returning within `timeout_s` (the consumer's stop gives
        what its budget has left) and never later than the settings' `timeout_s`; what is not posted by then
        is dropped, counted as unsent_at_stop. A post still under way is not waited for."""
        wait = (
            self.settings.timeout_s
            if timeout_s is None
            else max(0.0, min(timeout_s, self.settings.timeout_s))
        )
        with self._changed:
            if self._stop_by is None:
                self._stop_by = time.monotonic() + wait
                self._changed.notify_all()
            stop_by = self._stop_by
        self._thread.join(max(0.0, stop_by - time.monotonic()))
        with self._changed:
            if self._closed:
                return
            self._closed = True  # a post still under way no longer counts: its annotations are dropped
            self._drop(UNSENT_AT_STOP, self._backlog.clear() + self._in_flight)
            self._in_flight = 0
            self._changed.notify_all()
        self._client.close()  # returns at once, a post under way or not: that post then fails, unheard
        if self.dropped:
            # The warning said only the first failure: the run's total, beside the consumer's summary.
            said = {
                **_SAID,
                UNSENT_AT_STOP: f"{_SAID[UNSENT_AT_STOP]}, within the {wait:.1f}s closing had",
            }
            reasons = ", ".join(f"{n} {said[reason]}" for reason, n in sorted(self.dropped.items()))
            logger.warning(
                "Phoenix at %s: %s dropped (%s), %d posted; the records are on the evaluations topic",
                self._where,
                counted(self.failed, "annotation"),
                reasons,
                self.sent,
            )

    def __enter__(self) -> PhoenixAnnotations:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the caller's side ------------------------------------------------------------------------------

    def _keep(self, path: str, annotations: list[dict[str, Any]]) -> int:
        if not annotations:
            return 0
        with self._changed:
            if self._closed:
                self._drop(UNSENT_AT_STOP, len(annotations))
                return 0
            past = self._backlog.put(path, annotations)
            if past:
                self._past_max_pending(past)
            self._changed.notify_all()
        return len(annotations) - past

    def _past_max_pending(self, count: int) -> None:
        if not self._dropped_while_failing[PAST_MAX_PENDING]:
            logger.warning(
                "Phoenix at %s: %s kept while it does not accept them (max_pending): dropping the oldest, "
                "counted as %s",
                self._where,
                counted(self.settings.max_pending, "annotation"),
                PAST_MAX_PENDING,
            )
        self._drop(PAST_MAX_PENDING, count)

    # --- the thread's side ------------------------------------------------------------------------------

    def _run(self, check: bool) -> None:
        try:
            if check:
                self._check()
            while (batch := self._next_batch()) is not None:
                self._deliver(*batch)
        except Exception:  # a bug of ours: said, and the caller goes on (its annotations are kept, counted)
            logger.exception("Phoenix at %s: posting annotations stopped", self._where)

    def _next_batch(self) -> tuple[str, list[Waiting]] | None:
        with self._changed:
            while True:
                if self._closed:
                    return None
                now = time.monotonic()
                if self._stop_by is not None and (self._down or not self._backlog or now >= self._stop_by):
                    return None  # stopping: nothing more to post, or Phoenix down or hung, or out of time
                if self._backlog and (now >= self._paused_until or self._stop_by is not None):
                    path, taken = self._backlog.take(self.settings.batch_size)
                    self._in_flight = len(taken)
                    return path, taken
                self._changed.wait(self._paused_until - now if self._backlog else None)

    def _deliver(self, path: str, taken: list[Waiting]) -> None:
        try:
            self._post(path, [annotation for _, annotation in taken])
        except Exception as exc:  # never into the caller: scoring must go on without Phoenix
            with self._changed:
                if self._closed:
                    return
                self._in_flight = 0
                if _transient(exc):
                    self._not_accepting(self._describe(exc))
                    past = self._backlog.give_back(taken)
                    if past:
                        self._past_max_pending(past)
                else:
                    self._refused(self._describe(exc), len(taken))
                self._changed.notify_all()
            return
        with self._changed:
            if self._closed:
                return
            self._in_flight = 0
            self.sent += len(taken)
            self._add("posted", len(taken))
            if self._failing:
                self._recovered(len(taken) + len(self._backlog))
            self._dropped_while_failing = Counter()  # a later drop past max_pending is said again
            self._changed.notify_all()

    def _post(self, path: str, data: list[dict[str, Any]]) -> None:
        # While Phoenix is failing, or at the stop, one attempt per batch: the pause paces the next one.
        settings = self.settings
        with self._changed:
            hurried = self._failing or self._stop_by is not None
            left = None if self._stop_by is None else max(0.1, self._stop_by - time.monotonic())
        retrying = Retrying(
            stop=stop_after_attempt(1 if hurried else settings.max_retries + 1),
            wait=wait_random_exponential(multiplier=settings.retry_base_s, max=settings.retry_max_s),
            retry=retry_if_exception(_transient),
            reraise=True,
        )
        timeout = settings.timeout_s if left is None else min(settings.timeout_s, left)
        for attempt in retrying:
            with attempt:
                response = self._client.post(
                    path, params={"sync": False}, json={"data": data}, timeout=timeout
                )
                response.raise_for_status()

    def _check(self) -> None:
        """One cheap request before any post: what is wrong with the endpoint is said before an annotation
        is lost on it. Never stops anything: the posts go on (and are counted) whatever it found."""
        try:
            response = self._client.get(_CHECK_PATH, params={"limit": 1})
        except Exception as exc:
            if _transient(exc):
                with self._changed:
                    self._not_accepting(self._describe(exc))
            else:
                logger.warning(
                    "Phoenix at %s cannot be asked (%s); annotations posted there are refused and dropped",
                    self._where,
                    self._describe(exc),
                )
            return
        status = response.status_code
        asked = f"GET {_CHECK_PATH}: HTTP {status}"
        version = response.headers.get(_VERSION_HEADER)
        if _is_api_answer(response):
            logger.info("Phoenix %s at %s answers; annotations are posted there", version or "", self._where)
        elif status in (401, 403):
            logger.warning(
                "Phoenix at %s refuses the request (%s); annotations posted there are refused and dropped",
                self._where,
                self._said(response),
            )
        elif status >= 500 or status in _TRANSIENT_STATUS:
            with self._changed:
                self._not_accepting(self._said(response))
        elif version is not None:
            # Phoenix's web app answers any path it does not know with its page: a path in the endpoint.
            logger.warning(
                "Phoenix %s answers at %s, but not its API (%s, %s): %s; annotations posted there are "
                "refused and dropped",
                version,
                self._where,
                asked,
                response.headers.get("content-type", "no content type"),
                _BASE_URL_HINT,
            )
        else:
            logger.warning(
                "%s answers, but is not Phoenix (%s, no %s header): is it Phoenix's address? %s; "
                "annotations posted there are refused and dropped",
                self._where,
                asked,
                _VERSION_HEADER,
                _BASE_URL_HINT,
            )

    # --- what happened, counted and said (the caller holds self._changed) -------------------------------

    def _not_accepting(self, cause: str) -> None:
        """Down, hung or overloaded: what is kept waits for the pause, and so does everything kept after."""
        self._paused_until = time.monotonic() + self.settings.failure_pause_s
        self._down = True
        if self._failing:
            logger.debug("Phoenix at %s still not accepting: %s", self._where, cause)
            return
        self._failing = True
        logger.warning(
            "Phoenix at %s is not accepting annotations (%s); keeping them (up to %s, max_pending) and "
            "asking again every %gs (failure_pause_s). Further failures are not logged until it accepts.",
            self._where,
            cause,
            f"{self.settings.max_pending:,}",
            self.settings.failure_pause_s,
        )

    def _refused(self, cause: str, count: int) -> None:
        self._drop(REJECTED, count)
        self._down = False  # it answered: what else is kept may be accepted
        if self._failing:
            logger.debug("Phoenix at %s refused %s: %s", self._where, counted(count, "annotation"), cause)
            return
        self._failing = True
        logger.warning(
            "Phoenix at %s is not accepting annotations (%s); dropped %d (%s: posted again, they would be "
            "refused again). Further failures are not logged until it accepts.",
            self._where,
            cause,
            count,
            REJECTED,
        )

    def _recovered(self, kept: int) -> None:
        dropped = self._dropped_while_failing
        said = ", ".join(f"{n} {_SAID[reason]}" for reason, n in sorted(dropped.items()))
        logger.info(
            "Phoenix at %s accepts annotations again; posting the %s kept meanwhile%s",
            self._where,
            counted(kept, "annotation"),
            f"; {counted(sum(dropped.values()), 'annotation')} dropped meanwhile ({said})" if dropped else "",
        )
        self._failing = self._down = False

    def _drop(self, reason: str, count: int) -> None:
        if count:
            self.dropped[reason] += count
            self._dropped_while_failing[reason] += count
            self._add("dropped", count, reason)

    def _add(self, outcome: str, count: int, reason: str | None = None) -> None:
        if self._counter is not None:
            self._counter.add(count, {"outcome": outcome, **({"reason": reason} if reason else {})})

    def _observe_pending(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        yield Observation(self.pending)

    def _describe(self, exc: Exception) -> str:
        import httpx2

        if isinstance(exc, httpx2.HTTPStatusError):
            return self._said(exc.response)
        if isinstance(exc, httpx2.UnsupportedProtocol):
            return f"{type(exc).__name__}: the endpoint needs http:// or https:// (http://host:6006)"
        if isinstance(exc, httpx2.ConnectError) and _caused_by(exc, socket.gaierror):
            host = httpx2.URL(self.settings.endpoint).host
            return f"{type(exc).__name__}: {exc}; is the host name {host!r} right?"
        if isinstance(exc, httpx2.ConnectError) and _caused_by(exc, ConnectionRefusedError):
            return f"{type(exc).__name__}: {exc}; nothing listens there: is Phoenix running, on this port?"
        if isinstance(exc, httpx2.TimeoutException):
            return f"{type(exc).__name__}: no answer within {self.settings.timeout_s:g}s (timeout_s)"
        return f"{type(exc).__name__}: {exc}"

    def _said(self, response: httpx2.Response) -> str:
        status = response.status_code
        # Phoenix's error body says what it rejected ("Spans ... do not exist", a validation error).
        said = f"HTTP {status}: {response.text[:300]}"
        if status in (401, 403):
            if self.settings.api_key is None:
                return f"{said}; Phoenix has auth on: set its API key in {_KEY_VARIABLES} (none was sent)"
            return f"{said}; Phoenix refused the API key from {_KEY_VARIABLES}"
        if status in (404, 405):
            return f"{said}; {_BASE_URL_HINT}"
        return said


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `kind` is in `exc`'s chain (httpx2 wraps httpcore's error, which wraps the socket's)."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain is short; a cycle must not loop
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _is_api_answer(response: httpx2.Response) -> bool:
    """Phoenix's REST API answering GET /v1/projects: JSON with its `data` list."""
    if response.status_code != 200 or not response.headers.get("content-type", "").startswith(
        "application/json"
    ):
        return False
    try:
        return isinstance(response.json().get("data"), list)
    except ValueError:
        return False


def _transient(exc: BaseException) -> bool:
    import httpx2  # loaded already: the client raised it

    if isinstance(exc, httpx2.UnsupportedProtocol):
        return False  # the endpoint's scheme: asking again would not help
    if isinstance(exc, httpx2.TransportError):
        return True
    if isinstance(exc, httpx2.HTTPStatusError):
        status = exc.response.status_code
        return status >= 500 or status in _TRANSIENT_STATUS
    return False
