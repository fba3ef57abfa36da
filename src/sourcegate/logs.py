"""Structured logs: one JSON object per line on stderr, metadata only.

A log line may say which path a request took, which remote services it was allowed to reach
and which it reached, how long each stage took and how many passages went where. It never
holds the text of a question, a passage or an answer, nor a secret: log pipelines are kept
longer and read by more people than the audit log, which is where content belongs.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from typing import Any
from urllib.parse import urlparse

ASK_LOGGER = "sourcegate.ask"
_HANDLER_MARK = "_sourcegate_json"
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}

# Attributes every LogRecord has; anything else was passed through `extra=` and is ours.
_STANDARD_ATTRS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line: time, level, logger, event and the `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for k, v in vars(record).items():
            if k not in _STANDARD_ATTRS and not k.startswith("_") and k != "color_message":  # uvicorn's ANSI copy
                out[k] = v
        if record.exc_info and record.exc_info[0] is not None:
            # The exception type only: messages and tracebacks can quote user content.
            out["exception"] = record.exc_info[0].__name__
        from .inert import terminal_text

        # json escapes C0 controls, not the C1 range (an 8-bit CSI) nor invisible characters
        return terminal_text(json.dumps(out, ensure_ascii=False, default=str))


class HumanFormatter(logging.Formatter):
    """`warning: message` for a person at a terminal (the default outside servers)."""

    def format(self, record: logging.LogRecord) -> str:
        from .inert import terminal_text

        # messages quote file names and document ids, which may hold terminal escape sequences
        return terminal_text(f"{record.levelname.lower()}: {record.getMessage()}")


def parse_level(level: int | str | None) -> int | None:
    """A logging level from a number or a name (`info`, `WARNING`, `10`); None for unset or empty.
    An unknown name raises ValueError naming the accepted ones."""
    if level is None or level == "":
        return None
    if isinstance(level, int):
        return level
    text = str(level).strip()
    if text.isdigit():
        return int(text)
    value = logging.getLevelName(text.upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown log level {level!r}: use debug, info, warning or error")
    return value


def configure_logging(level: int | str = logging.INFO, stream=None, human: bool = False) -> None:
    """Send sourcegate's logs (and the web server's) to stderr: JSON lines (servers, `--verbose`)
    or, with `human`, plain `level: message` lines. Calling it again replaces the handler it
    installed before, so the last call decides the format, level and stream."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _HANDLER_MARK, False):
            root.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(HumanFormatter() if human else JsonFormatter())
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(parse_level(level) or logging.INFO)
    # Third-party HTTP clients log full URLs and sometimes headers at debug/info level.
    for noisy in ("httpx", "httpcore", "httpx2", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def new_request_id() -> str:
    return uuid.uuid4().hex[:16]


def _host(url: str | None) -> str | None:
    if not url:
        return None
    parsed = urlparse(url if "://" in url else f"//{url}")
    return parsed.hostname


def _is_remote(host: str | None) -> bool:
    return bool(host) and host not in _LOCAL_HOSTS


def declared_remote(settings, judge_backend: str) -> list[str]:
    """Remote services this request may reach under the settings (host names, never URLs with
    credentials or paths)."""
    out: list[str] = []
    if judge_backend == "typesafe":
        out.append(f"typesafe:{_host(settings.typesafe_base_url) or 'api.typesafe.ai'}")
    elif judge_backend == "llm":
        host = _host(settings.llm_judge_base_url)
        if _is_remote(host):
            out.append(f"llm-judge:{host}")
    store_url = settings.store_url or ""
    if store_url and not store_url.startswith("sqlite"):
        host = _host(store_url)
        if _is_remote(host):
            out.append(f"store:{host}")
    return out


def ask_log_fields(result, interface: str, settings, request_id: str | None = None, gate=None) -> dict[str, Any]:
    """The metadata of one answered question, as a dict (what `log_ask` writes)."""
    judge = getattr(gate, "_judge", None) if gate is not None else None
    backend = getattr(judge, "name", None) or settings.judge
    written = getattr(result, "writer", None)
    writer = getattr(written, "path", "extractive")
    n_candidates = len(result.evidence) + len(result.conflicts) + len(result.excluded)
    judge_errors = sum(1 for x in result.excluded if x.reason == "judge_error")

    path = ["retrieve"]
    if n_candidates:
        path.append(f"judge:{backend}" + ("(failed)" if result.degraded else ""))
    path.append("route")
    path.append("answer:" + (writer if writer == "extractive" else f"llm-{writer}"))

    declared = declared_remote(settings, backend)
    # A judge call is made only when there are candidates; a remote judge that failed for
    # every passage was tried but not reached. The store is reached on every request.
    observed: list[str] = []
    failed: list[str] = []
    for svc in declared:
        if svc.startswith(("typesafe:", "llm-judge:")):
            if not n_candidates:
                continue
            (failed if result.degraded else observed).append(svc)
        else:
            observed.append(svc)
    # The writer's remote endpoints: those the passages were sent to (whether or not their answer
    # was used) are observed; those tried but never reached (connection refused) failed.
    declared += getattr(getattr(gate, "writer", None), "declared_remote", None) or []
    if written is not None:
        reached, missed = written.remote_contact()
        observed += reached
        failed += missed

    timings = {k: v for k, v in result.timings_ms.items()}
    return {
        "request_id": request_id or new_request_id(),
        "audit_id": result.audit_id,
        "interface": interface,
        "judge_backend": backend,
        "judge_model": result.model,
        "path": ">".join(path),
        "remote_declared": declared,
        "remote_observed": observed,
        "remote_failed": failed,
        "status": result.status,
        "degraded": result.degraded,
        # The writer actually used; whether a model's answer was passed over (the reason may quote
        # the answer, so only the audit record holds it).
        "writer": {"path": writer, "model": getattr(written, "model", None),
                   "fell_back": bool(getattr(written, "fallback_reason", None))},
        "latency_ms": timings,
        "counts": {
            "candidates": n_candidates,
            "evidence": len(result.evidence),
            "conflicts": len(result.conflicts),
            "excluded": len(result.excluded),
            "judge_errors": judge_errors,
            # Parts of the question no passage answers (a count: their text is the question's).
            "missing": len(getattr(result, "missing", None) or []),
        },
    }


def log_ask(result, interface: str, settings, request_id: str | None = None, gate=None) -> None:
    """Log one answered question: metadata only (see the module docstring).

    `result` is an `AskResult`, `settings` the `Settings` in force, `gate` the `SourceGate`
    that answered (optional: it names the judge and writer actually used)."""
    logging.getLogger(ASK_LOGGER).info("ask", extra=ask_log_fields(result, interface, settings, request_id, gate))


def log_rejected(interface: str, reason: str, request_id: str | None = None, **fields: Any) -> None:
    """Log a request refused before the gate ran (bad key, body too big, query too long)."""
    logging.getLogger(ASK_LOGGER).info(
        "rejected", extra={"request_id": request_id or new_request_id(), "interface": interface, "reason": reason, **fields}
    )
