"""The core service. Every interface (CLI, MCP tool, REST, web page) calls `SourceGate.ask()`.

Abstention and premise conflict are normal results, never exceptions.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, Field, PrivateAttr, field_validator

from .answer import Writer, WrittenAnswer, assemble_parts
from .audit import AuditLog, redact_record
from .identity import Caller
from .inert import inert_markup, visible_text
from .crosslingual import BridgedQuery, bridge, load_glossary
from .embed import Embedder, get_embedder
from .answer import quoted
from .gate import (
    REASON_DISAGREES_HIGHER,
    REASON_INJECTION,
    REASON_INJECTION_DOCUMENT,
    GateThresholds,
    Route,
    Status,
    apply_gate,
    guidance,
)
from .stated import stated_values
from . import text as T
from .units import AbsentUnit, absent_note, absent_unit, names_another_unit
from .judges import Judge, JudgeInput, Judgement, PassageJudgement, make_judge
from .judge_guard import guard_judge
from .location import deep_link
from .models import Candidate
from .plan import Part, PartDecision, library_identifiers, may_have_parts, merge, names_subject, plan
from .filters import FilterError, described, filter_choices, search_filters
from .readers import readers_rule
from .retrieve import RetrievalSettings, Retriever, is_multi_document, named_versions
from .settings import Settings

if TYPE_CHECKING:
    from .adapt import Adaptation
from .store import ReadersRule, SearchFilters, Store, open_store
from .store.base import EmbedderMismatch, readable, store_time_budget

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
    # "archived" for a revision that reached the gate because the question named its version
    status: str | None = None
    scores: dict[str, float]
    # The kind of source, its trust tier (GATE_TRUST_TIERS) and why the gate put it where it is
    # (evidence, evidence_disagrees, contradicts_premise, disagrees_with_higher_tier).
    source_type: str | None = None
    tier: int | None = None
    reason: str | None = None
    # Where the passage is: its page (PDF), its heading path (DOCX, Markdown, HTML), and the URL
    # opened there (`#page=N`, a heading anchor) when the document has a URL.
    page: int | None = None
    section: str | None = None
    link: str | None = None

    # What a person or an agent is shown holds no invisible characters (bidi overrides, NUL, ...).
    _visible = field_validator("doc_id", "title", "text", "version", "section", mode="before")(
        lambda v: visible_text(v))


class ExcludedOut(BaseModel):
    id: str
    doc_id: str
    title: str | None = None
    reason: str
    scores: dict[str, float] | None = None
    # for `prompt_injection` and `document_addresses_ai`: the sentence read as addressed to an AI (of this
    # passage, or of the document's passage that set the whole document aside), so that an operator sees
    # a false alarm at a glance
    why: str | None = None

    _visible = field_validator("doc_id", "title", "why", mode="before")(lambda v: visible_text(v))


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
    # The parts of a question that asks several things which no passage answers (empty when every
    # part is answered, and for a question of one part, whose status says it all).
    missing: list[str] = Field(default_factory=list)
    # Each part's question, subject, status and the documents of its evidence and conflicts: for
    # evaluation and Python callers, not part of the answer's shape.
    _parts: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    # per candidate id, the judge's readings behind its scores (`PassageJudgement.readings`), for eval
    _readings: dict[str, dict[str, float]] = PrivateAttr(default_factory=dict)


# How long the library's identifiers are kept for the planner before they are read again.
KNOWN_IDS_TTL_S = 60.0
# The time one question may spend on the store's queries, all parts together (each query is also
# bounded on its own: see store/postgres.py). Searches take milliseconds; past this the database is
# too slow or silent, and the question is a 503 rather than a slot held.
STORE_TIME_PER_QUESTION_S = 8.0


@dataclass
class _PartRun:
    """One part through retrieve, judge and gate."""

    part: Part
    bridged: BridgedQuery
    candidates: list[Candidate]
    judgement: Judgement
    final: list[tuple[Candidate, PassageJudgement, Route, str]]
    status: Status
    limit: int
    named: list[bool] | None
    rtimes: dict[str, float]
    retrieve_s: float
    judge_s: float
    route_s: float
    # the units the question names that no passage found names, and those the passages name instead
    absent: AbsentUnit | None = None
    # with an adaptation in force: the judge's own scores (the gate read the adapted ones) and the
    # per-question probability that any candidate answers
    judge_scores: list | None = None
    p_answer: float | None = None
    # what the gate read this part under: the adaptation (None: the judge alone) and the thresholds
    adaptation: "Adaptation | None" = None
    thresholds: GateThresholds | None = None

    @property
    def evidence(self) -> list[tuple[Candidate, PassageJudgement]]:
        """The most trusted first (a lower-tier source is cited after a higher-tier one), then the strongest."""
        ev = [(c, j) for c, j, r, _ in self.final if r is Route.EVIDENCE]
        ev.sort(key=lambda x: (-(x[0].tier or 0), -x[1].scores.contains_answer_evidence))
        return ev

    @property
    def conflicts(self) -> list[tuple[Candidate, PassageJudgement]]:
        """Passages that contradict the premise first, then evidence of a lower tier that states another value."""
        cf = [(c, j) for c, j, r, _ in self.final if r is Route.CONFLICT]
        cf.sort(key=lambda x: (x[0].gate_reason == REASON_DISAGREES_HIGHER, -(x[0].tier or 0),
                               -x[1].scores.contradicts_query_premise))
        return cf


def _inert_events(on_event: Callable[[str, dict[str, Any]], None] | None):
    """`on_event` with the answer text it is sent made inert, as `answer` is (see inert.py)."""
    if on_event is None:
        return None

    def send(kind: str, data: dict[str, Any]) -> None:
        if kind in ("delta", "replace") and isinstance(data.get("text"), str):
            data = {**data, "text": inert_markup(data["text"])}
        on_event(kind, data)

    return send


def injection_of_document(c: Candidate) -> float | None:
    """The highest injection probability among all the chunks of the candidate's document, as ingest
    read it (None for an index built before it was recorded)."""
    pf = c.passage_features if isinstance(c.passage_features, dict) else {}
    v = pf.get("doc_inj")
    return float(v) if isinstance(v, (int, float)) else None


def addressed_to_ai(c: Candidate, reason: str, same_document: list[Candidate]) -> str | None:
    """For a passage excluded as addressed to an AI (itself or through its document), the sentence read
    as such: its own, else the one its document's most suspicious chunk holds."""
    if reason not in (REASON_INJECTION, REASON_INJECTION_DOCUMENT):
        return None
    own = c.passage_features.get("inj_sentence") if isinstance(c.passage_features, dict) else None
    if reason == REASON_INJECTION and own:
        return own
    for x in same_document:
        pf = x.passage_features if isinstance(x.passage_features, dict) else {}
        if x is not c and x.gate_reason == REASON_INJECTION and pf.get("inj_sentence"):
            return pf["inj_sentence"]
    pf = c.passage_features if isinstance(c.passage_features, dict) else {}
    return pf.get("doc_inj_sentence") or own


