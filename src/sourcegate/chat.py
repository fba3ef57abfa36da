"""Chat engines: one contract over any OpenAI-compatible chat endpoint and an embedded GGUF model.

`open_chat_engine(spec, ...)` picks the engine by its spec string:

- `http://...` or `https://...`: an OpenAI-compatible base URL ending in `/v1` (Ollama
  `http://localhost:11434/v1`, a llama.cpp server, vLLM, Mistral's `https://api.mistral.ai/v1`,
  OpenAI), called with `POST {base}/chat/completions`;
- `gguf:/path/model.gguf`: the model run in this process by llama.cpp (the `xllamacpp` wheel),
  through the same request and response bodies, so nothing above this module tells them apart.

Failures are raised as `ChatError` with a `kind` the router acts on (`connection_refused`,
`timeout`, `http_5xx`, ...) and a message that names the setting to fix. Keys are sent in the
`Authorization` header only and never appear in a message.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol
from urllib.parse import urlsplit


log = logging.getLogger(__name__)

Delta = Callable[[str], None]


class ChatError(Exception):
    """A chat request that produced no usable reply. `kind` is machine-readable."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class ChatReply:
    text: str
    model: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)


class ChatEngine(Protocol):
    """`request` sends one OpenAI chat-completions body and returns the parsed response body;
    with `on_delta`, the reply streams and each piece of content is passed to it as it comes."""

    label: str  # where requests go, without credentials or paths: a host name, or gguf:FILE
    remote: bool  # whether requests leave this machine

    def request(self, body: dict[str, Any], on_delta: Delta | None = None) -> dict[str, Any]: ...

    def close(self) -> None: ...


def reply_of(body: dict[str, Any]) -> ChatReply:
    """The assistant text of a chat-completions response body."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ChatError("malformed", "the response has no choices")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise ChatError("malformed", "the response has no message content")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    model = body.get("model") if isinstance(body.get("model"), str) else None
    return ChatReply(content, model, choices[0].get("finish_reason"), usage)


def _host(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


def is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name in ("localhost", "::1", "[::1]") or name.startswith("127.")


class HttpChatEngine:
    """An OpenAI-compatible `/chat/completions` endpoint over HTTP."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 60.0,
                 connect_timeout: float = 5.0, transport: httpx.BaseTransport | None = None):
        base = base_url.strip().rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.base_url = base
        self.label = _host(base)
        self.remote = not is_loopback(self.label)
        import httpx  # here, not at import: a command that never calls an endpoint does not load it

        headers = {"Authorization": f"Bearer {api_key.strip()}"} if api_key and api_key.strip() else {}
        self._client = httpx.Client(headers=headers, transport=transport,
                                    timeout=httpx.Timeout(timeout, connect=connect_timeout))

    def request(self, body: dict[str, Any], on_delta: Delta | None = None) -> dict[str, Any]:
        import httpx

        url = f"{self.base_url}/chat/completions"
        try:
            if on_delta is None:
                response = self._client.post(url, json=body)
                self._raise_for_status(response)
                try:
                    parsed = response.json()
                except ValueError:
                    raise ChatError("malformed", f"{self.label} answered with a body that is not JSON") from None
                if not isinstance(parsed, dict):
                    raise ChatError("malformed", f"{self.label} answered with JSON that is not an object")
                return parsed
            with self._client.stream("POST", url, json={**body, "stream": True}) as response:
                if response.status_code >= 400:
                    response.read()
                    self._raise_for_status(response)
                return _collect_sse(response.iter_lines(), on_delta, self.label)
        except httpx.ConnectError as e:
            refused = "refused" in str(e).lower() or "errno 111" in str(e).lower()
            raise ChatError("connection_refused" if refused else "connection_error",
                            f"cannot connect to {self.label}: is the server running?") from None
        except httpx.TimeoutException:
            raise ChatError("timeout", f"{self.label} did not answer in time (LLM_WRITER_TIMEOUT_S)") from None
        except httpx.TransportError as e:
            raise ChatError("connection_error", f"the connection to {self.label} failed: {type(e).__name__}") from None

    def _raise_for_status(self, response: httpx.Response) -> None:
        code = response.status_code
        if code < 400:
            return
        detail = _error_message(response)
        if code in (401, 403):
            raise ChatError("http_auth", f"{self.label} refused the key (HTTP {code}): check the API key variable")
        if code == 404:
            raise ChatError("http_4xx", f"{self.label}: HTTP 404 ({detail}); does the base URL end in /v1, "
                                        "and does the endpoint serve that model?")
        if code == 429:
            raise ChatError("http_429", f"{self.label} is rate-limiting (HTTP 429)")
        if code >= 500:
            raise ChatError("http_5xx", f"{self.label} failed (HTTP {code})")
        raise ChatError("http_4xx", f"{self.label} rejected the request (HTTP {code}): {detail}")

    def close(self) -> None:
        self._client.close()


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return (response.text or response.reason_phrase)[:160]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"][:160]
    if isinstance(error, str):
        return error[:160]
    return str(body)[:160]


