"""A judge that replays stored scores: for tests, offline demos and audits.

Scores are looked up by (query, passage id). The file is JSONL with one object per line:
`{"query": ..., "passage_id": ..., "scores": {five floats}, "model": optional}`; an audit log
(records with `query` and `candidates[].scores`) is accepted too.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..models import QUESTIONS, PassageScores
from .base import JudgeInput, Judgement, PassageJudgement


class RecordedJudge:
    name = "recorded"

    def __init__(self, table: dict[tuple[str, str], dict[str, float]] | None = None, model: str = "recorded"):
        self.table = dict(table or {})
        self.model = model

    @classmethod
    def from_file(cls, path: str | Path) -> "RecordedJudge":
        table: dict[tuple[str, str], dict[str, float]] = {}
        model = "recorded"
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: invalid JSON ({e.msg})") from None
                if "candidates" in rec:  # an audit record
                    for c in rec["candidates"]:
                        if c.get("scores"):
                            table[(rec["query"], c["id"])] = c["scores"]
                    model = rec.get("judge", {}).get("model", model)
                else:
                    table[(rec["query"], rec["passage_id"])] = rec["scores"]
                    model = rec.get("model", model)
        return cls(table, model=f"recorded:{model}")

    def add(self, query: str, passage_id: str, scores: dict[str, float]) -> None:
        self.table[(query, passage_id)] = scores

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        results = []
        for p in passages:
            raw = self.table.get((query, p.id))
            if raw is None:
                results.append(PassageJudgement(p.id, None, "no recorded score for this query and passage"))
                continue
            try:
                scores = PassageScores(**{q: float(raw[q]) for q in QUESTIONS})
            except Exception as e:
                results.append(PassageJudgement(p.id, None, f"invalid recorded score ({type(e).__name__})"))
                continue
            results.append(PassageJudgement(p.id, scores))
        return Judgement(model=self.model, results=results)
