"""The core service. Every interface (CLI, MCP tool, REST, web page) calls `SourceGate.ask()`.

Abstention and premise conflict are normal results, never exceptions.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable

from pydantic import BaseModel, Field, PrivateAttr

from .answer import Writer, WrittenAnswer
from .audit import AuditLog, redact_query
from .crosslingual import BridgedQuery, bridge, load_glossary
from .embed import Embedder, get_embedder
from .gate import GateThresholds, Route, apply_gate, guidance
from .judges import Judge, JudgeInput, Judgement, PassageJudgement, make_judge
from .judge_guard import guard_judge
from .models import Candidate
from .retrieve import RetrievalSettings, Retriever, is_multi_document
from .settings import Settings
from .store import Store, open_store

log = logging.getLogger("sourcegate")


class QueryError(ValueError):
    """A query that cannot be asked (empty, too long). The message says what to change."""


class PassageOut(BaseModel):
    id: str
    doc_id: str
    title: str
    url: str | None = None
    text: str
    version: str | None = None
    scores: dict[str, float]


class ExcludedOut(BaseModel):
    id: str
    doc_id: str
    title: str | None = None
    reason: str
    scores: dict[str, float] | None = None


# Outcomes of a writer attempt in which the request never reached the endpoint.
NOT_REACHED = ("connection_refused", "connection_error", "unavailable", "circuit_open")


class WriterOut(BaseModel):
    """Who wrote `answer`: the extractive writer, or a model endpoint of the policy (`local`,
    `cloud`); `fallback_reason` says why an endpoint was passed over, when one was."""

    path: str = "extractive"
    model: str | None = None
    fallback_reason: str | None = None
    # Every endpoint tried (role, endpoint, outcome, ...): for the audit record and the logs' remote
    # context, not part of the answer's shape.
    _attempts: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    def remote_contact(self) -> tuple[list[str], list[str]]:
        """The remote endpoints tried: those the passages reached (whether or not their answer was
        used), and those never reached."""
        from .llm_writer import remote_service

        reached: list[str] = []
        missed: list[str] = []
        for a in self._attempts:
            if a.get("remote"):
                (missed if a["outcome"] in NOT_REACHED else reached).append(remote_service(a["role"], a["endpoint"]))
        return reached, missed


class AskResult(BaseModel):
    status: str
    guidance: str
    answer: str | None
    evidence: list[PassageOut] = Field(default_factory=list)
    conflicts: list[PassageOut] = Field(default_factory=list)
    excluded: list[ExcludedOut] = Field(default_factory=list)
    audit_id: str
    model: str
    degraded: bool = False
    timings_ms: dict[str, float] = Field(default_factory=dict)
    writer: WriterOut = Field(default_factory=WriterOut)


class SourceGate:
    def __init__(self, settings: Settings, *, store: Store | None = None, embedder: Embedder | None = None,
                 judge: Judge | None = None, writer: Writer | None = None, audit: AuditLog | None | bool = True):
        self.settings = settings
        self.embedder = embedder or get_embedder(settings.embedder)
        self.store = store or open_store(settings.store_location, self.embedder.id, self.embedder.dim,
                                         **settings.store_options())
        self._judge = judge
        if writer is None:
            from .llm_writer import make_writer

            writer = make_writer(settings, embedder=self.embedder)
        self.writer = writer
        if audit is True:
            self.audit = AuditLog(settings.audit_path, settings.audit_key) if settings.audit_enabled else None
        else:
            self.audit = audit or None
        self.retrieval = RetrievalSettings.from_settings(settings)
        self.retriever = Retriever(self.store, self.embedder, self.retrieval)
        self.thresholds: GateThresholds = settings.thresholds()

    @property
    def judge(self) -> Judge:
        if self._judge is None:
            # Deadline, retries and circuit breaker (JUDGE_*): a slow or dead judge fails closed.
            self._judge = guard_judge(make_judge(self.settings, embedder=self.embedder), self.settings)
        return self._judge

    def _validate(self, query: str) -> str:
        if not isinstance(query, str) or not query.strip():
            raise QueryError("the query is empty: ask a question")
        query = query.strip()
        try:
            query.encode("utf-8")
        except UnicodeEncodeError as e:
            raise QueryError(f"the query is not valid Unicode text (character {e.start + 1} is a lone surrogate "
                             "or a byte that is not UTF-8): send it as UTF-8 text") from None
        if len(query) > self.settings.max_query_chars:
            raise QueryError(
                f"the query is {len(query)} characters long, over the {self.settings.max_query_chars} limit "
                "(MAX_QUERY_CHARS): shorten it to the question itself"
            )
        return query

    def _run_judge(self, query: str, candidates: list[Candidate]) -> Judgement:
        inputs = [JudgeInput(id=c.id, text=c.text, title=c.title, source_type=c.source_type, status=c.status,
                             version=c.version, passage_features=c.passage_features, embedding=c.embedding)
                  for c in candidates]
        judge = None
        try:
            judge = self.judge
            judgement = judge.judge(query, inputs)
        except Exception as e:  # a judge that is down fails closed, never open
            log.warning("judge failed: %s", type(e).__name__)
            name = getattr(judge, "name", self.settings.judge)
            return Judgement(model=f"{name}:unavailable",
                             results=[PassageJudgement(c.id, None, f"judge unavailable: {type(e).__name__}") for c in candidates])
        by_id = {r.id: r for r in judgement.results}
        # A passage the judge skipped is treated as a failure for that passage.
        judgement.results = [by_id.get(c.id) or PassageJudgement(c.id, None, "no judgement returned") for c in candidates]
        return judgement

    def ask(self, query: str, interface: str = "python",
            on_event: Callable[[str, dict[str, Any]], None] | None = None) -> AskResult:
        """Retrieve, gate and answer one question. With `on_event(kind, data)`, the gate's decision
        is sent first ("gate": the result without its answer), then the answer as a model writes it
        ("delta", "reset", "replace"; see `Writer.write`); the complete result is returned."""
        query = self._validate(query)
        t0 = time.perf_counter()
        bq = self._bridge(query)
        candidates, rtimes = self.retriever.retrieve(query, bridged=bq.text if bq.bridged else None)
        t1 = time.perf_counter()
        judged_query = bq.text
        judgement = self._run_judge(judged_query, candidates) if candidates else Judgement(model=self._judge_model_hint(), results=[])
        t2 = time.perf_counter()

        degraded = judgement.all_failed
        limit = self.settings.evidence_max_multi if is_multi_document(query) else self.settings.evidence_max_single
        gated, status = apply_gate([(c.id, c.doc_id, j.scores) for c, j in zip(candidates, judgement.results)],
                                   self.thresholds, limit)
        final = [(c, j, g.route, g.reason) for c, j, g in zip(candidates, judgement.results, gated)]
        t3 = time.perf_counter()

        ev = [(c, j) for c, j, r, _ in final if r is Route.EVIDENCE]
        ev.sort(key=lambda x: -x[1].scores.contains_answer_evidence)
        cf = [(c, j) for c, j, r, _ in final if r is Route.CONFLICT]
        cf.sort(key=lambda x: -x[1].scores.contradicts_query_premise)

        cap = self.settings.max_passage_chars

        def out(c: Candidate, j: PassageJudgement) -> PassageOut:
            text = c.text if len(c.text) <= cap else c.text[:cap] + " [...]"
            return PassageOut(id=c.id, doc_id=c.doc_id, title=c.title, url=c.url, text=text, version=c.version,
                              scores=j.scores.rounded())

        excluded = [ExcludedOut(id=c.id, doc_id=c.doc_id, title=c.title, reason=reason,
                                scores=j.scores.rounded() if j.scores else None)
                    for c, j, r, reason in final if r is Route.EXCLUDED]
        evidence = [out(c, j) for c, j in ev]
        conflicts = [out(c, j) for c, j in cf]
        if on_event is not None:
            on_event("gate", {"status": status.value, "guidance": guidance(status, degraded), "degraded": degraded,
                              "evidence": [p.model_dump() for p in evidence],
                              "conflicts": [p.model_dump() for p in conflicts],
                              "excluded": [x.model_dump() for x in excluded], "model": judgement.model})
        written = self.writer.write(query, status, [c for c, _ in ev], [c for c, _ in cf], search_text=judged_query,
                                    on_event=on_event)
        t4 = time.perf_counter()

        timings = {
            "retrieve": (t1 - t0) * 1000, **{f"retrieve_{k}": v for k, v in rtimes.items()},
            "judge": (t2 - t1) * 1000, "route": (t3 - t2) * 1000, "answer": (t4 - t3) * 1000,
            "total": (t4 - t0) * 1000,
        }
        timings = {k: round(v, 2) for k, v in timings.items()}
        audit_id = uuid.uuid4().hex
        result = AskResult(
            status=status.value,
            guidance=guidance(status, degraded),
            answer=written.text,
            evidence=evidence,
            conflicts=conflicts,
            excluded=excluded,
            audit_id=audit_id,
            model=judgement.model,
            degraded=degraded,
            timings_ms=timings,
            writer=WriterOut(path=written.path, model=written.model, fallback_reason=written.fallback_reason),
        )
        result.writer._attempts = written.attempts
        if self.audit is not None:
            record = self._audit_record(query, interface, result, final, judgement, written)
            record["query_bridge"] = {"language": bq.language, "added_terms": bq.added_terms}
            self.audit.append(record)
        return result

    def _bridge(self, query: str) -> BridgedQuery:
        if not self.settings.crosslingual:
            return BridgedQuery(query, None, [])
        glossary = load_glossary(str(self.settings.glossary_path) if self.settings.glossary_path else None)
        return bridge(query, self.settings.library_language, glossary)

    def _judge_model_hint(self) -> str:
        return getattr(self._judge, "name", self.settings.judge)

    def _audit_record(self, query: str, interface: str, result: AskResult, final, judgement: Judgement,
                      written: WrittenAnswer) -> dict[str, Any]:
        return {
            "audit_id": result.audit_id,
            "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "interface": interface,
            "query": redact_query(query) if self.settings.audit_redact_query else query,
            "judge": {"backend": self.settings.judge if self._judge is None else getattr(self._judge, "name", self.settings.judge),
                      "model": judgement.model, "usage": judgement.usage},
            "thresholds": self.thresholds.as_dict(),
            "retrieval": {
                "store": type(self.store).__name__, "embedder": self.embedder.id,
                **{k: getattr(self.retrieval, k) for k in ("dense_pool", "lexical_pool", "min_score", "dense_weight",
                                                            "lexical_weight", "candidates", "include_archived")},
                "evidence_max_single": self.settings.evidence_max_single,
                "evidence_max_multi": self.settings.evidence_max_multi,
            },
            "candidates": [
                {"id": c.id, "doc_id": c.doc_id, "version": c.version, "status": c.status,
                 "content_hash": c.content_hash, "retrieval_score": c.score,
                 **({"reranker_score": c.reranker_score} if c.reranker_score is not None else {}),
                 "scores": j.scores.rounded(6) if j.scores else None, "error": j.error,
                 "route": r.value, "reason": reason}
                for c, j, r, reason in final
            ],
            "status": result.status,
            "degraded": result.degraded,
            "multi_document": is_multi_document(query),
            "evidence_limit": (self.settings.evidence_max_multi if is_multi_document(query)
                               else self.settings.evidence_max_single),
            "answer": result.answer,
            "writer": {
                "name": written.writer, "path": written.path, "model": written.model,
                "fallback_reason": written.fallback_reason,
                **({"policy": getattr(self.writer, "policy")} if hasattr(self.writer, "policy") else {}),
                # Remote endpoints the policy allowed, and the one the passages were actually sent to.
                "remote_declared": written.declared_remote,
                "remote_observed": result.writer.remote_contact()[0],
                "attempts": written.attempts,
            },
            "timings_ms": result.timings_ms,
        }

    def close(self) -> None:
        self.store.close()
        close_writer = getattr(self.writer, "close", None)
        if close_writer is not None:
            close_writer()