def _unique(items: list) -> list:
    """First occurrence of each passage (a passage may serve several parts)."""
    seen: set[str] = set()
    out = []
    for x in items:
        if x[0].id not in seen:
            seen.add(x[0].id)
            out.append(x)
    return out



class SourceGate:
    def __init__(self, settings: Settings, *, store: Store | None = None, embedder: Embedder | None = None,
                 judge: Judge | None = None, writer: Writer | None = None, audit: AuditLog | None | bool = True,
                 adaptation: "Adaptation | None | bool" = True):
        """`adaptation`: True reads the one in force in the home (`sourcegate adapt`; setting ADAPTATION=off
        turns it off), False or None answers with the judge alone, or an `Adaptation` to use."""
        self.settings = settings
        self.embedder = embedder or get_embedder(settings.embedder)
        if store is None:
            try:
                store = open_store(settings.store_location, self.embedder.id, self.embedder.dim,
                                   **settings.store_options())
            except EmbedderMismatch as e:  # never answer from vectors of another space
                from .library import explain_mismatch

                raise explain_mismatch(settings, e) from None
        elif getattr(store, "embedder_mismatch", False):
            from .library import explain_mismatch

            raise explain_mismatch(settings, store._mismatch())
        self.store = store
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
        self.trust = settings.trust_tiers()
        self._adapt_from_home = adaptation is True
        self._adapt_mark: float | None = self._adaptation_mark()
        self.adaptation, self.adaptation_problem = self._load_adaptation(adaptation)
        self._known_ids: tuple[float, frozenset[str]] | None = None
        self._documents: tuple[float, list] | None = None

    def _load_adaptation(self, adaptation) -> tuple["Adaptation | None", str | None]:
        """The adaptation to answer with, and why the home's is not used when it cannot be (it then answers
        with the judge alone, and says so in the log and the health endpoint)."""
        from .adapt import AdaptError, AdaptationStore, library_problem

        if adaptation is None or adaptation is False:
            return None, None
        if adaptation is not True:
            return adaptation, None
        if str(getattr(self.settings, "adaptation", "auto")).lower() == "off":
            return None, None
        try:
            ad = AdaptationStore(self.settings.home).current()
        except AdaptError as e:
            log.warning("adaptation not used: %s", e)
            return None, str(e)
        if ad is None:
            return self._shipped_adaptation(), None
        try:
            problem = library_problem(ad.library, {d.id for d in self.store.list_documents()})
        except Exception as e:  # the store is checked again when a question comes
            problem = f"the library could not be listed to check it ({type(e).__name__})"
        if problem:
            log.warning("adaptation %s not used: %s", ad.id, problem)
            return None, f"adaptation {ad.id} not used: {problem}"
        return ad, None

    def _shipped_adaptation(self) -> "Adaptation | None":
        """The decision layer shipped with the local judge's weights (`decision_layer.json`, fitted on
        people's questions by `training/decision_layer.py`), for a library with no adaptation of its own;
        None for another judge, whose scores it was not fitted on."""
        from .adapt import AdaptError, Adaptation

        if not self._judge_is_local():
            return None
        from .judges.local.model import WEIGHTS_DIR

        path = Path(self.settings.judge_weights or WEIGHTS_DIR) / "decision_layer.json"
        if not path.exists():
            return None
        try:
            return Adaptation.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (AdaptError, ValueError, KeyError, TypeError) as e:
            log.warning("the shipped decision layer %s is not used: %s", path, e)
            return None

    def _adaptation_mark(self) -> float | None:
        """When the home's adaptation history last changed (None: no history)."""
        try:
            return (self.settings.home / "adaptations" / "history.jsonl").stat().st_mtime_ns
        except OSError:
            return None

    def refresh_adaptation(self) -> None:
        """Read the home's adaptation again when `sourcegate adapt` (or `--undo`) changed it since: a
        running server answers with it from its next question."""
        if not self._adapt_from_home:
            return
        mark = self._adaptation_mark()
        if mark != self._adapt_mark:
            self._adapt_mark = mark
            self.adaptation, self.adaptation_problem = self._load_adaptation(True)
            log.info("adaptation in force: %s", self.adaptation.id if self.adaptation else "none")

    @property
    def gate_thresholds(self) -> GateThresholds:
        """The thresholds in force: the settings', or the adaptation's (never a looser injection threshold)."""
        return self.adaptation.gate_thresholds(self.thresholds) if self.adaptation is not None else self.thresholds

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
            # A configuration fault (a missing variable, a missing scores file) is named; other
            # messages may carry what a remote service sent back, so only the type is logged.
            detail = f": {' '.join(str(e).split())[:300]}" if isinstance(e, (ValueError, FileNotFoundError)) else ""
            log.warning("judge failed: %s%s", type(e).__name__, detail)
            name = getattr(judge, "name", self.settings.judge)
            return Judgement(model=f"{name}:unavailable",
                             results=[PassageJudgement(c.id, None, f"judge unavailable: {type(e).__name__}") for c in candidates])
        by_id = {r.id: r for r in judgement.results}
        # A passage the judge skipped is treated as a failure for that passage.
        judgement.results = [by_id.get(c.id) or PassageJudgement(c.id, None, "no judgement returned") for c in candidates]
        return judgement

    def ask(self, query: str, interface: str = "python",
            on_event: Callable[[str, dict[str, Any]], None] | None = None,
            filters: Mapping[str, Any] | None = None, caller: Caller | None = None) -> AskResult:
        """Retrieve, gate and answer one question. With `on_event(kind, data)`, the gate's decision
        is sent first ("gate": the result without its answer), then the answer as a model writes it
        ("delta", "reset", "replace"; see `Writer.write`); the complete result is returned.

        A question that asks several things is planned into parts (`plan.plan`); each part goes
        through the same stages (retrieve, judge, gate) on its own, and `plan.merge` decides the
        status and names the parts no passage answers in `missing`.

        `filters` ({"model": "HG-3", "version": "3"}, see sourcegate.filters) narrow retrieval to
        the documents whose metadata match; a key the library does not have, a bad value, or
        filters no document matches raise QueryError.

        The store's queries for one question take STORE_TIME_PER_QUESTION_S together at most (on a
        store that bounds its queries: PostgreSQL); past it, `StoreUnavailable` (a 503).

        `caller` (`sourcegate.identity.Caller`: who asks, from their token or API key) is written
        into the audit record; None where no one is named (the Python API, an open server). A
        restricted caller reads only the documents its readers rule admits (`readers.readers_rule`,
        docs/readers.md): the store trims the others out of every search before anything is ranked,
        and nothing of the answer, its errors or its notes comes from them."""
        self.refresh_adaptation()
        with store_time_budget(STORE_TIME_PER_QUESTION_S):
            return self._ask(query, interface, on_event, filters, caller)

    def _ask(self, query: str, interface: str, on_event: Callable[[str, dict[str, Any]], None] | None,
             filters: Mapping[str, Any] | None, caller: Caller | None = None) -> AskResult:
        query = self._validate(query)
        rule = readers_rule(caller, self.settings.documents_without_readers)
        chosen = self._search_filters(filters, rule)
        searched = chosen
        if searched is None and rule is not None:
            searched = SearchFilters(exclude_status=() if self.retrieval.include_archived else ("archived",), readers=rule)
        t_start = time.perf_counter()
        parts = self._plan(query, rule)
        t_plan = time.perf_counter()
        multi = len(parts) > 1
        # A question of one part is asked exactly as written; the parts of a longer one as planned.
        runs = [self._gate_part(p.question if multi else query, p, multi, searched) for p in parts]
        merged = merge([PartDecision(r.part, r.status) for r in runs])
        status = merged.status
        t_gated = time.perf_counter()

        degraded = any(r.judgement.all_failed for r in runs)
        ev, cf, excluded = self._passages(runs)
        evidence = [self._passage_out(c, j) for c, j in ev]
        conflicts = [self._passage_out(c, j) for c, j in cf]
        model = runs[0].judgement.model
        if any(r.judge_scores is not None for r in runs):  # the adaptation that answered, for every surface
            model = f"{model}+{next(r.adaptation.id for r in runs if r.adaptation is not None)}"
        advice = guidance(status, degraded, [c.gate_reason or "" for c, _ in cf], [c.gate_reason or "" for c, _ in ev])
        if on_event is not None:
            on_event("gate", {"status": status.value, "guidance": advice, "degraded": degraded,
                              "evidence": [p.model_dump() for p in evidence],
                              "conflicts": [p.model_dump() for p in conflicts],
                              "excluded": [x.model_dump() for x in excluded], "missing": merged.missing,
                              "model": model})
        if multi:
            written = self._write_parts(runs)
        else:
            written = self.writer.write(query, status, [c for c, _ in ev], [c for c, _ in cf],
                                        search_text=runs[0].bridged.text, on_event=_inert_events(on_event))
            if status is Status.INSUFFICIENT and runs[0].absent is not None:
                # say which units the library's passages are about, so the person can ask about one of them
                note = absent_note(runs[0].absent, french=T.language(query) == "fr")
                written = dataclasses.replace(written, text=f"{written.text}\n\n{note}")
        t_done = time.perf_counter()

        timings = {
            "retrieve": sum(r.retrieve_s for r in runs) * 1000,
            **{f"retrieve_{k}": sum(r.rtimes.get(k, 0.0) for r in runs) for k in runs[0].rtimes},
            "judge": sum(r.judge_s for r in runs) * 1000, "route": sum(r.route_s for r in runs) * 1000,
            "answer": (t_done - t_gated) * 1000, "total": (t_done - (t_start if multi else t_plan)) * 1000,
        }
        if multi:
            timings["plan"] = (t_plan - t_start) * 1000
        result = AskResult(
            status=status.value,
            guidance=advice,
            answer=inert_markup(written.text),
            evidence=evidence,
            conflicts=conflicts,
            excluded=excluded,
            missing=merged.missing,
            audit_id=uuid.uuid4().hex,
            model=model,
            degraded=degraded,
            timings_ms={k: round(v, 2) for k, v in timings.items()},
            writer=WriterOut(path=written.path, model=written.model, fallback_reason=written.fallback_reason),
        )
        result.writer._attempts = written.attempts
        result._parts = [{"question": r.part.question, "subject": r.part.subject, "status": r.status.value,
                          "evidence_doc_ids": list(dict.fromkeys(c.doc_id for c, _ in r.evidence)),
                          "conflict_doc_ids": list(dict.fromkeys(c.doc_id for c, _ in r.conflicts))} for r in runs]
        result._readings = {c.id: j.readings for r in runs for c, j, _, _ in r.final if j.readings}
        if self.audit is not None:
            self.audit.append(self._audit_record(query, interface, result, runs, written, chosen, caller, rule))
        return result

    def _passage_out(self, c: Candidate, j: PassageJudgement) -> PassageOut:
        cap = self.settings.max_passage_chars
        text = c.text if len(c.text) <= cap else c.text[:cap] + " [...]"
        return PassageOut(id=c.id, doc_id=c.doc_id, title=c.title, url=c.url, text=text, version=c.version,
                          status=c.status, scores=j.scores.rounded(), source_type=c.source_type, tier=c.tier, reason=c.gate_reason,
                          page=c.page, section=c.heading, link=deep_link(c.url, c.page, c.heading, c.doc_id))

    @staticmethod
    def _passages(runs: list["_PartRun"]):
        """Evidence and conflicts of every part, in the order of the parts (a passage that serves
        several parts appears once), and the passages no part kept."""
        ev = _unique([x for r in runs for x in r.evidence])
        cf = _unique([x for r in runs for x in r.conflicts])
        kept = {c.id for c, _ in ev} | {c.id for c, _ in cf}
        excluded = [ExcludedOut(id=c.id, doc_id=c.doc_id, title=c.title, reason=reason,
                                scores=j.scores.rounded() if j.scores else None, why=c.gate_why)
                    for c, j, rt, reason in _unique([x for r in runs for x in r.final])
                    if rt is Route.EXCLUDED and c.id not in kept]
        return ev, cf, excluded

    def _write_parts(self, runs: list["_PartRun"]) -> WrittenAnswer:
        """Each part written from its own passages only, under its own question; the answer cites
        per part. A model writer streams nothing here: the result carries the whole answer."""
        sections: list[tuple[str, WrittenAnswer | None]] = []
        for r in runs:
            if r.status is Status.INSUFFICIENT:
                sections.append((r.part.question, None))
            else:
                sections.append((r.part.question, self.writer.write(
                    r.part.question, r.status, [c for c, _ in r.evidence], [c for c, _ in r.conflicts],
                    search_text=r.bridged.text)))
        return assemble_parts(sections)

    def _plan(self, query: str, rule: ReadersRule | None = None) -> list[Part]:
        """The parts of the question; the library's identifiers (those of the documents the caller
        may read) are read only when the question could ask several things."""
        if not may_have_parts(query):
            return [Part(query)]
        return plan(query, self.known_identifiers(rule))

    def known_identifiers(self, rule: ReadersRule | None = None) -> frozenset[str]:
        """Identifiers in the library's document titles, ids and paths, kept for a minute so that
        documents ingested while serving are seen soon after; with `rule`, of the documents it admits
        only (a hidden document's identifiers must not change how a question is split)."""
        if rule is not None:
            try:
                docs = self._readable_documents(rule)
            except Exception as e:
                log.warning("cannot list the library's documents for the planner: %s", type(e).__name__)
                docs = []
            return frozenset(library_identifiers(t for d in docs for t in (d.title, d.id, d.source_path)))
        now = time.monotonic()
        cached = self._known_ids
        if cached is not None and now - cached[0] < KNOWN_IDS_TTL_S:
            return cached[1]
        try:
            docs = self.store.list_documents()
        except Exception as e:  # the planner then relies on the shape of identifiers alone
            log.warning("cannot list the library's documents for the planner: %s", type(e).__name__)
            docs = []
        ids = frozenset(library_identifiers(t for d in docs for t in (d.title, d.id, d.source_path)))
        self._known_ids = (now, ids)
        return ids

    def _search_filters(self, filters: Mapping[str, Any] | None,
                        rule: ReadersRule | None = None) -> SearchFilters | None:
        """The request's filters checked against the documents the caller may read (an error names
        only their keys and values), with the caller's readers rule."""
        if not filters:
            return None
        try:
            chosen = search_filters(filters, self._readable_documents(rule), self.retrieval.include_archived)
        except FilterError as e:
            raise QueryError(str(e)) from None
        return dataclasses.replace(chosen, readers=rule) if chosen is not None else None

    def filter_choices(self, caller: Caller | None = None) -> dict[str, Any]:
        """The metadata keys a question can filter on and their values, from the library's current
        documents that the caller may read (`filters.filter_choices`): `GET /v1/filters`, the web
        page's selects."""
        rule = readers_rule(caller, self.settings.documents_without_readers)
        return filter_choices(self._readable_documents(rule))

    def _readable_documents(self, rule: ReadersRule | None) -> list:
        """The library's document records that `rule` admits (all of them for None): the store's
        list kept for a minute, held to the same rule the stores apply in their queries."""
        docs = self._library_documents()
        return docs if rule is None else [d for d in docs if readable(rule, d)]

    def _hide_unreadable_twins(self, candidates: list[Candidate], rule: ReadersRule | None) -> None:
        """A passage's twins (near-copies in other documents, found at ingest over the whole library)
        that the caller may not read are dropped from what the judge reads: a hidden twin must not
        change how a readable passage is judged."""
        if rule is None:
            return
        ids = None
        for c in candidates:
            pf = c.passage_features
            twins = pf.get("twins") if isinstance(pf, dict) else None
            if not twins:
                continue
            if ids is None:
                ids = {d.id for d in self._readable_documents(rule)}
            kept = [tw for tw in twins if isinstance(tw, dict) and tw.get("doc") in ids]
            if len(kept) != len(twins):
                c.passage_features = {**pf, "twins": kept}

    def _library_documents(self) -> list:
        """The library's document records (for checking filters), kept for a minute like the
        planner's identifiers."""
        now = time.monotonic()
        cached = self._documents
        if cached is not None and now - cached[0] < KNOWN_IDS_TTL_S:
            return cached[1]
        docs = self.store.list_documents()
        self._documents = (now, docs)
        return docs

    def _gate_part(self, query: str, part: Part, multi: bool, filters: SearchFilters | None = None) -> "_PartRun":
        """Retrieve, judge and gate one part (the whole question when it has one part, exactly as a
        single question goes). In a part about one identifier, only passages that name it count."""
        t0 = time.perf_counter()
        bq = self._bridge(query)
        candidates, rtimes = self.retriever.retrieve(query, filters=filters, bridged=bq.text if bq.bridged else None)
        self._hide_unreadable_twins(candidates, filters.readers if filters is not None else None)
        t1 = time.perf_counter()
        judgement = self._run_judge(bq.text, candidates) if candidates else Judgement(model=self._judge_model_hint(), results=[])
        t2 = time.perf_counter()
        limit = self.settings.evidence_max_multi if is_multi_document(query) else self.settings.evidence_max_single
        named = None
        if multi and part.subject:
            named = [names_subject(part.subject, c.title, c.heading, c.text, c.doc_id, c.url) for c in candidates]
        # a revision asked ("in version 1 of the procedure"): its passages answer although archived or
        # superseded, and the same document's other revisions do not answer for it
        asked = named_versions(query, {c.version for c in candidates if c.version}) if candidates else []
        if asked:
            judgement, revision_named = self._read_named_revision(candidates, judgement, asked)
            named = revision_named if named is None else [a and b for a, b in zip(named, revision_named)]
        # a unit the library lacks: the question names one that no passage found names, and passages name
        # others; those are about another unit and count neither as evidence nor as conflict
        absent = absent_unit(query, [(f"{c.title}\n{c.heading or ''}", c.text) for c in candidates],
                             also=[f"{c.doc_id}\n{c.url or ''}" for c in candidates])
        if absent is not None:
            other = [not names_another_unit(f"{c.title}\n{c.heading or ''}", c.text) for c in candidates]
            named = other if named is None else [a and b for a, b in zip(named, other)]
        for c, j in zip(candidates, judgement.results):
            c.quote = j.quote  # the sentence that answers, for the extractive answer
            c.tier = self.trust.tier(c.source_type)
            # the values the quoted sentence states, compared between evidence passages by the gate
            c.values = stated_values(query, (quoted(bq.text, c, 1) or [None])[0]) if j.scores is not None else []
        ad = self.adaptation  # read once: a running server may put another in force meanwhile
        thresholds = ad.gate_thresholds(self.thresholds) if ad is not None else self.thresholds
        judge_scores, p_answer = None, None
        if ad is not None and judgement.results:
            # the library's own heads and per-question decision (`sourcegate adapt`): the gate reads the
            # adapted scores; the judge's are kept for the audit record
            judge_scores = [j.scores for j in judgement.results]
            adapted, p_answer = ad.apply(judge_scores, thresholds.evidence_min, [c.doc_id for c in candidates])
            judgement = dataclasses.replace(judgement, results=[
                dataclasses.replace(j, scores=a) for j, a in zip(judgement.results, adapted)])
        gated, status = apply_gate([(c.id, c.doc_id, j.scores) for c, j in zip(candidates, judgement.results)],
                                   thresholds, limit, subject_named=named,
                                   tiers=[c.tier for c in candidates], values=[c.values for c in candidates],
                                   current=[c.status != "archived" for c in candidates],
                                   document_injection=self._document_injection(candidates),
                                   conflict_outweighs=self.settings.gate_conflict_outweighs)
        final = [(c, j, g.route, g.reason) for c, j, g in zip(candidates, judgement.results, gated)]
        for c, g in zip(candidates, gated):
            c.gate_reason = g.reason
            c.gate_why = addressed_to_ai(c, g.reason, [x for x in candidates if x.doc_id == c.doc_id])
        t3 = time.perf_counter()
        return _PartRun(part, bq, candidates, judgement, final, status, limit, named, rtimes,
                        t1 - t0, t2 - t1, t3 - t2, absent, judge_scores, p_answer,
                        ad if judge_scores is not None else None, thresholds)

    def _read_named_revision(self, candidates: list[Candidate], judgement: Judgement,
                             asked: list[str]) -> tuple[Judgement, list[bool]]:
        """The passages of the revision a question names read as current (their superseded probability
        set to 0: they are what was asked), marked `named_revision`; and for each passage whether it may
        answer: not another revision of a document whose named revision was found."""
        carriers = {c.id for c in candidates if c.version in asked}
        families = {_document_family(c) for c in candidates if c.id in carriers}
        results = []
        for c, j in zip(candidates, judgement.results):
            if c.id in carriers and j.scores is not None and (
                    c.status == "archived" or j.scores.is_superseded > self.thresholds.superseded_max):
                j = dataclasses.replace(j, scores=j.scores.model_copy(update={"is_superseded": 0.0}))
                c.named_revision = True
            results.append(j)
        if not any(c.named_revision for c in candidates):
            return judgement, [True] * len(candidates)
        named = [c.id in carriers or _document_family(c) not in families for c in candidates]
        return dataclasses.replace(judgement, results=results), named

    def _document_injection(self, candidates: list[Candidate]) -> list[float | None] | None:
        """Each candidate's document's highest injection probability as ingest read it: the local judge's
        own reading, so it counts only beside the local judge (another judge's injection scores decide
        for the passages it judged)."""
        if not self._judge_is_local():
            return None
        return [injection_of_document(c) for c in candidates]

    def _judge_is_local(self) -> bool:
        """Whether the local judge answers (read without building a judge: one that fails to build is
        met, and reported, where it judges)."""
        if self._judge is not None:
            return getattr(self._judge, "name", None) == "local"
        return self.settings.judge == "local"

    def _bridge(self, query: str) -> BridgedQuery:
        if not self.settings.crosslingual:
            return BridgedQuery(query, None, [])
        glossary = load_glossary(str(self.settings.glossary_path) if self.settings.glossary_path else None)
        return bridge(query, self.settings.library_language, glossary)

    def _judge_model_hint(self) -> str:
        return getattr(self._judge, "name", self.settings.judge)

    def _audit_record(self, query: str, interface: str, result: AskResult, runs: list["_PartRun"],
                      written: WrittenAnswer, filters: SearchFilters | None = None,
                      caller: Caller | None = None, rule: ReadersRule | None = None) -> dict[str, Any]:
        multi = len(runs) > 1
        judgement = runs[0].judgement
        local_judge = self._judge_is_local()  # `document_injection` is its reading
        record: dict[str, Any] = {
            "audit_id": result.audit_id,
            "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "interface": interface,
            **({"caller": caller.audit()} if caller is not None else {}),
            # the readers rule the store trimmed the candidates with (docs/readers.md); replay re-routes
            # the recorded candidates, already trimmed, and does not trim again
            "readers": rule.describe() if rule is not None else {"trimmed": False},
            "query": query,
            "judge": {"backend": self.settings.judge if self._judge is None else getattr(self._judge, "name", self.settings.judge),
                      "model": judgement.model,
                      "usage": judgement.usage if not multi else [r.judgement.usage for r in runs]},
            "thresholds": (runs[0].thresholds or self.gate_thresholds).as_dict(),
            "adaptation": ({"id": used.id, "p_answer": [r.p_answer for r in runs] if multi else runs[0].p_answer}
                           if (used := next((r.adaptation for r in runs if r.adaptation is not None), None)) else None),
            "policy": {"conflict_outweighs": self.settings.gate_conflict_outweighs},
            "trust_tiers": self.trust.as_dict(),
            "retrieval": {
                "store": type(self.store).__name__, "embedder": self.embedder.id,
                **{k: getattr(self.retrieval, k) for k in ("dense_pool", "lexical_pool", "min_score", "dense_weight",
                                                            "lexical_weight", "bm25_weight", "candidates", "include_archived",
                                                            "named_versions")},
                "filters": described(filters),
                "evidence_max_single": self.settings.evidence_max_single,
                "evidence_max_multi": self.settings.evidence_max_multi,
            },
            "candidates": [
                {"id": c.id, "doc_id": c.doc_id, "version": c.version, "status": c.status,
                 "page": c.page, "section": c.heading,
                 "source_type": c.source_type, "tier": c.tier, "values": c.values or [],
                 "content_hash": c.content_hash, "retrieval_score": c.score,
                 **({"reranker_score": c.reranker_score} if c.reranker_score is not None else {}),
                 "scores": j.scores.rounded(6) if j.scores else None, "error": j.error,
                 **({"judge_scores": js.rounded(6) if (js := r.judge_scores[i]) else None}
                    if r.judge_scores is not None else {}),
                 "route": rt.value, "reason": reason,
                 **({"document_injection": d} if local_judge and (d := injection_of_document(c)) is not None else {}),
                 **({"why": c.gate_why} if c.gate_why else {}),
                 **({"part": n} if multi else {}),
                 **({"subject_named": r.named[i]} if r.named is not None else {})}
                for n, r in enumerate(runs) for i, (c, j, rt, reason) in enumerate(r.final)
            ],
            "status": result.status,
            "missing": result.missing,
            "degraded": result.degraded,
            "multi_document": is_multi_document(query),
            "evidence_limit": runs[0].limit,
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
            "query_bridge": {"language": runs[0].bridged.language, "added_terms": runs[0].bridged.added_terms},
            **({"absent_unit": {"asked": runs[0].absent.asked, "covered": runs[0].absent.covered}}
               if not multi and runs[0].absent is not None else {}),
        }
        if multi:
            # Each part was gated on its own candidates (`part` in each candidate): replay re-gates
            # them part by part and merges again.
            record["parts"] = [
                {"question": r.part.question, "subject": r.part.subject,
                 "status": r.status.value, "evidence_limit": r.limit,
                 "query_bridge": {"language": r.bridged.language, "added_terms": r.bridged.added_terms}}
                for r in runs
            ]
        if self.settings.audit_redact_query:
            # One step over the whole record: no text of the question is left in it (see redact_record).
            from .answer import extract_premise

            questions = [query, extract_premise(query), *(r.part.question for r in runs)]
            documents = [t for r in runs for c in r.candidates for t in (c.text, c.title)]
            record = redact_record(record, questions, documents)
        return record

    def close(self) -> None:
        self.store.close()
        close_writer = getattr(self.writer, "close", None)
        if close_writer is not None:
            close_writer()


_REVISION_SUFFIX = re.compile(r"(?i)[\s_.-]*(?:\(?(?:rev(?:ision)?|version|v|r)\.?\s*\d+(?:\.\d+)*\)?)$")


def _document_family(c: Candidate) -> str:
    """One document across its revisions: the doc id without a revision suffix ("PROC-P200-BRG-R1" and
    "-R2"), or, where revisions share their id, the id itself."""
    return _REVISION_SUFFIX.sub("", c.doc_id) or c.doc_id
