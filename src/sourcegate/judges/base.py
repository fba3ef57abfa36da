"""The judge contract: for a query and its candidate passages, five probabilities per passage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..models import PassageScores


@dataclass
class JudgeInput:
    """What a judge sees of a passage."""

    id: str
    text: str
    title: str = ""
    source_type: str | None = None
    status: str | None = None
    version: str | None = None
    # Passage-only features computed once at ingest, if the store has them.
    passage_features: dict | None = None
    # The passage's stored embedding (L2-normalised, from the index's embedder), if available.
    embedding: Any = None


@dataclass
class PassageJudgement:
    id: str
    scores: PassageScores | None
    error: str | None = None
    # the passage's sentence that answers (the reader's span, or the one that settles a yes/no
    # question), when the judge knows it: the extractive answer quotes it
    quote: str | None = None
    # the local judge's readings behind the scores (its interpretable heads and the reader's), for
    # fitting heads on a library's own questions (`sourcegate.adapt`, `sourcegate eval --json`)
    readings: dict[str, float] | None = None


@dataclass
class Judgement:
    model: str
    results: list[PassageJudgement]
    usage: dict = field(default_factory=dict)

    @property
    def all_failed(self) -> bool:
        return bool(self.results) and all(r.scores is None for r in self.results)


@runtime_checkable
class Judge(Protocol):
    """One method. Implementations must never raise for a single passage: they return an error
    for it instead, so the gate can exclude it (fail closed)."""

    name: str

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement: ...
