"""Feedback on answers, and feedback exported as labelled questions.

A person marks an answer right or wrong, names the passage that does answer (or says that no
passage answers), or says the question's premise was false. Each piece of feedback is one row,
tied to the audit record of the answer it is about (its `audit_id`, which must be in the home's
audit log): append-only (a second opinion on the same answer is another row; rows are never
updated or deleted) and never changing an answer by itself.

Where it is kept: `HOME/feedback.db` (SQLite, WAL), or a `feedback` table in the library's
PostgreSQL database when the library's store is PostgreSQL (`FeedbackStore`, `open_feedback`).

`sourcegate feedback export` turns the rows into the labelled questions `sourcegate eval` reads
(`export_labels`): the question from the audit record, the expected status and the expected and
forbidden documents, merged with a hand-written label file. Two people whose labels for the same
question disagree are listed, and that question left out: never settled silently.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import click

from .audit import AuditLog, AuditRecordDamaged
from .private_files import private_dir, private_file
from .settings import Settings

VERDICTS = ("right", "wrong", "premise_false")
ANONYMOUS = "anonymous"
ANSWER, CONFLICT, INSUFFICIENT = "answer_from_evidence", "premise_conflict", "insufficient_evidence"
# Audit ids as the audit log writes them (uuid4 hex); the REST lookup takes the same shape.
AUDIT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_NOTE_CHARS = 2000
MAX_BY_CHARS = 200
MAX_PASSAGE_ID_CHARS = 1000
FEEDBACK_BODY_HINT = ('send {"audit_id": "...", "verdict": "right" | "wrong" | "premise_false", '
                      '"passage_id": "..." or "no_passage_answers": true (optional), "note": "...", "by": "..."}')


class FeedbackError(ValueError):
    """Feedback that cannot be recorded (a 400 on REST). The message says what to change."""


class UnknownAnswer(FeedbackError):
    """Feedback on an audit id the audit log does not hold (a 404 on REST)."""


@dataclass(frozen=True)
class FeedbackRequest:
    audit_id: str
    verdict: str
    passage_id: str | None = None
    no_passage_answers: bool = False
    note: str | None = None
    by: str | None = None


@dataclass
class Feedback:
    """One stored row."""

    id: str
    audit_id: str
    time: str
    verdict: str
    passage_id: str | None
    no_passage_answers: bool
    note: str | None
    by: str
    interface: str
    # The status the answer had (from its audit record), so a list reads without the log.
    answer_status: str | None = None
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_request(body: Any) -> FeedbackRequest:
    """A feedback request from a JSON object (REST body, MCP arguments), checked for shape only;
    FeedbackError names what is wrong."""
    if not isinstance(body, dict):
        raise FeedbackError(f"expected a JSON object: {FEEDBACK_BODY_HINT}")
    audit_id = body.get("audit_id")
    if not isinstance(audit_id, str) or not audit_id.strip():
        raise FeedbackError(f"audit_id is missing: it is the audit_id field of the answer; {FEEDBACK_BODY_HINT}")
    verdict = body.get("verdict")
    if verdict not in VERDICTS:
        raise FeedbackError(f"unknown verdict {verdict!r}: use one of {', '.join(VERDICTS)}")
    passage_id = body.get("passage_id")
    if passage_id is not None and (not isinstance(passage_id, str) or not passage_id.strip()):
        raise FeedbackError("passage_id must be the id of a passage (a string such as DOC#0003-1a2b3c4d), or left out")
    no_passage = body.get("no_passage_answers", False)
    if no_passage is None:
        no_passage = False
    if not isinstance(no_passage, bool):
        raise FeedbackError("no_passage_answers must be true or false")
    for name in ("note", "by"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise FeedbackError(f"{name} must be a string")
    return FeedbackRequest(audit_id=audit_id.strip(), verdict=verdict,
                           passage_id=passage_id.strip() if passage_id else None, no_passage_answers=no_passage,
                           note=body.get("note"), by=body.get("by"))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _clean(text: str | None, limit: int) -> str | None:
    from .inert import visible_text

    if text is None:
        return None
    text = (visible_text(text) or "").strip()
    return text[:limit] or None


def cited(record: dict) -> list[dict]:
    """The candidates an answer rested on: its evidence, and its conflict passages."""
    return [c for c in record.get("candidates") or [] if isinstance(c, dict) and c.get("route") in ("evidence", "conflict")]


def _candidate(record: dict, passage_id: str) -> dict | None:
    return next((c for c in record.get("candidates") or [] if isinstance(c, dict) and c.get("id") == passage_id), None)


def record_feedback(request: FeedbackRequest, feedback: "FeedbackStore", audit: AuditLog | None, library: Any,
                    interface: str = "python", readers: Any = None) -> Feedback:
    """Check `request` against the answer's audit record and the library, and append it.

    `library` is the index store (its `get_chunks` says whether a passage exists), or a callable
    that opens it: it is only needed for a passage that was not among the answer's candidates.
    `readers` is the caller's readers rule (docs/readers.md): a passage of a document it may not
    read is answered as one the library does not hold."""
    if not AUDIT_ID.match(request.audit_id):
        raise UnknownAnswer(f"no answer with the audit id {request.audit_id[:80]!r}: audit ids are the audit_id "
                            "field of an answer (32 hexadecimal characters)")
    if audit is None:
        raise UnknownAnswer("the audit log is off (AUDIT_ENABLED=false): feedback is tied to the audit record of "
                            "an answer, and none is kept")
    try:
        record = audit.find(request.audit_id)
    except AuditRecordDamaged as e:
        raise FeedbackError(str(e)) from None
    if record is None:
        raise UnknownAnswer(f"no answer with the audit id {request.audit_id} in the audit log: feedback is given "
                            "on an answer this server (or this home) recorded")
    if request.passage_id and request.no_passage_answers:
        raise FeedbackError("give passage_id (the passage that answers) or no_passage_answers, not both")
    status = record.get("status")
    if request.verdict == "premise_false" and request.no_passage_answers:
        raise FeedbackError("premise_false says a passage contradicts what the question assumes: name it with "
                            "passage_id, or leave both out; no_passage_answers goes with right or wrong")
    if request.verdict == "right" and request.no_passage_answers and status != INSUFFICIENT:
        raise FeedbackError(f"the answer was {status}: if no passage answers, the verdict is wrong")
    if request.verdict == "right" and request.passage_id and status == INSUFFICIENT:
        raise FeedbackError("the answer said nothing in the library answers: if this passage does, the verdict is wrong")
    if request.passage_id:
        if len(request.passage_id) > MAX_PASSAGE_ID_CHARS:
            raise FeedbackError(f"passage_id is over {MAX_PASSAGE_ID_CHARS} characters: it is not a passage id")
        if _candidate(record, request.passage_id) is None:
            store = library() if callable(library) and not hasattr(library, "get_chunks") else library
            found = store.get_chunks([request.passage_id], readers) if store is not None and readers is not None \
                else store.get_chunks([request.passage_id]) if store is not None else []
            if not found:
                raise FeedbackError(f"the passage {request.passage_id!r} is not among the answer's passages and the "
                                    "library holds no passage with that id: pick one of the answer's passages "
                                    "(their `id`), or say no_passage_answers")
    row = Feedback(id=uuid.uuid4().hex, audit_id=request.audit_id, time=_now(), verdict=request.verdict,
                   passage_id=request.passage_id, no_passage_answers=request.no_passage_answers,
                   note=_clean(request.note, MAX_NOTE_CHARS), by=_clean(request.by, MAX_BY_CHARS) or ANONYMOUS,
                   interface=interface, answer_status=status if isinstance(status, str) else None)
    return feedback.append(row)


# -- storage ---------------------------------------------------------------------------------


class FeedbackStore(Protocol):
    """Where feedback rows are kept: appended, read back in the order given; never changed."""

    def append(self, row: Feedback) -> Feedback: ...

    def rows(self, audit_id: str | None = None) -> list[Feedback]: ...

    def close(self) -> None: ...


_COLUMNS = ("id", "audit_id", "time", "verdict", "passage_id", "no_passage_answers", "note", "given_by",
            "interface", "answer_status")


def _row(seq: int, values: Iterable[Any]) -> Feedback:
    v = dict(zip(_COLUMNS, values))
    return Feedback(seq=seq, id=v["id"], audit_id=v["audit_id"], time=v["time"], verdict=v["verdict"],
                    passage_id=v["passage_id"], no_passage_answers=bool(v["no_passage_answers"]), note=v["note"],
                    by=v["given_by"], interface=v["interface"], answer_status=v["answer_status"])


# Named migrations, applied once each (schema_migrations), as the index stores do.
_SQLITE_MIGRATIONS = [
    ("0001_feedback", [
        """CREATE TABLE feedback (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, audit_id TEXT NOT NULL,
            time TEXT NOT NULL, verdict TEXT NOT NULL, passage_id TEXT, no_passage_answers INTEGER NOT NULL,
            note TEXT, given_by TEXT NOT NULL, interface TEXT NOT NULL, answer_status TEXT)""",
        "CREATE INDEX feedback_audit_id ON feedback (audit_id)",
        # append-only: a row once written stays as written
        "CREATE TRIGGER feedback_no_update BEFORE UPDATE ON feedback BEGIN SELECT RAISE(ABORT, 'feedback is append-only'); END",
        "CREATE TRIGGER feedback_no_delete BEFORE DELETE ON feedback BEGIN SELECT RAISE(ABORT, 'feedback is append-only'); END",
    ]),
]


class SqliteFeedbackStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        private_dir(self.path.parent)
        private_file(self.path)  # it names who said what about which answer
        self._conn = sqlite3.connect(self.path, timeout=10, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._migrate()

    def _migrate(self) -> None:
        with self._lock:
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                c.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
                done = {r[0] for r in c.execute("SELECT name FROM schema_migrations")}
                for name, statements in _SQLITE_MIGRATIONS:
                    if name not in done:
                        for sql in statements:
                            c.execute(sql)
                        c.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, _now()))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise

    def append(self, row: Feedback) -> Feedback:
        values = (row.id, row.audit_id, row.time, row.verdict, row.passage_id, int(row.no_passage_answers), row.note,
                  row.by, row.interface, row.answer_status)
        with self._lock:
            cur = self._conn.execute(f"INSERT INTO feedback ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                                     values)
            row.seq = cur.lastrowid
        return row

    def rows(self, audit_id: str | None = None) -> list[Feedback]:
        sql = f"SELECT seq, {', '.join(_COLUMNS)} FROM feedback"
        args: tuple = ()
        if audit_id is not None:
            sql, args = sql + " WHERE audit_id = ?", (audit_id,)
        with self._lock:
            return [_row(r[0], r[1:]) for r in self._conn.execute(sql + " ORDER BY seq", args)]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


_PG_LOCK = 0x66656564  # "feed": serialises creating the table between processes that start together


class PostgresFeedbackStore:
    """The `feedback` table in the library's PostgreSQL database (created if missing), reached with
    the store's own URL; one short connection per call (feedback is rare next to questions)."""

    def __init__(self, url: str):
        try:
            import psycopg  # noqa: F401
        except ImportError as e:
            from .store.postgres import INSTALL_HINT

            raise ImportError(INSTALL_HINT) from e
        from .store import redact_url

        self.url = url
        self.location = redact_url(url)
        with self._connect() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK,))
            conn.execute("""CREATE TABLE IF NOT EXISTS feedback (
                seq bigserial PRIMARY KEY, id text NOT NULL UNIQUE, audit_id text NOT NULL, time text NOT NULL,
                verdict text NOT NULL, passage_id text, no_passage_answers boolean NOT NULL, note text,
                given_by text NOT NULL, interface text NOT NULL, answer_status text)""")
            conn.execute("CREATE INDEX IF NOT EXISTS feedback_audit_id ON feedback (audit_id)")
            conn.execute("""CREATE OR REPLACE FUNCTION feedback_append_only() RETURNS trigger LANGUAGE plpgsql AS
                $$ BEGIN RAISE EXCEPTION 'feedback is append-only'; END $$""")
            conn.execute("""CREATE OR REPLACE TRIGGER feedback_append_only BEFORE UPDATE OR DELETE ON feedback
                FOR EACH ROW EXECUTE FUNCTION feedback_append_only()""")

    def _connect(self):
        import psycopg

        from .store.postgres import _tcp_options

        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=10, **_tcp_options(self.url))
        except psycopg.Error as e:
            from .store.base import StoreUnavailable

            raise StoreUnavailable(f"cannot use PostgreSQL at {self.location} for feedback now: {type(e).__name__}") from None

    def append(self, row: Feedback) -> Feedback:
        values = (row.id, row.audit_id, row.time, row.verdict, row.passage_id, row.no_passage_answers, row.note,
                  row.by, row.interface, row.answer_status)
        with self._connect() as conn:
            row.seq = conn.execute(f"INSERT INTO feedback ({', '.join(_COLUMNS)}) VALUES "
                                   f"({', '.join(['%s'] * len(_COLUMNS))}) RETURNING seq", values).fetchone()[0]
        return row

    def rows(self, audit_id: str | None = None) -> list[Feedback]:
        sql = f"SELECT seq, {', '.join(_COLUMNS)} FROM feedback"
        args: tuple = ()
        if audit_id is not None:
            sql, args = sql + " WHERE audit_id = %s", (audit_id,)
        with self._connect() as conn:
            return [_row(r[0], r[1:]) for r in conn.execute(sql + " ORDER BY seq", args).fetchall()]

    def close(self) -> None:
        pass


