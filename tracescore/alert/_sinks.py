"""Where notifications go: the log, a generic signed webhook, Slack, Alertmanager.

Every sink is a `Sink`: `send(notification)` never raises; a receiver that hangs, fails or redirects is
retried a bounded number of times (transient failures only), then the notification is given up for that
sink, counted as failed and logged in one line that says how many attempts were made and what becomes of
it: nothing sends it to that sink again (the outbox, alert/_logic.py, holds a notification until every
sink was tried, not until every sink took it); a firing alert reaches it again with the rule's next
reminder, or Alertmanager's next re-send. Redirects are never followed: a webhook URL that moved is a
configuration error, and following it could carry the signature somewhere unintended.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from datetime import UTC
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from tracescore._plural import counted
from tracescore.alert._config import (
    AlertmanagerSinkConfig,
    LogSinkConfig,
    SinkConfig,
    SlackSinkConfig,
    WebhookSinkConfig,
    _HttpSink,
)
from tracescore.alert._notes import NO_DATA_ALERT
from tracescore.alert._notification import Notification

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "SIGNATURE_HEADER",
    "AlertmanagerSink",
    "LogSink",
    "Sink",
    "SlackSink",
    "WebhookSink",
    "make_sink",
    "sign",
]

_log = logging.getLogger("tracescore.alert")
SIGNATURE_HEADER = "X-Tracescore-Signature"


@runtime_checkable
class Sink(Protocol):
    name: str
    where: str  # how the service's start line names it: never a URL's path or credentials
    sent: int
    failed: int

    def send(self, notification: Notification) -> bool: ...

    def close(self) -> None: ...


def sign(secret: bytes, body: bytes) -> str:
    """The signature header's value: `sha256=` and the hex HMAC-SHA256 of the exact body bytes."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class LogSink:
    name = "log"
    where = "log"

    def __init__(self, config: LogSinkConfig | None = None, *, note: str = "") -> None:
        self.sent = 0
        self.failed = 0
        self.note = note  # said after every line: whose alert it is, where that is not the service's

    def send(self, notification: Notification) -> bool:
        level = (
            logging.INFO
            if notification.state == "resolved" or notification.severity == "info"
            else logging.WARNING
        )
        again = f" (still firing, since {_when(notification)})" if notification.repeat else ""
        step = f" | first step: {notification.first_step}" if notification.first_step else ""
        _log.log(level, "[%s] %s%s%s%s", notification.headline, notification.summary, again, step, self.note)
        self.sent += 1
        return True

    def close(self) -> None:
        pass


class _HttpPoster:
    """A JSON POST with a timeout and bounded retries on transient failures; the body is serialised once so
    a signature covers exactly the bytes sent."""

    def __init__(self, name: str, config: _HttpSink, transport: httpx2.BaseTransport | None = None) -> None:
        import httpx2  # a sink that posts only: the log sink, the default, needs no HTTP client

        self.name = name
        self.config = config
        self.sent = 0
        self.failed = 0
        self._client = httpx2.Client(
            timeout=config.timeout_seconds, follow_redirects=False, transport=transport
        )
        # For log lines: never the URL's credentials, path or query (Slack's secret is its path).
        url = httpx2.URL(config.url)
        self._where = f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")
        self.where = f"{name} at {self._where}"

    def post(self, url: str, payload: Any, note: Notification, headers: dict[str, str] | None = None) -> bool:
        body = json.dumps(payload, separators=(",", ":"), default=str).encode()
        all_headers = {"Content-Type": "application/json", **self._sign(body), **(headers or {})}
        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_attempts),
            wait=wait_random_exponential(multiplier=self.config.retry_base_seconds, max=10),
            retry=retry_if_exception(_transient),
            reraise=True,
        )
        started, tries = time.monotonic(), 0
        try:
            for attempt in retrying:
                with attempt:
                    tries += 1
                    response = self._client.post(url, content=body, headers=all_headers)
                    if response.is_redirect:
                        raise _Redirected(response.headers.get("location", "?"))
                    response.raise_for_status()
        except Exception as exc:  # never into the service: the next notification must still go out
            self.failed += 1
            retried = "" if _transient(exc) or tries > 1 else "; not retried: not a transient failure"
            _log.warning(
                "%s sink at %s: %s %s of %s %s not delivered after %s in %.1fs (%s%s): given up, not sent to "
                "this sink again; %s",
                self.name, self._where, note.state, note.alertname, note.service, note.route,
                counted(tries, "attempt"), time.monotonic() - started, _describe(exc), retried,
                self._after_failure(note),
            )  # fmt: skip
            return False
        self.sent += 1
        return True

    def _sign(self, body: bytes) -> dict[str, str]:
        return {}

    def _after_failure(self, note: Notification) -> str:
        """What becomes of an alert whose notification this sink gave up on."""
        if note.state == "resolved":
            return "its receiver is not told the alert resolved"
        if note.alertname == NO_DATA_ALERT:
            return "its receiver is not told (no-data alerts send no reminders)"
        return "if the alert still fires at the rule's next reminder (renotify_seconds), that one is sent"

    def close(self) -> None:
        self._client.close()


class _Redirected(Exception):
    def __init__(self, location: str) -> None:
        super().__init__(f"redirected to {location}; redirects are not followed, configure the final URL")


