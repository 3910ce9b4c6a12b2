"""Real receivers for alerts, for tests and the demo: a local HTTP webhook receiver with failure modes, and
the real Alertmanager and Prometheus programs (Debian packages `prometheus-alertmanager`, `prometheus`) run
on free loopback ports, each ending with the process that started it however that process ends (`Guard`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import httpx2

from tracescore._lazy import moved_names
from tracescore.testing import Guard, end_process, wait_ready
from tracescore.testing import free_port as _free_port

__all__ = ["AlertmanagerProcess", "PrometheusProcess", "ReceivedRequest", "WebhookReceiver"]

Mode = Literal["ok", "fail", "hang", "redirect"]
_STOP_S = 30.0  # how long a stop waits for a program to exit on SIGTERM before it kills it

# Its home is tracescore.testing; importable from here with a DeprecationWarning.
__getattr__ = moved_names(__name__, {"free_port": "tracescore.testing"})


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 recording every POST. `mode` decides the answer: ok (200), fail (500),
    hang (never answers until closed), redirect (307 to /moved). `fail_first` answers 500 to that many
    requests before the mode applies. `on_request` sees each request as it arrives (the demo prints them)."""

    def __init__(
        self,
        mode: Mode = "ok",
        fail_first: int = 0,
        on_request: Callable[[ReceivedRequest], None] | None = None,
    ) -> None:
        self.mode: Mode = mode
        self.fail_first = fail_first
        self.requests: list[ReceivedRequest] = []
        self._changed = threading.Condition()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ReceivedRequest(self.path, dict(self.headers.items()), body)
                if on_request is not None:
                    on_request(request)
                with receiver._changed:
                    receiver.requests.append(request)
                    attempt = len(receiver.requests)
                    receiver._changed.notify_all()
                if attempt <= receiver.fail_first or receiver.mode == "fail":
                    self._answer(500, b"receiver failure")
                elif receiver.mode == "hang":
                    receiver._release.wait()
                elif receiver.mode == "redirect":
                    self.send_response(307)
                    self.send_header("Location", "/moved")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    self._answer(200, b"ok")

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def wait_for(
        self, predicate: Callable[[list[ReceivedRequest]], bool], timeout_s: float = 180.0
    ) -> list[ReceivedRequest]:
        """Block until `predicate(requests)` holds (event-driven: it returns as soon as it does); raise with
        what arrived otherwise. The bound is generous: several members joining a group on a loaded machine
        took over a minute."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self.requests), timeout_s):
                bodies = [r.body[:300] for r in self.requests]
                raise AssertionError(f"the receiver did not get what was expected in {timeout_s}s: {bodies}")
            return list(self.requests)

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Program:
    """A program on a free loopback port, its data in a temporary directory; ready when `ready_path`
    answers 200. A context manager: terminated (then killed) on exit; and if the process that started it
    dies first, its guard ends it and removes its directory."""

    ready_path = "/-/ready"

    def __init__(self, executable: str, package: str) -> None:
        found = shutil.which(executable)
        if not found:
            raise RuntimeError(
                f"{executable} is not installed: apt-get install {package} (or `make {package}`)"
            )
        self.executable = found
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"tracescore-{executable}-"))
        self.log_path = self.dir / "log.txt"
        self.process: subprocess.Popen[bytes] | None = None
        self._guard: Guard | None = None

    def args(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout_s: float = 120.0) -> _Program:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.args(), stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        self._guard = Guard.start(self.process, _STOP_S, [self.dir])

        def ready() -> bool:
            try:
                return httpx2.get(self.url + self.ready_path, timeout=2).status_code == 200
            except httpx2.TransportError:
                return False

        try:
            wait_ready(self.process, ready, what=self.executable, timeout_s=timeout_s, log=self.log)
        except RuntimeError:
            self.stop()
            raise
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        end_process(self.process, _STOP_S, self._guard)
        self.process, self._guard = None, None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class AlertmanagerProcess(_Program):
    """The real Alertmanager, every notification going to `webhook_url` (grouped by alertname and route,
    sent after `group_wait`), with clustering off so parallel runs never share a gossip port."""

    def __init__(self, webhook_url: str, group_wait: str = "1s", group_interval: str = "1s") -> None:
        super().__init__("prometheus-alertmanager", "prometheus-alertmanager")
        self.config_path = self.dir / "alertmanager.yml"
        self.config_path.write_text(
            json.dumps(
                {
                    "route": {
                        "receiver": "webhook",
                        "group_by": ["alertname", "service_name", "tracescore_route"],
                        "group_wait": group_wait,
                        "group_interval": group_interval,
                        "repeat_interval": "1h",
                    },
                    "receivers": [
                        {"name": "webhook", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}
                    ],
                }
            )
        )

    def args(self) -> list[str]:
        return [
            self.executable,
            f"--config.file={self.config_path}",
            f"--storage.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
        ]

    def __enter__(self) -> AlertmanagerProcess:
        self.start()
        return self

    def alerts(self, **params: str) -> list[dict[str, Any]]:
        response = httpx2.get(self.url + "/api/v2/alerts", params=params, timeout=10)
        response.raise_for_status()
        return list(response.json())


class PrometheusProcess(_Program):
    """The real Prometheus with the given config (YAML text; rule_files relative paths are absolute)."""

    def __init__(self, config_yaml: str) -> None:
        super().__init__("prometheus", "prometheus")
        self.config_path = self.dir / "prometheus.yml"
        self.config_path.write_text(config_yaml)

    def args(self) -> list[str]:
        return [
            self.executable,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]

    def __enter__(self) -> PrometheusProcess:
        self.start()
        return self

    def query(self, promql: str) -> dict[str, Any]:
        """The query API's answer; raises with Prometheus' error message when it rejects the query."""
        response = httpx2.get(self.url + "/api/v1/query", params={"query": promql}, timeout=30)
        body = response.json()
        if body.get("status") != "success":
            raise ValueError(f"Prometheus rejected {promql!r}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]