def feedback_location(settings: Settings) -> str:
    """Where `open_feedback` keeps feedback, for a person: a file, or the database without its password."""
    from .store import redact_url, store_kind

    if store_kind(settings.store_location) == "postgresql":
        return f"the feedback table of {redact_url(settings.store_location)}"
    return str((settings.home / "feedback.db").expanduser().absolute())


def open_feedback(settings: Settings) -> FeedbackStore:
    """PostgreSQL where the library's store is PostgreSQL, else `HOME/feedback.db` (an Azure AI
    Search library keeps its feedback in the home too)."""
    from .store import store_kind

    if store_kind(settings.store_location) == "postgresql":
        return PostgresFeedbackStore(settings.store_location)
    return SqliteFeedbackStore(settings.home.expanduser() / "feedback.db")


# -- the library's fingerprint ---------------------------------------------------------------


def passage_ids(store: Any) -> list[str]:
    """Every passage id of the library, sorted: the store's own list where it has one, else read
    document by document."""
    if hasattr(store, "passage_ids"):
        return sorted(store.passage_ids())
    ids: list[str] = []
    for doc in store.list_documents():
        exported = store.export_document(doc.id)
        if exported is not None:
            ids.extend(c.id for c in exported.chunks)
    return sorted(ids)


def library_fingerprint(store: Any) -> dict[str, Any]:
    """What identifies a library's index: its document and passage counts and the SHA-256 of its
    sorted passage ids (one per line). Passage ids hold a digest of their text, so the same
    documents ingested the same way give the same fingerprint, and any change to a passage
    changes it. Written into exported labels (`library`); `sourcegate adapt` compares it."""
    ids = passage_ids(store)
    digest = hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()
    return {"documents": len(store.list_documents()), "passages": len(ids), "sha256": digest}


