"""Evaluation cases: one JSON object per line with `query`, `expected_status`, `expected_sources`
(document ids), optional `forbidden_sources`, `kind` and `blind` (true for questions written from the
documents without running the judge on them first, so figures can be reported on them apart).

A question that asks several things may list `expected_parts`, one object per part in the order
asked, each with the `sources` (document ids) that state it, or none when the library does not:
such a part must be named in the result's `missing`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

STATUSES = ("answer_from_evidence", "premise_conflict", "insufficient_evidence")


@dataclass
class EvalCase:
    query: str
    expected_status: str
    expected_sources: list[str] = field(default_factory=list)
    forbidden_sources: list[str] = field(default_factory=list)
    kind: str = "factual"
    blind: bool = False
    # Per part of a question that asks several things: the documents that state it ([] if none).
    expected_parts: list[list[str]] | None = None


def load_cases(path: str | Path) -> list[EvalCase]:
    cases = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: invalid JSON ({e.msg})") from None
            if "query" not in obj or "expected_status" not in obj:
                raise ValueError(f"{path}:{n}: each case needs 'query' and 'expected_status'")
            if obj["expected_status"] not in STATUSES:
                raise ValueError(f"{path}:{n}: expected_status must be one of {', '.join(STATUSES)}")
            parts = obj.get("expected_parts")
            if parts is not None and (not isinstance(parts, list) or len(parts) < 2
                                      or not all(isinstance(p, dict) for p in parts)):
                raise ValueError(f"{path}:{n}: expected_parts must list at least two objects such as "
                                 '{"sources": ["DOC-ID"]}')
            cases.append(EvalCase(
                query=obj["query"], expected_status=obj["expected_status"],
                expected_sources=list(obj.get("expected_sources") or []),
                forbidden_sources=list(obj.get("forbidden_sources") or []),
                kind=obj.get("kind") or "factual", blind=bool(obj.get("blind", False)),
                expected_parts=[list(p.get("sources") or []) for p in parts] if parts is not None else None,
            ))
    return cases
