"""A fake hosted chat API (OpenAI, Mistral): `POST /v1/chat/completions`, plain and streamed.

Plain replies are `{"id", "object": "chat.completion", "model", "choices": [{"index", "message":
{"role", "content"}, "finish_reason"}], "usage"}`; streamed ones are server-sent events of
`chat.completion.chunk` objects with `choices[0].delta.content`, ending with `data: [DONE]`, as
both APIs send them. Errors are `{"error": {"message", "type", "code"}}` with the real status codes.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable

from . import BackgroundServer, JsonHandler

CHAT_PATH = "/v1/chat/completions"


class FakeChatServer(BackgroundServer):
    def __init__(self, reply: str | Callable[[dict[str, Any]], str] = "", model_id: str = "mistral-small-2503",
                 api_key: str | None = None) -> None:
        super().__init__()
        self.handler_class = _Handler
        self.reply = reply
        self.model_id = model_id
        self.api_key = api_key
        self.fail_status: int | None = None  # answer every request with this HTTP error
        self.delay_s = 0.0  # before answering (a slow or hung model)
        self.bodies: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []

    def text_for(self, body: dict[str, Any]) -> str:
        return self.reply(body) if callable(self.reply) else self.reply


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(JsonHandler):
    server_state: FakeChatServer

    def do_POST(self) -> None:
        fake = self.server_state
        raw = self.read_body()
        with fake.lock:
            fake.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        if self.path != CHAT_PATH:
            self.send_json(404, _error(f"Unknown request URL: POST {self.path}.", "invalid_request_error", "unknown_url"))
            return
        if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self.send_json(401, _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self.send_json(400, _error("We could not parse the JSON body of your request.", "invalid_request_error"))
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body.get("model"):
            self.send_json(400, _error("'model' and 'messages' are required.", "invalid_request_error"))
            return
        with fake.lock:
            fake.bodies.append(body)
        if fake.delay_s:
            time.sleep(fake.delay_s)
        if fake.fail_status is not None:
            kind = "server_error" if fake.fail_status >= 500 else "rate_limit_error"
            self.send_json(fake.fail_status, _error("The server had an error while processing your request.", kind))
            return
        text = fake.text_for(body)
        limit = body.get("max_tokens")
        words = re.findall(r"\S+\s*", text)
        finish = "stop"
        if isinstance(limit, int) and len(words) > limit:  # one word a token, near enough for tests
            words, finish = words[:limit], "length"
        if body.get("stream"):
            self._stream(words, finish)
            return
        self.send_json(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": fake.model_id,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(words)}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": len(words), "total_tokens": 100 + len(words)},
        })

    def _stream(self, words: list[str], finish: str) -> None:
        fake = self.server_state
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(delta: dict[str, Any], finish_reason: str | None) -> None:
            chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": fake.model_id, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        event({"role": "assistant", "content": ""}, None)
        for w in words:
            event({"content": w}, None)
        event({}, finish)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