# -- export ----------------------------------------------------------------------------------


@dataclass
class Label:
    """One person's label for one question, before merging."""

    query: str
    expected_status: str
    expected_sources: list[str]
    forbidden_sources: list[str] = field(default_factory=list)
    expected_passages: list[str] = field(default_factory=list)
    forbidden_passages: list[str] = field(default_factory=list)
    by: str = ANONYMOUS
    # Who counts as one person: `by`, or the row itself for anonymous feedback and unsigned file lines.
    person: str = ANONYMOUS
    origin: str = ""  # "feedback <id>" or "FILE:LINE"
    audit_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # a hand-written line's other fields (must_state, kind, ...)
    # A hand-written line with "final": true settles its question: other people's labels give way to it.
    final: bool = False

    @property
    def decision(self) -> tuple[str, frozenset[str]]:
        return self.expected_status, frozenset(self.expected_sources)

    def describe(self) -> dict[str, Any]:
        return {"by": self.by, "origin": self.origin, "expected_status": self.expected_status,
                "expected_sources": self.expected_sources, **({"audit_id": self.audit_id} if self.audit_id else {})}


@dataclass
class Export:
    labels: list[dict[str, Any]]
    conflicts: list[dict[str, Any]]
    library: dict[str, Any]
    feedback_rows: int = 0
    file_labels: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