class WebhookSink(_HttpPoster):
    """POSTs the notification as JSON, signed with HMAC-SHA256 in the X-Tracescore-Signature header."""

    def __init__(self, config: WebhookSinkConfig, transport: httpx2.BaseTransport | None = None) -> None:
        super().__init__("webhook", config, transport)
        secret = config.secret.get_secret_value() if config.secret else None
        if secret is None and config.secret_env:
            secret = os.environ.get(config.secret_env)
            if secret is None:
                raise ValueError(f"webhook sink: environment variable {config.secret_env} is not set")
        self._secret = secret.encode() if secret else None

    def _sign(self, body: bytes) -> dict[str, str]:
        return {SIGNATURE_HEADER: sign(self._secret, body)} if self._secret else {}

    def send(self, notification: Notification) -> bool:
        return self.post(self.config.url, notification.to_json(), notification)


class SlackSink(_HttpPoster):
    """Slack incoming-webhook message: one line of text plus a coloured attachment with the details."""

    def __init__(self, config: SlackSinkConfig, transport: httpx2.BaseTransport | None = None) -> None:
        super().__init__("slack", config, transport)

    def send(self, notification: Notification) -> bool:
        return self.post(self.config.url, slack_message(notification), notification)


_SLACK_ICONS = {
    "FIRING": ":rotating_light:",
    "RESOLVED": ":white_check_mark:",
    "ESCALATED": ":arrow_double_up:",
    "DE-ESCALATED": ":arrow_down_small:",
    "SUPERSEDED": ":arrows_counterclockwise:",
    "ENDED": ":heavy_minus_sign:",
    "ACCEPTED": ":heavy_minus_sign:",
}
# Green is for a recovery only: an alert ended because the config stopped watching it, or because a lasting
# drop became the route's normal, is grey.
_SLACK_NO_RECOVERY = "#808080"
_SLACK_COLOURS = {"critical": "#d00000", "warning": "#e8a317", "info": "#439fe0"}


def slack_message(n: Notification) -> dict[str, Any]:
    # Green only for a real recovery: a superseded severity still fires under the other one.
    still_firing = n.state == "firing" or n.to_severity is not None
    recovered = _SLACK_NO_RECOVERY if n.change in ("unwatched", "accepted") else "#2eb886"
    color = _SLACK_COLOURS[n.to_severity or n.severity] if still_firing else recovered
    fields = [
        {"title": "service", "value": n.service, "short": True},
        {"title": "route", "value": n.route, "short": True},
        {"title": "metric", "value": n.metric, "short": True},
        {"title": "samples", "value": str(n.samples), "short": True},
        {"title": "since", "value": _when(n), "short": True},
    ]
    if n.first_step:
        fields.append({"title": "first step", "value": n.first_step, "short": False})
    return {
        "text": f"{_SLACK_ICONS[n.headline]} [{n.headline}:{n.severity}] {n.summary}",
        "attachments": [{"color": color, "fields": fields}],
    }


class AlertmanagerSink(_HttpPoster):
    """Alertmanager's v2 API: POST /api/v2/alerts; a resolve is the same alert with endsAt set."""

    def __init__(self, config: AlertmanagerSinkConfig, transport: httpx2.BaseTransport | None = None) -> None:
        super().__init__("alertmanager", config, transport)
        self.resend_seconds = config.resend_seconds

    def send(self, notification: Notification) -> bool:
        url = self.config.url.rstrip("/") + "/api/v2/alerts"
        return self.post(url, [alertmanager_alert(notification)], notification)

    def _after_failure(self, note: Notification) -> str:
        if note.state == "resolved":  # no longer re-sent: Alertmanager times it out
            return "Alertmanager ends the alert itself once it is no longer re-sent (its resolve_timeout)"
        every = f"every {self.resend_seconds:g}s"
        return f"while it fires, the next re-send of the firing alerts ({every}) carries it"


def alertmanager_alert(n: Notification) -> dict[str, Any]:
    annotations = {"summary": n.summary}
    if n.first_step:  # what the person paged does first (a firing alert's)
        annotations["first_step"] = n.first_step
    if n.change is not None:  # a resolve that is no recovery says so beside Alertmanager's own "RESOLVED"
        annotations["change"] = n.change
        annotations["headline"] = n.headline
    alert: dict[str, Any] = {
        "labels": n.labels(),
        "annotations": annotations,
        "startsAt": n.starts_at.isoformat(),
    }
    if n.ends_at is not None:
        alert["endsAt"] = n.ends_at.isoformat()
    return alert


def _when(n: Notification) -> str:
    """Since when the alert fires, to the second, in UTC."""
    return n.starts_at.astimezone(UTC).isoformat(timespec="seconds")


def make_sink(config: SinkConfig, transport: httpx2.BaseTransport | None = None) -> Sink:
    if isinstance(config, WebhookSinkConfig):
        return WebhookSink(config, transport)
    if isinstance(config, SlackSinkConfig):
        return SlackSink(config, transport)
    if isinstance(config, AlertmanagerSinkConfig):
        return AlertmanagerSink(config, transport)
    return LogSink(config)


def _transient(exc: BaseException) -> bool:
    import httpx2  # loaded already: the poster's client raised it

    if isinstance(exc, httpx2.TransportError):  # refused, reset, timed out
        return True
    if isinstance(exc, httpx2.HTTPStatusError):
        status = exc.response.status_code
        return status >= 500 or status == 429
    return False


def _describe(exc: Exception) -> str:
    import httpx2

    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code}: {exc.response.text[:200]}"
    if isinstance(exc, httpx2.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"
