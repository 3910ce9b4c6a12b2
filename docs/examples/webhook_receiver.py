"""docs/alerting/index.md: a webhook receiver that checks the signature of what `tracescore alert`'s webhook
sink posts, fed by that sink itself (one firing notification, then a body altered on the way)."""

import hmac
import json
import os
import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

from tracescore.alert import AlertConfig, AlertEvaluator, WebhookSink, WebhookSinkConfig, sign
from tracescore.model import EvaluationRecord, MetricStatus

os.environ["TRACESCORE_WEBHOOK_SECRET"] = "change-me"  # in production: from your secret store

# --8<-- [start:receiver]
SECRET = os.environ["TRACESCORE_WEBHOOK_SECRET"].encode()
NUMBERS = ("value", "bound", "threshold", "normal", "drop", "drop_lower")


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        # The HMAC-SHA256 of the exact bytes received, compared in constant time, before parsing anything.
        expected = "sha256=" + hmac.new(SECRET, body, "sha256").hexdigest()
        if not hmac.compare_digest(expected, self.headers.get("X-Tracescore-Signature", "")):
            print("refused: the signature does not match the body")
            self.send_response(401)
            self.end_headers()
            return
        alert = json.loads(body)
        print(f"[{alert['headline']}] {alert['summary']}")
        print(f"  labels {alert['labels']}")
        # Each kind of alert sets its own fields (a threshold alert its bound, a drop alert its normal and
        # drop, a no-data alert none of them): the others are null.
        numbers = [f"{name} {alert[name]:.2f}" for name in NUMBERS if alert.get(name) is not None]
        print(f"  signal {alert['signal']}: {', '.join(numbers)}" if numbers else "  no estimate")
        if alert["first_step"]:  # a firing alert's: what the person paged runs first
            print(f"  first step: {alert['first_step']}")
        self.send_response(204)
        self.end_headers()

    # --8<-- [end:receiver]

    def log_message(self, format: str, *args: object) -> None:
        pass  # no access log in the page's output


server = HTTPServer(("127.0.0.1", 0), Receiver)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_port}/tracescore"

# The notifications the service would send, from the evaluator `tracescore alert` runs: /search at 10%
# faithful answers against a 0.7 threshold; /billing, watched against its own normal only, at 50% after 90%;
# then both gone quiet for half an hour (no data).
evaluator = AlertEvaluator(
    AlertConfig.model_validate(
        {
            "rules": [
                # no_data_seconds written out: the fixed rule, so 30 quiet minutes page (a route's first
                # minutes tell no rate for the default, unusual silence)
                {"routes": ["/billing"], "warning": None, "critical": None, "no_data_seconds": 1800,
                 "drop": {"min_drop": 0.1, "window_count": 50, "min_samples": 20, "normal_count": 200,
                          "min_normal_samples": 100}},
                {"warning": 0.7, "critical": None, "no_data_seconds": 1800},
            ]
        }
    )
)  # fmt: skip
now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
notes = []


def answer(n: int, route: str, faithful: bool, at: datetime) -> None:
    label = "faithful" if faithful else "hallucinated"
    record = EvaluationRecord(
        trace_id=f"{n:032x}", span_id=f"{n:016x}", service_name="rag-api", route=route,
        metric="faithfulness", score=1.0 if faithful else 0.0, label=label,
        status=MetricStatus.OK, judge="offline", timestamp=at,
    )  # fmt: skip
    key = evaluator.add(record)
    if key is not None:
        notes.extend(evaluator.evaluate(key, at))


for n in range(40):
    answer(n, "/search", n % 10 == 0, now - timedelta(seconds=600 - 15 * n))
for n in range(300):  # 250 answers at 90%, then 50 at 50%: one every 2 seconds
    answer(1000 + n, "/billing", n % 10 != 0 if n < 250 else n % 2 == 0, now - timedelta(seconds=600 - 2 * n))
notes += evaluator.tick(now + timedelta(minutes=31))
sink = WebhookSink(WebhookSinkConfig(url=url, secret_env="TRACESCORE_WEBHOOK_SECRET"))
for kind in ("TracescoreFaithfulnessDropped", "TracescoreFaithfulnessBelowNormal", "TracescoreNoData"):
    sent = next(n for n in notes if n.alertname == kind and n.state == "firing")
    print("delivered:", sink.send(sent))
sink.close()
note = notes[0]

# A body changed on the way (or a sender without the secret) is refused.
body = json.dumps({**note.to_json(), "severity": "info"}).encode()
signature = sign(b"change-me", json.dumps(note.to_json()).encode())
request = urllib.request.Request(url, data=body, headers={"X-Tracescore-Signature": signature})
try:
    urllib.request.urlopen(request, timeout=10)
except urllib.error.HTTPError as refused:
    print("altered body:", refused.code)
server.shutdown()