class LabelError(ValueError):
    """Labels that cannot be exported: a file in the wrong format, or a passage or document the
    library does not hold. The message names the file and line, or the passage."""


def _key(query: str) -> str:
    return " ".join(query.casefold().split())


def label_from_feedback(row: Feedback, record: dict, doc_of: dict[str, str]) -> Label | str:
    """The label one row of feedback gives its answer's question, or why it gives none."""
    query = record.get("query")
    if not isinstance(query, str):
        return "redacted"
    was = [c for c in cited(record)]
    cited_ids = [c["id"] for c in was if isinstance(c.get("id"), str)]
    cited_docs = list(dict.fromkeys(c["doc_id"] for c in was if isinstance(c.get("doc_id"), str)))
    person = row.by if row.by != ANONYMOUS else f"anonymous feedback {row.id}"
    base = dict(query=query, by=row.by, person=person, origin=f"feedback {row.id}", audit_id=row.audit_id)
    passage_doc = doc_of.get(row.passage_id) if row.passage_id else None
    status = record.get("status")
    if row.no_passage_answers:
        return Label(expected_status=INSUFFICIENT, expected_sources=[], forbidden_sources=cited_docs,
                     forbidden_passages=cited_ids, **base)
    if row.verdict == "premise_false":
        if row.passage_id:
            return Label(expected_status=CONFLICT, expected_sources=[passage_doc], expected_passages=[row.passage_id],
                         **base)
        docs = list(dict.fromkeys(c["doc_id"] for c in was if c.get("route") == "conflict"))
        ids = [c["id"] for c in was if c.get("route") == "conflict"]
        return Label(expected_status=CONFLICT, expected_sources=docs, expected_passages=ids, **base)
    if row.verdict == "right":
        if status not in (ANSWER, CONFLICT, INSUFFICIENT):
            return "no status in the audit record"
        if row.passage_id:
            return Label(expected_status=status, expected_sources=[passage_doc], expected_passages=[row.passage_id],
                         **base)
        return Label(expected_status=status, expected_sources=cited_docs if status != INSUFFICIENT else [],
                     expected_passages=cited_ids if status != INSUFFICIENT else [], **base)
    # wrong
    if row.passage_id:
        forbidden = [c for c in was if c.get("id") != row.passage_id and c.get("doc_id") != passage_doc]
        return Label(expected_status=ANSWER, expected_sources=[passage_doc], expected_passages=[row.passage_id],
                     forbidden_sources=list(dict.fromkeys(c["doc_id"] for c in forbidden)),
                     forbidden_passages=[c["id"] for c in was if c.get("id") != row.passage_id], **base)
    return "wrong without a passage"