def _collect_sse(lines, on_delta: Delta, label: str) -> dict[str, Any]:
    """Read a streamed chat completion (server-sent events, `data: {...}` lines ending with
    `data: [DONE]`) into the body a non-streamed request would have returned."""
    reply = _StreamedReply(on_delta)
    for line in lines:
        if not line or not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            raise ChatError("malformed", f"{label} streamed an event that is not JSON") from None
        reply.take(chunk)
    return reply.body()


class _StreamedReply:
    """Streamed `chat.completion.chunk` objects, passed on piece by piece and gathered into the
    body a non-streamed request would have returned."""

    def __init__(self, on_delta: Delta):
        self.on_delta = on_delta
        self.parts: list[str] = []
        self.model: str | None = None
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}

    def take(self, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        if isinstance(chunk.get("error"), (dict, str)):
            raise ChatError("engine", "the stream ended with an error")
        self.model = chunk.get("model") or self.model
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            self.finish = choice.get("finish_reason") or self.finish
            delta = choice.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(piece, str) and piece:
                self.parts.append(piece)
                self.on_delta(piece)

    def body(self) -> dict[str, Any]:
        return {"model": self.model, "usage": self.usage,
                "choices": [{"index": 0, "finish_reason": self.finish,
                             "message": {"role": "assistant", "content": "".join(self.parts)}}]}


class EmbeddedChatEngine:
    """A GGUF model run in this process by llama.cpp (`xllamacpp`), answering the same request
    bodies as an OpenAI-compatible server. One model load per file, shared by every user in the
    process (the writer and the LLM read-out judge)."""

    remote = False

    def __init__(self, path: str | Path, threads: int | None = None, context: int = 4096):
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise ValueError(f"no GGUF model file at {self.path}: check LLM_WRITER_LOCAL=gguf:/path/model.gguf")
        try:
            import xllamacpp
        except ImportError:
            raise ValueError('the embedded engine needs llama.cpp\'s wheel: pip install "sourcegate[llm]"') from None
        self.label = f"gguf:{self.path.name}"
        params = xllamacpp.CommonParams()
        params.model.path = str(self.path)
        params.n_ctx = context
        params.n_parallel = 1
        n = threads or max(1, min(4, os.cpu_count() or 1))
        params.cpuparams.n_threads = n
        params.cpuparams_batch.n_threads = n
        params.warmup = False
        params.verbosity = 0  # llama.cpp's per-request lines would flood a CLI user's terminal
        try:
            self._server = xllamacpp.Server(params)
        except Exception as e:  # a corrupt or unsupported file
            raise ValueError(f"llama.cpp could not load {self.path}: {e}") from None
        self.model_name = self.path.name

    def request(self, body: dict[str, Any], on_delta: Delta | None = None) -> dict[str, Any]:
        body = {k: v for k, v in body.items() if k not in ("model", "stream")}
        try:
            if on_delta is None:
                out = self._server.handle_chat_completions(body)
            else:
                reply = _StreamedReply(on_delta)
                self._server.handle_chat_completions({**body, "stream": True}, reply.take)
                out = reply.body()
        except ChatError:
            raise
        except Exception as e:
            raise ChatError("engine", f"llama.cpp failed on {self.label}: {type(e).__name__}") from None
        if not isinstance(out, dict) or "error" in out:
            raise ChatError("engine", f"llama.cpp rejected the request on {self.label}")
        out["model"] = self.model_name
        return out

    def close(self) -> None:
        pass  # shared; the model stays loaded for the life of the process


_embedded: dict[tuple[str, int | None], EmbeddedChatEngine] = {}
_embedded_lock = threading.Lock()


def embedded_engine(path: str | Path, threads: int | None = None) -> EmbeddedChatEngine:
    key = (str(Path(path).expanduser().resolve()), threads)
    with _embedded_lock:
        engine = _embedded.get(key)
        if engine is None:
            engine = _embedded[key] = EmbeddedChatEngine(path, threads)
        return engine


def open_chat_engine(spec: str, api_key: str | None = None, timeout: float = 60.0,
                     threads: int | None = None) -> ChatEngine:
    spec = (spec or "").strip()
    if spec.startswith("gguf:"):
        return embedded_engine(spec[len("gguf:"):], threads)
    if spec.startswith(("http://", "https://")):
        return HttpChatEngine(spec, api_key=api_key, timeout=timeout)
    raise ValueError(f"not a chat endpoint: {spec!r}; give an OpenAI-compatible base URL "
                     "(http://localhost:11434/v1) or gguf:/path/model.gguf")


def describe_endpoint(spec: str | None) -> str | None:
    """What an endpoint spec may be logged as: its host, or gguf:FILE (never a key or a path)."""
    if not spec:
        return None
    spec = spec.strip()
    if spec.startswith("gguf:"):
        return "gguf:" + Path(spec[len("gguf:"):]).name
    return _host(spec) or None
