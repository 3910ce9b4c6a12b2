"""A local OpenAI-compatible HTTP server for tests and benchmarks: scripted replies, faults, counters.

Standard library only. It speaks just enough of the API for the `openai` client to talk to it for real:
POST /v1/chat/completions, POST /v1/embeddings, GET /v1/models.

    with JudgeServer() as server:
        server.inject(Fault.RATE_LIMIT)  # the next chat request gets a 429...
        server.script({"sentences": []})  # ...and the retry gets this content
        judge = OpenAIJudge(OpenAIJudgeSettings(base_url=server.base_url))

Reply order per chat request: a queued fault, else a scripted reply, else `server.responder`, else the default
responder (`_judge_replies.py`), which answers the faithfulness tasks plausibly (one claim per answer
sentence; every claim FULLY_SUPPORTED) and an agent run's assessment as fitting and complete. Token counts are
estimated at ~4 characters per token (ceil(chars / 4)) over the message contents; good enough for relative
comparisons, not a real tokenizer.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tracescore.testing._judge_replies import (
    default_responder,
    estimate_tokens,
    fenced_data,
    hashed_embedding,
    messages_text,
    task_of,
)

__all__ = [
    "Fault",
    "JudgeServer",
    "RecordedRequest",
    "Reply",
    "ServerStats",
    "default_responder",
    "estimate_tokens",
    "fenced_data",
    "hashed_embedding",
    "messages_text",
    "task_of",
]

Reply = str | dict[str, Any]
Responder = Callable[[dict[str, Any]], Reply]


class Fault(StrEnum):
    """One misbehaviour, consumed by the next chat completion request."""

    RATE_LIMIT = "rate_limit"  # HTTP 429 with a retry-after header
    SERVER_ERROR = "server_error"  # HTTP 500
    TIMEOUT = "timeout"  # answers only after `timeout_sleep_s`, past any sane client timeout
    INVALID_JSON = "invalid_json"  # 200 whose content is not JSON
    TRUNCATED = "truncated"  # 200, finish_reason "length", the real reply cut in half
    REFUSAL = "refusal"  # 200, message.refusal set and content null
    REJECT_JSON_SCHEMA = "reject_json_schema"  # HTTP 400 naming response_format, like servers without it


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: dict[str, Any]


@dataclass
class ServerStats:
    """Counters since start (or `reset`); `JudgeServer.stats` hands out a copy."""

    requests: int = 0
    chat_requests: int = 0
    embedding_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    faults_served: int = 0
    max_in_flight: int = 0


@dataclass
class _State:
    faults: deque[Fault] = field(default_factory=deque)
    scripted: deque[Reply] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    stats: ServerStats = field(default_factory=ServerStats)
    in_flight: int = 0


class JudgeServer:
    """Binds 127.0.0.1 on a free port and serves from a background thread; use as a context manager."""

    def __init__(
        self,
        *,
        model: str = "judge-test",
        latency_s: float = 0.0,
        timeout_sleep_s: float = 2.0,
        retry_after_s: float = 0.0,
        json_schema_supported: bool = True,
        embedding_dim: int = 256,
        port: int = 0,
    ) -> None:
        self.model = model
        self.port = port  # 0: a free one
        self.latency_s = latency_s  # per successful chat reply; lets concurrency tests overlap requests
        self.timeout_sleep_s = timeout_sleep_s
        self.retry_after_s = retry_after_s
        self.json_schema_supported = json_schema_supported
        self.embedding_dim = embedding_dim
        self.responder: Responder | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._state = _State()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> JudgeServer:
        handler = type("_BoundHandler", (_Handler,), {"server_ref": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a TIMEOUT fault may still be sleeping; never wait for it
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="judge-server", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("JudgeServer is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- scripting --------------------------------------------------------------------------------------
    def inject(self, *faults: Fault, times: int = 1) -> None:
        """Queue faults, each repeated `times`; one is consumed per chat completion request."""
        with self._lock:
            for fault in faults:
                self._state.faults.extend([fault] * times)

    def script(self, *replies: Reply) -> None:
        """Queue reply contents (a dict is sent as JSON); consumed after any queued faults."""
        with self._lock:
            self._state.scripted.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._state = _State()

    @property
    def stats(self) -> ServerStats:
        with self._lock:
            return dataclasses.replace(self._state.stats)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._state.requests)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    # -- request handling (called from handler threads) -------------------------------------------------
    def _enter(self, method: str, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            state, stats = self._state, self._state.stats
            state.requests.append(RecordedRequest(method, path, body))
            state.in_flight += 1
            stats.requests += 1
            stats.chat_requests += path.endswith("/chat/completions")
            stats.embedding_requests += path.endswith("/embeddings")
            stats.max_in_flight = max(stats.max_in_flight, state.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._state.in_flight -= 1

    def _count_tokens(self, prompt_tokens: int, completion_tokens: int) -> None:
        # Counted before the reply is sent, so a client reading stats after its reply sees its own tokens.
        with self._lock:
            self._state.stats.prompt_tokens += prompt_tokens
            self._state.stats.completion_tokens += completion_tokens

    def _next_fault(self, body: dict[str, Any]) -> Fault | None:
        with self._lock:
            fault = self._state.faults.popleft() if self._state.faults else None
            if fault is None and not self.json_schema_supported and _wants_json_schema(body):
                fault = Fault.REJECT_JSON_SCHEMA
            self._state.stats.faults_served += fault is not None
            return fault

    def _reply_for(self, body: dict[str, Any], *, scripted: bool = True) -> str:
        with self._lock:
            entry = self._state.scripted.popleft() if scripted and self._state.scripted else None
        reply = entry if entry is not None else (self.responder or default_responder)(body)
        return reply if isinstance(reply, str) else json.dumps(reply)

    def _sleep(self, seconds: float) -> None:
        # Wakes early when the server closes so no handler thread outlives a test for long.
        if seconds > 0:
            self._closing.wait(seconds)


def _wants_json_schema(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format")
    return isinstance(fmt, dict) and fmt.get("type") == "json_schema"


# -- HTTP --------------------------------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    server_ref: JudgeServer
    protocol_version = "HTTP/1.1"  # keep-alive, as the openai client expects
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        return

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/v1/models"):
            model = {"id": self.server_ref.model, "object": "model", "created": 0, "owned_by": "tracescore"}
            self._send(200, {"object": "list", "data": [model]})
        else:
            self._send(404, _error(f"no route GET {self.path}", "not_found"))

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._send(400, _error("request body is not JSON", "invalid_request_error"))
            return
        path = self.path.rstrip("/")
        if path.endswith("/v1/chat/completions"):
            self._guarded(path, body, self._chat)
        elif path.endswith("/v1/embeddings"):
            self._guarded(path, body, self._embeddings)
        else:
            self._send(404, _error(f"no route POST {self.path}", "not_found"))

    def _guarded(self, path: str, body: dict[str, Any], handle: Callable[[dict[str, Any]], None]) -> None:
        self.server_ref._enter("POST", path, body)
        try:
            handle(body)
        finally:
            self.server_ref._leave()

    def _chat(self, body: dict[str, Any]) -> None:
        server = self.server_ref
        fault = server._next_fault(body)
        if fault in _ERROR_REPLIES:
            status, message, kind, param = _ERROR_REPLIES[fault]
            headers = {"retry-after": f"{server.retry_after_s:g}"} if status == 429 else None
            self._send(status, _error(message, kind, param=param), headers)
            return
        server._sleep(server.timeout_sleep_s if fault is Fault.TIMEOUT else server.latency_s)
        content: str | None
        refusal: str | None = None
        finish = "stop"
        # Faults that replace the reply leave the script alone, so the retry or repair gets the next entry.
        if fault is Fault.INVALID_JSON:
            content = "Sure! Here is the JSON you asked for: {verdicts: [oops"
        elif fault is Fault.REFUSAL:
            content, refusal = None, "I'm sorry, I can't help with that."
        elif fault is Fault.TIMEOUT:
            content = server._reply_for(body, scripted=False)  # the client has given up by now
        else:
            content = server._reply_for(body)
            if fault is Fault.TRUNCATED:
                content, finish = content[: max(1, len(content) // 2)], "length"
        prompt_tokens = estimate_tokens(messages_text(body))
        completion_tokens = estimate_tokens(content or refusal or "")
        message = {"role": "assistant", "content": content, "refusal": refusal}
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        reply = {
            "id": f"chatcmpl-{server.stats.chat_requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", server.model),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {**usage, "total_tokens": prompt_tokens + completion_tokens},
        }
        server._count_tokens(prompt_tokens, completion_tokens)
        self._send(200, reply)

    def _embeddings(self, body: dict[str, Any]) -> None:
        server = self.server_ref
        inputs = body.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        if not all(isinstance(t, str) for t in texts):
            self._send(
                400, _error("only string inputs are supported", "invalid_request_error", param="input")
            )
            return
        dim = int(body.get("dimensions") or server.embedding_dim)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector: list[float] | str = hashed_embedding(text, dim)
            if as_base64:
                vector = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": vector})
        tokens = sum(estimate_tokens(t) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        server._count_tokens(tokens, 0)
        self._send(
            200, {"object": "list", "data": data, "model": body.get("model", server.model), "usage": usage}
        )

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (its timeout fired first): expected under Fault.TIMEOUT.
            self.close_connection = True


_ERROR_REPLIES: dict[Fault | None, tuple[int, str, str, str | None]] = {
    Fault.RATE_LIMIT: (429, "Rate limit reached, slow down", "rate_limit_exceeded", None),
    Fault.SERVER_ERROR: (500, "The server had an error while processing your request", "server_error", None),
    Fault.REJECT_JSON_SCHEMA: (
        400,
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported",
        "invalid_request_error",
        "response_format",
    ),
}


def _error(message: str, kind: str, *, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": kind}}


def _fault_option(text: str) -> tuple[Fault, int]:
    """`rate_limit:40` -> (Fault.RATE_LIMIT, 40); `timeout` -> (Fault.TIMEOUT, 1)."""
    import argparse

    kind, _, count = text.partition(":")
    try:
        fault, times = Fault(kind.strip().lower()), int(count or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected KIND[:N], KIND one of {', '.join(Fault)} and N a count"
        ) from None
    if times < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: N must be at least 1")
    return fault, times


def main(argv: list[str] | None = None) -> None:
    """`python -m tracescore.testing.judge_server`: the scripted judge until Ctrl-C (or SIGTERM), to try
    `--judge openai` without a provider's key; its base URL printed first, on a line of its own."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(
        prog="python -m tracescore.testing.judge_server",
        description="A local OpenAI-compatible server with scripted replies (every claim supported): "
        "try --judge openai without a provider's key. Not a model.",
    )
    parser.add_argument("--port", type=int, default=0, help="Port on 127.0.0.1 [default: a free one].")
    # To rehearse a provider's failures from the command line (what is retried, counted, paged), not
    # only from Python: each fault is served to one chat request, in the order given, before any answer.
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        type=_fault_option,
        metavar="KIND[:N]",
        help=f"Serve the next N chat requests (1) this fault, in order: {', '.join(Fault)}. A timeout "
        "answers after --timeout-sleep seconds: set TRACESCORE_JUDGE_TIMEOUT_S below it. Repeatable.",
    )
    parser.add_argument(
        "--timeout-sleep", type=float, default=2.0, help="Seconds a timeout fault waits [default: 2]."
    )
    parser.add_argument(
        "--retry-after", type=float, default=0.0, help="A rate_limit fault's retry-after header [default: 0]."
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with JudgeServer(
        port=args.port, timeout_sleep_s=args.timeout_sleep, retry_after_s=args.retry_after
    ) as server:
        for fault, times in args.fault:
            server.inject(fault, times=times)
        print(server.base_url, flush=True)
        print(f"try: tracescore consume --judge openai --base-url {server.base_url}", flush=True)
        print("Ctrl-C stops this server", flush=True)
        stop.wait()


if __name__ == "__main__":
    main()