SKIP_REASONS = {
    "redacted": "the audit log keeps only a hash of the question (AUDIT_REDACT_QUERY=true), so it cannot be "
                "asked again",
    "no record": "the audit record is no longer in the audit log",
    "wrong without a passage": "marked wrong without naming the passage that answers or saying that none does: "
                               "it says what is wrong, not what is right",
    "no status in the audit record": "the audit record has no status",
}


def read_label_file(path: Path) -> list[Label]:
    """A hand-written label file in `sourcegate eval`'s format, each line checked; LabelError
    names the file and line of the first that is not."""
    from .evaluation.cases import load_cases

    raw: list[tuple[int, dict]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise LabelError(f"{path}: not UTF-8 text (byte {e.start}): a label file holds one JSON object per line") from None
    except OSError as e:
        raise LabelError(f"{path}: cannot be read: {e.strerror or e}") from None
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:
            raise LabelError(f"{path}:{n}: not JSON ({getattr(e, 'msg', type(e).__name__)}): a label file holds one "
                             "JSON object per line, as `sourcegate eval` reads (see `sourcegate eval --help`)") from None
        if not isinstance(obj, dict):
            raise LabelError(f"{path}:{n}: a JSON {type(obj).__name__}, not an object: each line is one labelled "
                             'question, {"query": ..., "expected_status": ..., "expected_sources": [...]}')
        if not isinstance(obj.get("query"), str) or not obj["query"].strip():
            raise LabelError(f"{path}:{n}: each line needs 'query' (the question, a string)")
        for name in ("expected_sources", "forbidden_sources", "expected_passages", "forbidden_passages"):
            value = obj.get(name)
            if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise LabelError(f"{path}:{n}: {name} must be a list of ids (strings)")
        if obj.get("by") is not None and not isinstance(obj["by"], str):
            raise LabelError(f"{path}:{n}: by must be a string (who wrote the label)")
        raw.append((n, obj))
    try:
        cases = load_cases(path)
    except (ValueError, TypeError, AttributeError) as e:
        raise LabelError(str(e) if str(e).startswith(str(path)) else f"{path}: {e}") from None
    if not raw:
        raise LabelError(f"{path}: holds no labelled question")
    labels = []
    known = {"query", "expected_status", "expected_sources", "forbidden_sources", "expected_passages",
             "forbidden_passages", "by", "final", "library", "labelled_by", "audit_ids"}
    for (n, obj), case in zip(raw, cases):
        by = obj.get("by") or f"{path.name}"
        labels.append(Label(
            query=case.query, expected_status=case.expected_status, expected_sources=list(case.expected_sources),
            forbidden_sources=list(case.forbidden_sources), expected_passages=list(obj.get("expected_passages") or []),
            forbidden_passages=list(obj.get("forbidden_passages") or []), by=by,
            person=obj["by"] if obj.get("by") else f"{path}:{n}", origin=f"{path}:{n}",
            audit_id=obj.get("audit_id") if isinstance(obj.get("audit_id"), str) else None,
            final=obj.get("final") is True, extra={k: v for k, v in obj.items() if k not in known}))
    return labels


def _check_in_library(labels: list[Label], store: Any, known_passages: set[str]) -> None:
    """LabelError naming every document and passage a label names that the library does not hold."""
    docs = {d.id for d in store.list_documents()}
    missing: list[str] = []
    for lab in labels:
        for d in lab.expected_sources + lab.forbidden_sources:
            if d not in docs:
                missing.append(f"the document {d!r} ({lab.origin})")
        for p in lab.expected_passages + lab.forbidden_passages:
            if p not in known_passages:
                missing.append(f"the passage {p!r} ({lab.origin})")
    if missing:
        shown = "; ".join(dict.fromkeys(missing))
        raise LabelError(f"the library does not hold {shown}: fix or remove those labels (`sourcegate status "
                         "--documents` lists the documents), or ingest the documents they name (labels from "
                         "feedback name the passages of the index the answer was given from)")


def export_labels(rows: list[Feedback], audit: AuditLog | None, store: Any, merge: list[Path] = ()) -> Export:
    """Feedback rows (and hand-written label files) as labelled questions, one per question; a
    question two people label differently is left out and listed in `conflicts`."""
    known_passages = set(passage_ids(store))
    library = library_fingerprint(store)
    skipped: dict[str, int] = {}
    labels: list[Label] = []
    records: dict[str, dict | None] = {}
    for row in rows:
        if row.audit_id not in records:
            try:
                records[row.audit_id] = audit.find(row.audit_id) if audit is not None else None
            except AuditRecordDamaged:
                records[row.audit_id] = None
        record = records[row.audit_id]
        if record is None:
            skipped["no record"] = skipped.get("no record", 0) + 1
            continue
        doc_of = {c["id"]: c["doc_id"] for c in record.get("candidates") or []
                  if isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("doc_id"), str)}
        if row.passage_id and row.passage_id not in doc_of:
            found = store.get_chunks([row.passage_id])
            if not found:
                raise LabelError(f"the library does not hold the passage {row.passage_id!r} (feedback {row.id} on "
                                 f"answer {row.audit_id}): it was re-ingested or removed since; the feedback stays "
                                 "stored, but cannot be exported as a label")
            doc_of[row.passage_id] = found[0].doc_id
        made = label_from_feedback(row, record, doc_of)
        if isinstance(made, str):
            skipped[made] = skipped.get(made, 0) + 1
            continue
        labels.append(made)
    file_labels = 0
    for path in merge:
        read = read_label_file(Path(path))
        file_labels += len(read)
        labels.extend(read)
    _check_in_library(labels, store, known_passages)

    by_question: dict[str, list[Label]] = {}
    for lab in labels:
        by_question.setdefault(_key(lab.query), []).append(lab)
    out: list[dict[str, Any]] = []
    conflicts: list[dict[str, Any]] = []
    for group in by_question.values():
        # one person's latest label for a question stands for them (a second opinion corrects the first)
        latest: dict[str, Label] = {}
        for lab in group:
            latest.pop(lab.person, None)
            latest[lab.person] = lab
        chosen = list(latest.values())
        final = [lab for lab in chosen if lab.final]
        if final:  # a hand-written line marked final settles the question
            chosen = final
        if len({lab.decision for lab in chosen}) > 1:
            conflicts.append({"query": chosen[0].query, "labels": [lab.describe() for lab in chosen]})
            continue
        out.append(_merged(chosen, library))
    return Export(labels=out, conflicts=conflicts, library=library, feedback_rows=len(rows), file_labels=file_labels,
                  skipped=skipped)


