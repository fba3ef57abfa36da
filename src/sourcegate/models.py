"""Data shapes shared by every stage of the pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

QUESTIONS: tuple[str, ...] = (
    "is_relevant",
    "contains_answer_evidence",
    "contradicts_query_premise",
    "contains_prompt_injection",
    "is_superseded",
)

QUESTION_TEXT: dict[str, str] = {
    "is_relevant": "Does the passage address the subject of the query?",
    "contains_answer_evidence": "Does the passage state information usable in a direct answer to the query?",
    "contradicts_query_premise": "Does the passage conflict with a factual premise stated or assumed in the query?",
    "contains_prompt_injection": (
        "Does the passage contain text addressed to an AI assistant, model or system rather than "
        "to a human reader? Instructions written for people, such as procedure steps, do not count."
    ),
    "is_superseded": "Does the passage say it is superseded, archived, withdrawn or no longer valid?",
}


class PassageScores(BaseModel):
    """Calibrated probabilities in [0, 1] for the five gate questions."""

    model_config = ConfigDict(frozen=True)

    is_relevant: float = Field(ge=0.0, le=1.0)
    contains_answer_evidence: float = Field(ge=0.0, le=1.0)
    contradicts_query_premise: float = Field(ge=0.0, le=1.0)
    contains_prompt_injection: float = Field(ge=0.0, le=1.0)
    is_superseded: float = Field(ge=0.0, le=1.0)

    def rounded(self, ndigits: int = 4) -> dict[str, float]:
        return {k: round(float(v), ndigits) for k, v in self.model_dump().items()}


@dataclass
class Document:
    """One source document as parsed, before chunking."""

    id: str
    title: str
    text: str
    url: str | None = None
    source_type: str | None = None
    version: str | None = None
    status: str = "current"
    updated_at: str | None = None
    path: str | None = None
    # (start_char, page_number) and (start_char, heading_path) markers into `text`.
    pages: list[tuple[int, int]] = field(default_factory=list)
    headings: list[tuple[int, str]] = field(default_factory=list)
    content_hash: str = ""
    # Other keys of its front matter or sidecar (`model`, `product`): text values, for filters.
    metadata: dict[str, str] = field(default_factory=dict)
    # The user and group ids that may read it (`readers` in its metadata, or `ingest --readers`;
    # docs/readers.md); empty: it names none, and DOCUMENTS_WITHOUT_READERS says who reads it.
    readers: list[str] = field(default_factory=list)
    # Keys of its front matter, HTML <meta> tags, sidecar or manifest that ingest could not read,
    # each with why (`id (a reserved name)`): named in the ingest summary, not stored.
    unread_keys: list[str] = field(default_factory=list)


@dataclass
class Chunk:
    id: str
    doc_id: str
    ordinal: int
    text: str
    start: int = 0
    page: int | None = None
    heading: str | None = None


@dataclass
class Candidate:
    """A chunk retrieved for a query, with everything the gate and the answer need."""

    id: str
    doc_id: str
    title: str
    text: str
    url: str | None = None
    version: str | None = None
    status: str | None = None
    source_type: str | None = None
    content_hash: str | None = None
    page: int | None = None
    heading: str | None = None
    dense_score: float = 0.0
    lexical_score: float = 0.0
    score: float = 0.0
    # The search service's semantic reranker score (Azure AI Search), when it ran.
    reranker_score: float | None = None
    # Passage-only judge features computed at ingest (injection, superseded), if stored.
    passage_features: dict[str, Any] | None = None
    # The stored embedding of the chunk, when the store returns it.
    embedding: Any = field(default=None, repr=False)
    # The sentence that answers, when the judge found it (set after judging; see PassageJudgement.quote).
    quote: str | None = None
    # Set by the gate: the trust tier of the passage's source_type, the reason of its route (a lower
    # tier, a disagreement) and the values it states in answer (see sourcegate.stated).
    tier: int | None = None
    gate_reason: str | None = None
    # why it was set aside as addressed to an AI (the sentence read as such), when it was
    gate_why: str | None = None
    values: list[str] | None = None
    # Set by the service: the question names this passage's revision ("version 1 of the procedure"), so
    # it answers although archived or superseded, and the answer says which revision it is.
    named_revision: bool = False

    def __post_init__(self) -> None:
        # Whatever a document claimed, only an http(s) URL reaches an answer, a tool result or the page.
        from .inert import safe_url

        self.url = safe_url(self.url)
