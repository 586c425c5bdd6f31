"""A real HTTP server on 127.0.0.1 that speaks just enough of the OpenAI chat-completions protocol
(POST /v1/chat/completions) and the Anthropic messages protocol (POST /v1/messages) to drive the real SDKs.

It serves a scripted sequence of replies, one per request, and records every request it received. It ships with the
package so that the tests and the maintainers' GPU checks (scripts/gpu_bench_check.py) run the real client code
without the internet or a key.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    body: object = None  # dict/list → JSON; str → sent as is (for malformed JSON); None → empty
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait this long before answering (to outlast a client timeout)
    echo_key: bool = False  # put the request's credentials in the body, as some real 401s partly do


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict


def openai_ok(text: str, prompt_tokens: int = 11, completion_tokens: int = 7, *, usage: bool = True) -> Reply:
    body: dict = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "served-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
    }
    if usage:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return Reply(body=body)


def anthropic_ok(text: str, input_tokens: int = 13, output_tokens: int = 5) -> Reply:
    return Reply(
        body={
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "served-model",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    )


def error(status: int, message: str = "error", *, headers: dict[str, str] | None = None, echo_key: bool = False):
    return Reply(status=status, body={"error": {"message": message, "type": "test_error"}}, headers=headers or {},
                 echo_key=echo_key)


class ScriptedServer:
    """Serves `script` in order. A request past the end gets HTTP 418 (which no client retries) and is counted in
    `overruns`, so a test that sends more requests than it scripted fails loudly instead of hanging."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        # called for a request when the script is empty: decides the reply from the request body (for runs whose
        # requests interleave, like a benchmark's concurrent tasks)
        self.responder: Callable[[dict], Reply] | None = None
        self.requests: list[Request] = []
        self.overruns = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                with outer._lock:
                    outer.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    reply = outer.script.popleft() if outer.script else None
                    responder = outer.responder
                if reply is None and responder is not None:
                    reply = responder(body)
                with outer._lock:
                    if reply is None:
                        outer.overruns += 1
                if reply is None:
                    reply = error(418, "script exhausted: the test sent more requests than it scripted")
                if reply.delay_s and outer._stop.wait(reply.delay_s):
                    return  # server stopping: drop the request
                payload = reply.body
                if reply.echo_key:
                    creds = self.headers.get("Authorization") or self.headers.get("x-api-key") or ""
                    payload = {"error": {"message": f"Incorrect API key provided: {creds}", "type": "auth"}}
                if isinstance(payload, str):
                    data = payload.encode()
                elif payload is None:
                    data = b""
                else:
                    data = json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout); nothing to do

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def root(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    @property
    def openai_url(self) -> str:
        return self.root + "/v1"

    def add(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