def _merged(labels: list[Label], library: dict[str, Any]) -> dict[str, Any]:
    """One question's labels that agree, as one line of `sourcegate eval`'s format."""
    first = labels[0]
    expected = list(dict.fromkeys(d for lab in labels for d in lab.expected_sources))
    forbidden = [d for d in dict.fromkeys(d for lab in labels for d in lab.forbidden_sources) if d not in expected]
    exp_passages = list(dict.fromkeys(p for lab in labels for p in lab.expected_passages))
    forb_passages = [p for p in dict.fromkeys(p for lab in labels for p in lab.forbidden_passages)
                     if p not in exp_passages]
    extra: dict[str, Any] = {}
    for lab in labels:
        for k, v in lab.extra.items():
            extra.setdefault(k, v)
    audit_ids = list(dict.fromkeys(lab.audit_id for lab in labels if lab.audit_id))
    line = {**extra, "query": first.query, "expected_status": first.expected_status, "expected_sources": expected,
            "forbidden_sources": forbidden, "expected_passages": exp_passages, "forbidden_passages": forb_passages}
    line.setdefault("kind", "feedback")
    line["audit_id"] = audit_ids[0] if audit_ids else None
    if len(audit_ids) > 1:
        line["audit_ids"] = audit_ids
    line["labelled_by"] = list(dict.fromkeys(lab.by for lab in labels))
    line["library"] = library
    return line


