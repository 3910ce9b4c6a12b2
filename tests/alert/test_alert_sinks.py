"""Sinks against real local HTTP receivers: signed JSON, Slack's format, and receivers that fail, hang,
redirect or are down (bounded retries, a counted failure, never an exception into the service)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator

import pytest
from alert_records import T0

from tracescore.alert import (
    SIGNATURE_HEADER,
    AlertmanagerSink,
    AlertmanagerSinkConfig,
    LogSink,
    Notification,
    SlackSink,
    SlackSinkConfig,
    WebhookSink,
    WebhookSinkConfig,
    sign,
)
from tracescore.alert.testing import WebhookReceiver

SECRET = "s3cret-hmac-key"


def note(state: str = "firing") -> Notification:
    return Notification(
        alertname="TracescoreFaithfulnessDropped",
        state=state,  # type: ignore[arg-type]
        severity="warning",
        service="rag-api",
        route="/billing",
        metric="faithfulness",
        summary="faithfulness of rag-api /billing dropped to 0.31 over 12 answers",
        value=0.31,
        bound=0.42,
        threshold=0.7,
        samples=12,
        starts_at=T0,
        ends_at=T0 if state == "resolved" else None,
    )


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


def webhook(url: str, **settings: object) -> WebhookSink:
    config = {"url": url, "secret": SECRET, "max_attempts": 3, "retry_base_seconds": 0.01, **settings}
    return WebhookSink(WebhookSinkConfig(**config))


def test_webhook_posts_the_notification_signed_with_hmac_sha256(receiver: WebhookReceiver) -> None:
    sink = webhook(receiver.url + "/hook")
    assert sink.send(note())
    (request,) = receiver.requests
    body = request.json()
    assert body["state"] == "firing" and body["route"] == "/billing" and body["value"] == 0.31
    assert body["labels"]["alertname"] == "TracescoreFaithfulnessDropped"
    assert hmac.compare_digest(request.headers[SIGNATURE_HEADER], sign(SECRET.encode(), request.body))
    assert request.headers[SIGNATURE_HEADER] != sign(b"another key", request.body)
    assert sink.sent == 1 and sink.failed == 0


def test_webhook_secret_from_the_environment(
    receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "from-env")
    WebhookSink(WebhookSinkConfig(url=receiver.url, secret_env="HOOK_SECRET")).send(note())
    request = receiver.requests[0]
    assert request.headers[SIGNATURE_HEADER] == sign(b"from-env", request.body)
    monkeypatch.delenv("HOOK_SECRET")
    with pytest.raises(ValueError, match="HOOK_SECRET is not set"):
        WebhookSink(WebhookSinkConfig(url=receiver.url, secret_env="HOOK_SECRET"))


def test_a_receiver_failing_twice_gets_the_third_attempt(receiver: WebhookReceiver) -> None:
    receiver.fail_first = 2
    sink = webhook(receiver.url)
    assert sink.send(note())
    assert len(receiver.requests) == 3
    assert {r.body for r in receiver.requests} == {receiver.requests[0].body}  # same bytes, same signature


def test_a_receiver_always_failing_is_retried_a_bounded_number_of_times(
    receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.mode = "fail"
    sink = webhook(receiver.url, max_attempts=4)
    with caplog.at_level(logging.WARNING, "tracescore.alert"):
        assert not sink.send(note())
    assert len(receiver.requests) == 4
    assert sink.failed == 1
    assert "HTTP 500" in caplog.text
    assert SECRET not in caplog.text


def test_a_hanging_receiver_times_out(receiver: WebhookReceiver) -> None:
    receiver.mode = "hang"
    sink = webhook(receiver.url, timeout_seconds=0.5, max_attempts=2)
    assert not sink.send(note())
    assert len(receiver.wait_for(lambda got: len(got) == 2)) == 2
    assert sink.failed == 1


def test_a_redirect_is_not_followed_and_says_so(
    receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.mode = "redirect"
    sink = webhook(receiver.url + "/old")
    with caplog.at_level(logging.WARNING, "tracescore.alert"):
        assert not sink.send(note())
    assert [r.path for r in receiver.requests] == ["/old"]  # once: a redirect is not transient
    assert "redirected to /moved" in caplog.text


def test_a_receiver_that_is_down_is_a_counted_failure(
    caplog: pytest.LogCaptureFixture, closed_port: int
) -> None:
    sink = webhook(f"http://127.0.0.1:{closed_port}/hook", max_attempts=2)
    with caplog.at_level(logging.WARNING, "tracescore.alert"):
        assert not sink.send(note())
    assert sink.failed == 1
    assert "ConnectError" in caplog.text


def test_a_notification_given_up_on_says_after_how_many_attempts_and_what_becomes_of_it(
    receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture, closed_port: int
) -> None:
    down = f"http://127.0.0.1:{closed_port}"
    with caplog.at_level(logging.WARNING, "tracescore.alert"):
        assert not webhook(down + "/hook", max_attempts=3).send(note())
        assert not webhook(down + "/hook", max_attempts=2).send(note("resolved"))
        receiver.mode = "redirect"
        assert not webhook(receiver.url + "/old").send(note())
        manager = AlertmanagerSink(AlertmanagerSinkConfig(url=down, max_attempts=2, retry_base_seconds=0.01))
        assert not manager.send(note())
        assert not manager.send(note("resolved"))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 5, lines
    firing, resolved, moved, manager_firing, manager_resolved = lines
    assert firing.startswith(
        f"webhook sink at {down}: firing TracescoreFaithfulnessDropped of rag-api /billing not delivered "
        "after 3 attempts in "
    ), firing
    assert "ConnectError" in firing and "given up, not sent to this sink again" in firing
    assert firing.endswith("the rule's next reminder (renotify_seconds), that one is sent"), firing
    assert "after 2 attempts" in resolved and resolved.endswith("not told the alert resolved"), resolved
    assert "after 1 attempt in" in moved and "; not retried: not a transient failure" in moved, moved
    assert manager_firing.startswith(f"alertmanager sink at {down}: firing"), manager_firing
    assert manager_firing.endswith("the next re-send of the firing alerts (every 60s) carries it"), (
        manager_firing
    )
    assert manager_resolved.endswith(
        "ends the alert itself once it is no longer re-sent (its resolve_timeout)"
    )


def test_slack_gets_its_incoming_webhook_format_and_the_secret_path_stays_out_of_logs(
    receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    sink = SlackSink(SlackSinkConfig(url=receiver.url + "/services/T000/B000/XXXXSECRET"))
    assert sink.send(note("resolved"))
    message = receiver.requests[0].json()
    assert message["text"].startswith(
        ":white_check_mark: [RESOLVED:warning] faithfulness of rag-api /billing"
    )
    fields = {f["title"]: f["value"] for f in message["attachments"][0]["fields"]}
    assert fields["route"] == "/billing" and fields["samples"] == "12"
    receiver.mode = "fail"
    with caplog.at_level(logging.WARNING, "tracescore.alert"):
        sink.send(note())
    assert "XXXXSECRET" not in caplog.text and "slack sink" in caplog.text


def test_log_sink_logs_one_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "tracescore.alert"):
        LogSink().send(note())
    assert "[FIRING] faithfulness of rag-api /billing dropped to 0.31" in caplog.text
