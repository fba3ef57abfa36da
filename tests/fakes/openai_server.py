"""A fake OpenAI-compatible `POST /v1/chat/completions` that returns first-token logprobs.

Shaped like the OpenAI API (and Ollama, vLLM, llama.cpp server in OpenAI mode):
`choices[0].logprobs.content[0] = {"token", "logprob", "bytes", "top_logprobs": [{"token",
"logprob", "bytes"}]}`, errors as `{"error": {"message", "type", "param", "code"}}`.

The top logprobs to return are set per gate question; the question is recognised by its wording
in the last user message.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from sourcegate.models import QUESTION_TEXT

from . import BackgroundServer, JsonHandler

CHAT_PATH = "/v1/chat/completions"

TopLogprobs = list[tuple[str, float]]


def even_odds() -> TopLogprobs:
    return [("Yes", math.log(0.5)), ("No", math.log(0.5))]


class FakeOpenAIServer(BackgroundServer):
    def __init__(self, model_id: str = "qwen2.5:7b-instruct", api_key: str | None = None) -> None:
        super().__init__()
        self.handler_class = _Handler
        self.model_id = model_id
        self.api_key = api_key
        # Gate question name -> top logprobs of the first token, most likely first.
        self.top_logprobs: dict[str, TopLogprobs] = {}
        self.default_top_logprobs: TopLogprobs = even_odds()
        # Play a server that ignores `logprobs: true` (it answers, with `logprobs: null`).
        self.omit_logprobs = False
        self.request_count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []

    def question_of(self, body: dict[str, Any]) -> str | None:
        users = [m.get("content") for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"]
        text = users[-1] if users and isinstance(users[-1], str) else ""
        for name, wording in QUESTION_TEXT.items():
            if wording in text:
                return name
        return None

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        question = self.question_of(body)
        top = self.top_logprobs.get(question or "", self.default_top_logprobs)[: body.get("top_logprobs") or 0]
        token, logprob = top[0] if top else ("Yes", 0.0)
        logprobs = None
        if body.get("logprobs") and not self.omit_logprobs:
            logprobs = {
                "content": [
                    {
                        "token": token,
                        "logprob": logprob,
                        "bytes": list(token.encode()),
                        "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top],
                    }
                ],
                "refusal": None,
            }
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4
        return {
            "id": f"chatcmpl-{self.request_count}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_id,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": token, "refusal": None},
                    "logprobs": logprobs,
                    "finish_reason": "length",
                }
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1},
        }


def _error(message: str, kind: str = "invalid_request_error", param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _validate(body: Any) -> dict[str, Any] | None:
    """A 400 body for requests the OpenAI API rejects, else None."""
    if not isinstance(body, dict):
        return _error("The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return _error("you must provide a model parameter", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return _error("'messages' must be a non-empty array.", param="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in {"system", "user", "assistant", "developer", "tool"}:
            return _error(f"Invalid value for 'messages[{i}].role'.", param=f"messages[{i}].role")
        if not isinstance(message.get("content"), str):
            return _error(f"Invalid type for 'messages[{i}].content'.", param=f"messages[{i}].content")
    top = body.get("top_logprobs")
    if top is not None:
        if not isinstance(top, int) or not 0 <= top <= 20:
            return _error("Invalid 'top_logprobs': must be an integer between 0 and 20.", param="top_logprobs")
        if body.get("logprobs") is not True:
            return _error("'logprobs' must be true when 'top_logprobs' is set.", param="logprobs")
    return None


class _Handler(JsonHandler):
    server_state: FakeOpenAIServer

    def do_POST(self) -> None:
        fake = self.server_state
        raw = self.read_body()
        if self.path != CHAT_PATH:
            self.send_json(404, _error(f"Unknown request URL: POST {self.path}.", code="unknown_url"))
            return
        with fake.lock:
            fake.request_count += 1
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            status, body = self._respond(raw)
        finally:
            with fake.lock:
                fake.in_flight -= 1
        self.send_json(status, body)

    def _respond(self, raw: bytes) -> tuple[int, Any]:
        fake = self.server_state
        if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            return 401, _error("Incorrect API key provided.", code="invalid_api_key")
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, _error("We could not parse the JSON body of your request.")
        invalid = _validate(body)
        if invalid is not None:
            return 400, invalid
        with fake.lock:
            fake.bodies.append(body)
        return 200, fake.completion(body)