# -- commands --------------------------------------------------------------------------------


def _echo(message: object = "", err: bool = False) -> None:
    from .inert import terminal_text

    click.echo(terminal_text(str(message)), err=err)


def _settings(ctx: click.Context) -> Settings:
    return ctx.find_root().obj["settings"]


def _audit(settings: Settings) -> AuditLog | None:
    return AuditLog(settings.audit_path, settings.audit_key) if settings.audit_enabled else None


@click.group("feedback")
def feedback_group() -> None:
    """Feedback on answers (right, wrong, the passage that answers), and its export as labelled questions."""


@feedback_group.command("add")
@click.argument("audit_id")
@click.option("--right", "verdict", flag_value="right", help="The answer was right.")
@click.option("--wrong", "verdict", flag_value="wrong", help="The answer was wrong.")
@click.option("--premise-false", "verdict", flag_value="premise_false",
              help="The question rests on a false premise.")
@click.option("--passage", "passage_id", metavar="ID", help="The passage that does answer (or contradicts the premise).")
@click.option("--no-passage", "no_passage", is_flag=True, help="No passage of the library answers the question.")
@click.option("--note", help="A free-text note.")
@click.option("--by", help=f"Who gives it [default: {ANONYMOUS}].")
@click.option("--json", "as_json", is_flag=True, help="Print the stored row as JSON.")
@click.pass_context
def feedback_add(ctx: click.Context, audit_id: str, verdict: str | None, passage_id: str | None, no_passage: bool,
                 note: str | None, by: str | None, as_json: bool) -> None:
    """Record feedback on the answer whose audit id is AUDIT_ID (printed with every answer)."""
    if verdict is None:
        raise click.UsageError("say what the answer was: --right, --wrong or --premise-false")
    settings = _settings(ctx)
    request = FeedbackRequest(audit_id=audit_id, verdict=verdict, passage_id=passage_id,
                              no_passage_answers=no_passage, note=note, by=by)
    opened: list[Any] = []

    def library():
        from .cli import _library

        opened.append(_library(settings))
        return opened[-1]

    store = open_feedback(settings)
    try:
        row = record_feedback(request, store, _audit(settings), library, interface="cli")
    except UnknownAnswer as e:
        raise click.ClickException(f"{e} (the audit log: {settings.audit_path})") from None
    except FeedbackError as e:
        raise click.ClickException(str(e)) from None
    finally:
        store.close()
        for s in opened:
            s.close()
    if as_json:
        _echo(json.dumps(row.to_json(), ensure_ascii=False))
    else:
        _echo(f"recorded {row.id}: {row.verdict} on answer {row.audit_id}"
              + (f", passage {row.passage_id}" if row.passage_id else "")
              + (", no passage answers" if row.no_passage_answers else "") + f", by {row.by}")


