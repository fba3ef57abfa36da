"""A fake TypeSafe API: `POST /v1/systemone` as `typesafe-sdk` speaks it.

Wire contract (from the SDK and its OpenAPI models):
- request: `Authorization: Bearer <key>`, JSON body `{"model", "state", "questions"}`, where each
  question is `{"type": "noul", "instructions": ..., "criteria"?: {...}}`; bodies of 1 KiB or more
  may be sent with `Content-Encoding: zstd`.
- 200: `{"model": <versioned id>, "answers": {name: {"type": "noul", "noul": p}},
  "usage": {"input_tokens", "output_tokens"}}` and an `x-typesafe-request-id` header.
- errors: FastAPI-shaped `{"detail": "..."}`, or `{"detail": [{"loc", "msg", "type"}]}` for 422;
  429 and 5xx (529 = overloaded) are retried by the SDK, honouring `retry-after`.

Scores are looked up by `(state.query, state.passage.id)`; anything else gets `default_noul`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import BackgroundServer, JsonHandler

SYSTEM_ONE_PATH = "/v1/systemone"
MODELS_PATH = "/v1/models"
QUESTION_TYPES = {"noul", "choice", "score", "box"}
NOUL_KEYS = {"type", "instructions", "criteria"}


@dataclass
class InjectedFailure:
    status: int
    retry_after: str | None


class FakeTypeSafeServer(BackgroundServer):
    def __init__(
        self,
        api_key: str = "test-key",
        model_id: str = "jev-1.13.0",
        scores: dict[tuple[str, str], dict[str, float]] | None = None,
        default_noul: float = 0.5,
        delay_s: float = 0.0,
    ) -> None:
        super().__init__()
        self.handler_class = _Handler
        self.api_key = api_key
        self.model_id = model_id
        self.scores: dict[tuple[str, str], dict[str, float]] = dict(scores or {})
        # Answers sent verbatim for one (query, passage id), to play a misbehaving service.
        self.raw_answers: dict[tuple[str, str], Any] = {}
        self.default_noul = default_noul
        # Held while counted as in flight, so concurrent requests overlap and the cap is observable.
        self.delay_s = delay_s
        self._failures: deque[InjectedFailure] = deque()
        self.request_count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []
        self.retry_headers: list[str | None] = []

    @classmethod
    def from_fixture(cls, path: Path, **kwargs: Any) -> FakeTypeSafeServer:
        """Load recorded scores: a JSON list of `{"query", "passage_id", "scores": {question: p}}`."""
        rows = json.loads(path.read_text(encoding="utf-8"))
        table = {(row["query"], row["passage_id"]): row["scores"] for row in rows}
        return cls(scores=table, **kwargs)

    def fail_next(self, count: int, status: int = 429, retry_after: str | None = None) -> None:
        """Answer the next `count` requests with `status` (and a `retry-after` header if given)."""
        with self.lock:
            self._failures.extend(InjectedFailure(status, retry_after) for _ in range(count))

    def take_failure(self) -> InjectedFailure | None:
        with self.lock:
            return self._failures.popleft() if self._failures else None

    def answers_for(self, body: dict[str, Any]) -> Any:
        state = body["state"]
        key: tuple[str, str] | None = None
        if isinstance(state, dict) and isinstance(state.get("passage"), dict):
            key = (str(state.get("query")), str(state["passage"].get("id")))
        if key is not None and key in self.raw_answers:
            return self.raw_answers[key]
        recorded = self.scores.get(key, {}) if key is not None else {}
        return {
            name: {"type": "noul", "noul": recorded.get(name, self.default_noul)}
            for name in body["questions"]
        }


def _validation_error(loc: list[str | int], msg: str, kind: str) -> dict[str, Any]:
    return {"detail": [{"loc": ["body", *loc], "msg": msg, "type": kind}]}


def _validate(body: Any) -> dict[str, Any] | None:
    """Return a 422 body for a request the real API would reject, else None."""
    if not isinstance(body, dict):
        return _validation_error([], "Input should be a valid dictionary", "dict_type")
    for name in ("model", "state", "questions"):
        if name not in body:
            return _validation_error([name], "Field required", "missing")
    if not isinstance(body["model"], str) or not body["model"]:
        return _validation_error(["model"], "Input should be a non-empty string", "string_type")
    if not isinstance(body["state"], (str, dict, list)):
        return _validation_error(["state"], "Input should be a string, object or array", "union_type")
    questions = body["questions"]
    if not isinstance(questions, dict) or not questions:
        return _validation_error(["questions"], "Dictionary should have at least 1 item", "too_short")
    for name, question in questions.items():
        loc: list[str | int] = ["questions", name]
        if not isinstance(question, dict) or question.get("type") not in QUESTION_TYPES:
            return _validation_error(loc, "Input tag does not match any of the question types", "union_tag_invalid")
        if question["type"] != "noul":
            return _validation_error(loc, "This fake answers noul questions only", "value_error")
        extra = set(question) - NOUL_KEYS
        if extra:
            return _validation_error([*loc, "noul", sorted(extra)[0]], "Extra inputs are not permitted", "extra_forbidden")
        instructions, criteria = question.get("instructions"), question.get("criteria")
        if instructions is not None and not isinstance(instructions, (str, dict, list)):
            return _validation_error([*loc, "noul", "instructions"], "Input should be a string, object or array", "union_type")
        if criteria is not None and not isinstance(criteria, dict):
            return _validation_error([*loc, "noul", "criteria"], "Input should be a valid dictionary", "dict_type")
        if instructions is None and not (criteria and any(v is not None for v in criteria.values())):
            return _validation_error([*loc, "noul"], "Value error, instructions or criteria is required", "value_error")
    return None


def _decode(raw: bytes, encoding: str | None) -> bytes:
    if not encoding or encoding == "identity":
        return raw
    if encoding == "zstd":
        # Only reachable when the SDK has zstd itself, so the backport is importable too.
        try:
            from compression.zstd import decompress  # type: ignore[import-not-found]
        except ImportError:
            from backports.zstd import decompress  # type: ignore[import-not-found]
        return decompress(raw)
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")


class _Handler(JsonHandler):
    server_state: FakeTypeSafeServer

    def do_GET(self) -> None:
        fake = self.server_state
        if self.path != MODELS_PATH:
            self.send_json(404, {"detail": "Not Found"})
        elif not self._authorized():
            self.send_json(401, {"detail": "Invalid API key."})
        else:
            self.send_json(
                200,
                {"models": [{"name": fake.model_id, "description": "fake", "release_date": "2025-01-01"}]},
            )

    def do_POST(self) -> None:
        fake = self.server_state
        raw = self.read_body()  # always drained, so the kept-alive connection stays in sync
        if self.path != SYSTEM_ONE_PATH:
            self.send_json(404, {"detail": "Not Found"})
            return
        with fake.lock:
            fake.request_count += 1
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
            fake.retry_headers.append(self.headers.get("X-TypeSafe-Retry-Count"))
        try:
            if fake.delay_s:
                time.sleep(fake.delay_s)
            status, body, headers = self._respond(raw)
        finally:
            with fake.lock:
                fake.in_flight -= 1
        self.send_json(status, body, headers)

    def _authorized(self) -> bool:
        return self.headers.get("Authorization") == f"Bearer {self.server_state.api_key}"

    def _respond(self, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        fake = self.server_state
        request_id = {"x-typesafe-request-id": f"req_{threading.get_ident()}_{time.monotonic_ns()}"}
        if not self._authorized():
            return 401, {"detail": "Invalid API key."}, request_id
        failure = fake.take_failure()
        if failure is not None:
            headers = dict(request_id)
            if failure.retry_after is not None:
                headers["retry-after"] = failure.retry_after
            if failure.status == 422:
                return 422, _validation_error(["state"], "Input should be a valid dictionary", "dict_type"), headers
            message = {429: "Rate limit exceeded.", 529: "Service overloaded."}.get(failure.status, "Injected failure.")
            return failure.status, {"detail": message}, headers
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            return 415, {"detail": "Content-Type must be application/json."}, request_id
        try:
            body = json.loads(_decode(raw, self.headers.get("Content-Encoding")))
        except ValueError:
            return 422, _validation_error([], "JSON decode error", "json_invalid"), request_id
        invalid = _validate(body)
        if invalid is not None:
            return 422, invalid, request_id
        with fake.lock:
            fake.bodies.append(body)
        answers = fake.answers_for(body)
        usage = {"input_tokens": len(json.dumps(body["state"])) // 4, "output_tokens": len(body["questions"])}
        return 200, {"model": fake.model_id, "answers": answers, "usage": usage}, request_id
