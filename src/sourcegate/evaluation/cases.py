"""Evaluation cases: one JSON object per line with `query`, `expected_status`, `expected_sources`
(document ids), optional `forbidden_sources`, `kind` and `blind` (true for questions written from the
documents without running the judge on them first, so figures can be reported on them apart)."""

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
            cases.append(EvalCase(
                query=obj["query"], expected_status=obj["expected_status"],
                expected_sources=list(obj.get("expected_sources") or []),
                forbidden_sources=list(obj.get("forbidden_sources") or []),
                kind=obj.get("kind") or "factual", blind=bool(obj.get("blind", False)),
            ))
    return cases