@feedback_group.command("list")
@click.option("--audit-id", help="Only the feedback on this answer.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row.")
@click.pass_context
def feedback_list(ctx: click.Context, audit_id: str | None, as_json: bool) -> None:
    """Every piece of feedback, oldest first."""
    from .tables import format_table

    settings = _settings(ctx)
    store = open_feedback(settings)
    try:
        rows = store.rows(audit_id)
    finally:
        store.close()
    if as_json:
        for r in rows:
            _echo(json.dumps(r.to_json(), ensure_ascii=False))
        return
    if not rows:
        _echo(f"no feedback yet ({feedback_location(settings)})")
        return
    _echo(format_table(["time", "answer", "status", "verdict", "passage", "by", "note"],
                       [[r.time, r.audit_id, r.answer_status or "-", r.verdict,
                         "(none answers)" if r.no_passage_answers else (r.passage_id or "-"), r.by, r.note or ""]
                        for r in rows]))


@feedback_group.command("export")
@click.option("--merge", "merge", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              metavar="LABELS.jsonl", help="A hand-written label file (the format `sourcegate eval` reads) to merge; repeatable.")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Write the labelled questions here [default: standard output].")
@click.option("--conflicts", "conflicts_path", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Write the disagreeing labels here as JSON [default: OUT with .conflicts.json, when --out is given].")
@click.pass_context
def feedback_export(ctx: click.Context, merge: tuple[Path, ...], out: Path | None, conflicts_path: Path | None) -> None:
    """Write the feedback as labelled questions, in the format `sourcegate eval` (and `sourcegate
    adapt`) reads: one JSON object per line with the question (from the answer's audit record),
    expected_status, expected_sources and forbidden_sources (document ids), expected_passages and
    forbidden_passages (passage ids), audit_id, labelled_by and the library's fingerprint.

    \b
      right                 the status the answer had, from the passages it cited (or the one named)
      wrong + --passage     answer_from_evidence from that passage; the passages cited are forbidden
      no passage answers    insufficient_evidence; the passages cited are forbidden
      premise false         premise_conflict (on the passage named, or those the answer cited as conflicts)

    Questions two people label differently are left out and listed (standard error, and the
    conflicts file); a line of a --merge file marked "final": true settles its question. A label
    naming a document or passage the library does not hold is an error."""
    settings = _settings(ctx)
    from .cli import _library

    library = _library(settings)
    store = open_feedback(settings)
    try:
        result = export_labels(store.rows(), _audit(settings), library, list(merge))
    except LabelError as e:
        raise click.ClickException(str(e)) from None
    finally:
        store.close()
        library.close()
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in result.labels)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)
    if conflicts_path is None and out is not None:
        conflicts_path = out.with_name(out.stem + ".conflicts.json")
    if conflicts_path is not None and (result.conflicts or conflicts_path.exists()):
        conflicts_path.write_text(json.dumps({"conflicts": result.conflicts}, indent=2, ensure_ascii=False) + "\n",
                                  encoding="utf-8")
    for c in result.conflicts:
        who = "; ".join(f"{lab['by']} ({lab['origin']}): {lab['expected_status']}"
                        + (f" from {', '.join(lab['expected_sources'])}" if lab["expected_sources"] else "")
                        for lab in c["labels"])
        _echo(f"conflict, left out: {c['query']!r}: {who}", err=True)
    where = f" to {out}" if out is not None else ""
    _echo(f"{len(result.labels)} labelled questions written{where} (from {result.feedback_rows} feedback rows"
          + (f" and {result.file_labels} hand-written labels" if merge else "") + ")", err=True)
    for reason, n in result.skipped.items():
        _echo(f"skipped {n} feedback row(s): {SKIP_REASONS.get(reason, reason)}", err=True)
    if result.conflicts:
        _echo(f"{len(result.conflicts)} question(s) with disagreeing labels left out"
              + (f": listed in {conflicts_path}" if conflicts_path is not None else "")
              + '; settle each with a line of your own marked "final": true in a file passed with --merge',
              err=True)
