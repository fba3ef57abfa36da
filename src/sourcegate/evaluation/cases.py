"""Evaluation cases: one JSON object per line with `query`, `expected_status`, `expected_sources`
(document ids), optional `forbidden_sources`, `kind` and `blind` (true for questions written from the
documents without running the judge on them first, so figures can be reported on them apart).

A question that asks several things may list `expected_parts`, one object per part in the order
asked, each with the `sources` (document ids) that state it, or none when the library does not:
such a part must be named in the result's `missing`.

What a right answer must say: `answer` (the answer's text as the document words it) and `must_state`
(short values, each of which the returned text must hold: "ISO VG 220", "15 minutes"). An answer with
the right status and sources that does not state them counts as wrong, reported apart. `also_accept`
lists other statuses that are right too (a question a careful reader may answer or abstain on)."""

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
    # What a right answer's text must hold: the answer as the document words it, and short values.
    answer: str | None = None
    must_state: list[str] = field(default_factory=list)
    # Other statuses that count as right.
    also_accept: list[str] = field(default_factory=list)


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
            accept = obj.get("also_accept") or []
            if not isinstance(accept, list) or any(a not in STATUSES for a in accept):
                raise ValueError(f"{path}:{n}: also_accept lists statuses among {', '.join(STATUSES)}")
            must = obj.get("must_state") or []
            if not isinstance(must, list) or not all(isinstance(v, str) and v.strip() for v in must):
                raise ValueError(f"{path}:{n}: must_state lists the short values a right answer states")
            answer = obj.get("answer")
            if answer is not None and not isinstance(answer, str):
                raise ValueError(f"{path}:{n}: answer is the answer's text")
            cases.append(EvalCase(
                query=obj["query"], expected_status=obj["expected_status"],
                expected_sources=list(obj.get("expected_sources") or []),
                forbidden_sources=list(obj.get("forbidden_sources") or []),
                kind=obj.get("kind") or "factual", blind=bool(obj.get("blind", False)),
                expected_parts=[list(p.get("sources") or []) for p in parts] if parts is not None else None,
                answer=answer.strip() if answer and answer.strip() else None, must_state=[v.strip() for v in must],
                also_accept=list(accept),
            ))
    return cases
