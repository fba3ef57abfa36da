"""Append-only audit log: one canonical-JSON line per answer, chained by hash.

Each record carries `seq` (its place in the log), `prev_hash` (the SHA-256 of the exact bytes of
the line before it, `genesis` for the first line) and `record_hash` (SHA-256 of the record's
canonical JSON without `record_hash`, or HMAC-SHA256 under `AUDIT_HMAC_KEY`). An edit, a deleted,
reordered, duplicated or inserted line, or a damaged byte breaks the chain at the first line
concerned; `verify_chain` (the `sourcegate audit verify` command) names it. What the chain cannot
show (a truncated tail, a rewrite by whoever holds the key) is in docs/serving.md.

Records hold user questions. Set AUDIT_REDACT_QUERY=true to store a hash of the question instead
of its text, or AUDIT_ENABLED=false to turn the log off.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import re
import sqlite3
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .private_files import private_dir, private_file

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore

HASH_FIELD = "record_hash"
PREV_FIELD = "prev_hash"
SEQ_FIELD = "seq"
GENESIS = "genesis"  # the prev_hash of a log's first line
SHA_PREFIX = "sha256:"
HMAC_PREFIX = "hmac-sha256:"
# Reading the last line back: records are a few kB; a line is read backwards in steps this big.
_TAIL_STEP = 64 * 1024


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def record_hash(record: dict, key: bytes | None = None) -> str:
    """SHA-256 of the record's canonical JSON (without `record_hash`), or its HMAC under `key`."""
    body = canonical_json({k: v for k, v in record.items() if k != HASH_FIELD}).encode("utf-8")
    if key:
        return HMAC_PREFIX + hmac.new(key, body, hashlib.sha256).hexdigest()
    return SHA_PREFIX + hashlib.sha256(body).hexdigest()


def line_hash(line: bytes) -> str:
    """The link to a line: SHA-256 of its exact bytes (without the newline)."""
    return SHA_PREFIX + hashlib.sha256(line).hexdigest()


def seal(record: dict, key: bytes | None = None) -> dict:
    record = {k: v for k, v in record.items() if k != HASH_FIELD}
    record[HASH_FIELD] = record_hash(record, key)
    return record


def hash_problem(record: dict, key: bytes | None = None) -> str | None:
    """Why the record's own hash does not check out, or None when it does."""
    stored = record.get(HASH_FIELD)
    if not isinstance(stored, str):
        return f"no {HASH_FIELD}: not a sealed audit record"
    if stored.startswith(HMAC_PREFIX):
        if not key:
            return f"{HASH_FIELD} is keyed (HMAC): set AUDIT_HMAC_KEY to verify it"
        ok = hmac.compare_digest(stored, record_hash(record, key))
    elif key:
        # With a key every record is keyed: a plain hash is what anyone without the key can write.
        return (f"{HASH_FIELD} is plain SHA-256 while AUDIT_HMAC_KEY is set: the record was written "
                "or rewritten without the key")
    else:
        ok = stored == record_hash(record)
    return None if ok else f"{HASH_FIELD} does not match: the record was edited"


def verify(record: dict, key: bytes | None = None) -> bool:
    return hash_problem(record, key) is None


class AuditWriteError(OSError):
    """The audit log cannot be written. The message names the file, the reason and the fix; an
    answer that cannot be recorded is not given."""

    def __init__(self, path: Path, error: OSError):
        reason = error.strerror or type(error).__name__
        if error.errno == errno.ENOSPC:
            fix = "free space on that disk or point AUDIT_LOG_PATH to another one"
        elif error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            fix = "make it writable by this user or set AUDIT_LOG_PATH to a writable file"
        else:
            fix = "fix the path or set AUDIT_LOG_PATH to a writable file (AUDIT_ENABLED=false turns the log off)"
        self.message = f"cannot write the audit log {path}: {reason}: {fix}"
        super().__init__(error.errno, self.message)
        self.path = path

    def __str__(self) -> str:
        return self.message


class AuditRecordDamaged(Exception):
    """The record exists but its line cannot be read back (a damaged byte, broken JSON)."""


def redact_query(query: str) -> dict:
    return {"redacted": True, "sha256": hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()}


_WORD = re.compile(r"\w+")
REDACTED_TEXT = "[question]"
# Values that identify a record or a passage: kept as they are (they are the library's, not the user's).
_ID_KEYS = frozenset({"audit_id", "id", "doc_id", "content_hash", "sha256", "record_hash", "prev_hash", "user_id"})


# Words too common to say anything of a question on their own (kept where they stand alone).
_COMMON_WORDS = frozenset("""a an and are as at be by can do does for from how i if in is it its my of on or our
should so that the their then there this to was we what when where which who why will with you your
le la les un une des du de d l et ou est en au aux pour par sur avec dans que qui quoi comment combien il
elle on ne pas se sa son ses ce cette ces y je nous vous faut der die das und ist el los las y es""".split())


def _bigrams(text: str) -> set[tuple[str, str]]:
    words = [w.lower() for w in _WORD.findall(text)]
    return set(zip(words, words[1:]))


def redact_record(record: dict, questions: list[str], documents: list[str]) -> dict:
    """The record with no text of the user's question in it, in one step over the whole record:
    `query`, each part's `question` and `missing` become hashes (`redact_query`), the terms the
    terminology bridge added (translations of the question's words) a hash of them, and in every
    other string (the answer, the writer's reasons, ...) each run of words that follow each other in
    a question (`questions`: the question, its parts, its premise), but not in the documents quoted
    (`documents`: the passages' texts and titles), becomes `[question]`, and so does each question
    quoted whole, and in free text each word of the question the documents never use (common words
    aside) or a piece of one; a question of one word is removed wherever it stands alone. Identifiers (audit, passage, document ids, hashes) stay."""
    question_pairs = set().union(*(_bigrams(q) for q in questions)) if questions else set()
    document_pairs = set().union(*(_bigrams(d) for d in documents)) if documents else set()
    private = question_pairs - document_pairs
    single = {q.strip().lower() for q in questions if len(_WORD.findall(q)) == 1}
    # In free text (a string with a space: not a code such as a route or a status), a word of the
    # question that the documents never use, or a piece of one (a quote cut mid-word), goes too.
    document_words = {w.lower() for d in documents for w in _WORD.findall(d)}
    own_words = {w.lower() for q in questions for w in _WORD.findall(q)} - document_words - _COMMON_WORDS

    def own(word: str) -> bool:
        return word in own_words or (len(word) >= 3 and word not in document_words
                                     and any(w.startswith(word) or w.endswith(word) for w in own_words))

    exact = sorted({q.strip() for q in questions if q and q.strip()}, key=len, reverse=True)

    def scrub(text: str) -> str:
        for q in exact:  # the question, a part or the premise quoted as it was asked
            text = text.replace(q, REDACTED_TEXT)
        words = list(_WORD.finditer(text))
        marked = [False] * len(words)
        free_text = " " in text
        for i in range(len(words)):
            if words[i].group(0).lower() in single or (free_text and own(words[i].group(0).lower())):
                marked[i] = True
            if i + 1 < len(words) and (words[i].group(0).lower(), words[i + 1].group(0).lower()) in private:
                marked[i] = marked[i + 1] = True
        out, pos, i = [], 0, 0
        while i < len(words):
            if not marked[i]:
                i += 1
                continue
            j = i
            while j + 1 < len(words) and marked[j + 1]:
                j += 1
            out.append(text[pos:words[i].start()])
            out.append(REDACTED_TEXT)
            pos = words[j].end()
            i = j + 1
        out.append(text[pos:])
        return "".join(out)

    def walk(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            if value.get("redacted") is True:
                return value
            out = {}
            for k, v in value.items():
                if k == "query_bridge" and isinstance(v, dict) and v.get("added_terms"):
                    terms = [t for t in v["added_terms"] if isinstance(t, str)]
                    out[k] = {**walk(v, k), "added_terms": redact_query(" ".join(terms))}
                else:
                    out[k] = walk(v, k)
            return out
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str) and key not in _ID_KEYS:
            return scrub(value)
        return value

    rec = dict(record)
    if isinstance(rec.get("query"), str):
        rec["query"] = redact_query(rec["query"])
    if isinstance(rec.get("missing"), list):
        rec["missing"] = [redact_query(m) if isinstance(m, str) else m for m in rec["missing"]]
    if isinstance(rec.get("parts"), list):
        rec["parts"] = [{**p, "question": redact_query(p["question"])}
                        if isinstance(p, dict) and isinstance(p.get("question"), str) else p for p in rec["parts"]]
    absent = rec.get("absent_unit")
    if isinstance(absent, dict) and isinstance(absent.get("asked"), list):  # the units the question named
        rec["absent_unit"] = {**absent, "asked": [redact_query(a) if isinstance(a, str) else a for a in absent["asked"]]}
    return walk(rec)


# Below this much free space on the log's disk, the log counts as unwritable (a record is a few kB).
MIN_FREE_BYTES = 64 * 1024


def _free_bytes(fd: int) -> int:
    """Free space on the file system of `fd` for this user (root may use the reserved blocks)."""
    try:
        st = os.fstatvfs(fd)
    except OSError:
        return MIN_FREE_BYTES
    if st.f_blocks == 0:  # not a disk (a device such as /dev/null)
        return MIN_FREE_BYTES
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize


def _last_line(fd: int, size: int) -> bytes | None:
    """The last complete line of the file open at `fd` (without its newline), or None if empty."""
    if size == 0:
        return None
    end = size
    if os.pread(fd, 1, end - 1) == b"\n":
        end -= 1
    chunks: list[bytes] = []
    pos = end
    while pos > 0:
        start = max(0, pos - _TAIL_STEP)
        chunk = os.pread(fd, pos - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            chunks.append(chunk[cut + 1:])
            break
        chunks.append(chunk)
        pos = start
    return b"".join(reversed(chunks))


def _chain_fields(last: bytes | None) -> dict:
    """`seq` and `prev_hash` of the record that follows the line `last`."""
    if last is None:
        return {SEQ_FIELD: 1, PREV_FIELD: GENESIS}
    seq = 1
    try:
        prev = json.loads(last.decode("utf-8"))
        if isinstance(prev, dict) and isinstance(prev.get(SEQ_FIELD), int):
            seq = prev[SEQ_FIELD] + 1
    except (UnicodeDecodeError, ValueError, RecursionError):
        pass  # a damaged last line: the chain still links to its bytes, and verify names it
    return {SEQ_FIELD: seq, PREV_FIELD: line_hash(last)}


class AuditLog:
    """Appends whole lines: a process-wide lock for threads and an advisory file lock for
    processes sharing the file, with one write() of the whole line under O_APPEND. The last line
    is read under the same lock, so the chain stays linear whoever writes."""

    def __init__(self, path: str | Path, key: bytes | None = None):
        self.path = Path(path)
        self.key = key or None
        self._lock = threading.Lock()
        self.index = AuditIndex(self.path)
        # The size of the last record that could not be written (a full disk), until one is.
        self._failed_size: int | None = None

    def check_writable(self) -> None:
        """Raise AuditWriteError unless the log can be opened for appending (created if missing)
        and, after a write failed, unless its file system has room for that record again."""
        try:
            private_dir(self.path.parent)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if self._failed_size is not None:
                    self._probe_room(fd, self._failed_size)
                elif _free_bytes(fd) < MIN_FREE_BYTES:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            finally:
                os.close(fd)
        except OSError as e:
            raise AuditWriteError(self.path, e) from None

    def _probe_room(self, fd: int, need: int) -> None:
        """Reserve `need` bytes past the end of the log and give them back (under the file lock,
        so no writer sees them): OSError (ENOSPC) while the disk is still full. Opening a file
        succeeds on a full disk; only a write, or this, tells."""
        with self._lock:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.fstat(fd).st_size
                try:
                    os.posix_fallocate(fd, size, max(need, 4096))
                finally:
                    if os.fstat(fd).st_size != size:
                        os.ftruncate(fd, size)
            finally:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def append(self, record: dict) -> dict:
        """Append one sealed, chained record; AuditWriteError if it cannot be written whole."""
        try:
            sealed = self._append(record)
        except OSError as e:
            self._failed_size = len(canonical_json(record).encode("utf-8", "replace")) + 256
            raise AuditWriteError(self.path, e) from None
        self._failed_size = None
        return sealed

    def _append(self, record: dict) -> dict:
        body = {k: v for k, v in record.items() if k not in (HASH_FIELD, PREV_FIELD, SEQ_FIELD)}
        private_dir(self.path.parent)
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                start = os.fstat(fd).st_size
                sealed = seal({**body, **_chain_fields(_last_line(fd, start))}, self.key)
                line = (canonical_json(sealed) + "\n").encode("utf-8")
                if start and os.pread(fd, 1, start - 1) != b"\n":
                    # A torn line (a process killed mid-write): it stays a line of its own, which
                    # verify reports, and this record still starts on a fresh line.
                    line = b"\n" + line
                view = memoryview(line)
                try:
                    while view:
                        n = os.write(fd, view)
                        view = view[n:]
                    os.fsync(fd)
                except OSError:
                    # A full disk can take part of the line: cut it off, so the next record
                    # starts on a line of its own.
                    try:
                        os.ftruncate(fd, start)
                    except OSError:
                        pass
                    raise
            finally:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        return sealed

    def find(self, audit_id: str) -> dict | None:
        """The record with this id, through the index (AuditRecordDamaged if its line cannot be
        read back)."""
        return self.index.find(audit_id)


def _parse_line(raw: bytes) -> tuple[dict | None, str | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"invalid UTF-8 (byte {e.start} of the line)"
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"invalid JSON ({e.msg})"
    except (ValueError, RecursionError) as e:
        return None, f"invalid JSON ({type(e).__name__})"
    if not isinstance(rec, dict):
        return None, "not a JSON object"
    return rec, None


def iter_lines(path: str | Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, raw bytes without the newline) of every line, blank ones too."""
    p = Path(path)
    if not p.exists():
        return
    offset = 0
    with open(p, "rb") as f:
        for n, raw in enumerate(f, start=1):
            start = offset
            offset += len(raw)
            yield n, start, raw[:-1] if raw.endswith(b"\n") else raw


def read_records(path: str | Path) -> Iterator[tuple[int, dict | None, str | None]]:
    """Yield (line number, record or None, error or None) for each non-empty line; a damaged
    byte is an error on its line, not an exception."""
    for n, _, raw in iter_lines(path):
        if not raw.strip():
            continue
        rec, err = _parse_line(raw)
        yield n, rec, err


# -- verification ----------------------------------------------------------------------------


@dataclass
class ChainBreak:
    line: int
    audit_id: str | None
    reason: str


@dataclass
class ChainReport:
    path: str
    records: int = 0
    keyed: int = 0
    # Lines before the first chained record: written before the log was chained.
    unchained_prefix: int = 0
    chain_start_line: int | None = None
    last_seq: int | None = None
    last_hash: str | None = None  # record_hash of the last line: keep it elsewhere as an anchor
    breaks: list[ChainBreak] = field(default_factory=list)
    anchor: str | None = None
    anchor_found: bool | None = None

    @property
    def ok(self) -> bool:
        return not self.breaks and self.anchor_found is not False

    @property
    def first_break(self) -> ChainBreak | None:
        return self.breaks[0] if self.breaks else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


def verify_chain(path: str | Path, key: bytes | None = None, anchor: str | None = None) -> ChainReport:
    """Check every line of the log: its own hash, its link to the line before, its place in the
    sequence. Each problem is reported once, at the first line it shows on; checking goes on from
    the line after, so one damaged line does not hide the rest. `anchor` is a `record_hash` kept
    elsewhere: a log that no longer holds it was truncated or rewritten."""
    report = ChainReport(path=str(path), anchor=anchor)
    prev_raw: bytes | None = None
    prev_seq: int | None = None
    ids: dict[str, int] = {}
    anchor_seen = False
    for n, _, raw in iter_lines(path):
        report.records += 1
        rec, err = _parse_line(raw) if raw.strip() else (None, "an empty line")
        expected_prev = GENESIS if prev_raw is None else line_hash(prev_raw)
        prev_line_raw, prev_raw = prev_raw, raw
        if rec is None:
            report.breaks.append(ChainBreak(n, None, f"{err}: the line was damaged or written by something else"))
            prev_seq = None
            continue
        audit_id = rec.get("audit_id") if isinstance(rec.get("audit_id"), str) else None

        def broken(reason: str) -> None:
            report.breaks.append(ChainBreak(n, audit_id, reason))

        problem = hash_problem(rec, key)
        stored = rec.get(HASH_FIELD)
        if isinstance(stored, str) and stored.startswith(HMAC_PREFIX):
            report.keyed += 1
        if anchor and stored == anchor:
            anchor_seen = True
        if PREV_FIELD not in rec:
            if report.chain_start_line is None:
                report.unchained_prefix += 1
                if problem:
                    broken(problem)
            else:
                broken(f"no {PREV_FIELD} inside the chain (it starts at line {report.chain_start_line}): "
                       "a record inserted, or written by a version without the chain")
            prev_seq = None
            continue
        if report.chain_start_line is None:
            report.chain_start_line = n
        seq = rec.get(SEQ_FIELD)
        if problem:
            broken(problem)
        elif rec[PREV_FIELD] != expected_prev:
            if rec[PREV_FIELD] == GENESIS:
                broken("claims to be the first record of the log, but follows line "
                       f"{n - 1 if prev_line_raw is not None else '?'}: a record inserted, or logs joined")
            elif prev_line_raw is None:
                broken(f"the first line, but it links to a record before it: the head of the log was removed")
            elif isinstance(seq, int) and isinstance(prev_seq, int) and seq > prev_seq + 1:
                broken(f"does not follow the line before (seq {seq} after {prev_seq}): "
                       f"{seq - prev_seq - 1} record(s) removed before it")
            else:
                broken("its prev_hash does not match the line before: that line was edited, or records were "
                       "removed, reordered, duplicated or inserted here")
        elif isinstance(seq, int) and isinstance(prev_seq, int) and seq != prev_seq + 1:
            broken(f"seq {seq} after {prev_seq}: out of sequence")
        if audit_id is not None:
            if audit_id in ids and not problem:
                broken(f"audit_id already used at line {ids[audit_id]}: a duplicated record")
            ids.setdefault(audit_id, n)
        prev_seq = seq if isinstance(seq, int) else None
        report.last_seq = prev_seq
        report.last_hash = stored if isinstance(stored, str) else None
    if anchor:
        report.anchor_found = anchor_seen
    return report


def format_chain_report(report: ChainReport, key_set: bool) -> str:
    lines = []
    if report.records == 0:
        return f"{report.path}: empty audit log (no record to verify)"
    if report.unchained_prefix:
        where = (f"the chain starts at line {report.chain_start_line}" if report.chain_start_line
                 else "no line carries the chain")
        lines.append(f"lines 1-{report.unchained_prefix} were written before the log was chained (no {PREV_FIELD}): "
                     f"each record's own hash is checked, but not their order or completeness; {where}")
    if report.breaks:
        b = report.breaks[0]
        lines.append(f"BROKEN at line {b.line} ({b.audit_id or 'no audit id'}): {b.reason}")
        for b in report.breaks[1:6]:
            lines.append(f"  also line {b.line} ({b.audit_id or '-'}): {b.reason}")
        if len(report.breaks) > 6:
            lines.append(f"  and {len(report.breaks) - 6} more")
    else:
        lines.append(f"intact: {report.records} records"
                     + (f", {report.keyed} keyed (HMAC)" if report.keyed else ", unkeyed (plain SHA-256)"))
    if report.anchor is not None:
        lines.append("anchor found in the log" if report.anchor_found else
                     f"the anchor {report.anchor} is not in the log: it was truncated or rewritten")
    if report.last_hash:
        lines.append(f"last record: seq {report.last_seq}, record_hash {report.last_hash} "
                     "(keep it elsewhere; `audit verify --anchor` then detects a truncated log)")
    if report.records and not report.keyed and not key_set:
        lines.append("note: without AUDIT_HMAC_KEY anyone who can write the file can recompute the whole chain")
    return "\n".join(lines)


# -- the index -------------------------------------------------------------------------------


class AuditIndex:
    """audit_id -> byte offset of its line, in a SQLite file next to the log (`<log>.index`).

    The log stays the only record: the index is brought up to date from the offset it reached
    before each lookup (other processes append too), and rebuilt when the log was replaced or cut
    (its first line or its inode changed, or it shrank). If the index cannot be written, lookups
    scan the log."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.path = log_path.with_name(log_path.name + ".index")
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        private_file(self.path)  # it lists every audit id: as private as the log (and its -wal, -shm)
        con = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
        con.execute("CREATE TABLE IF NOT EXISTS ids (audit_id TEXT PRIMARY KEY, offset INTEGER NOT NULL, "
                    "length INTEGER NOT NULL)")
        return con

    def _identity(self, f) -> tuple[str, int]:
        st = os.fstat(f.fileno())
        first = f.readline(4096)
        f.seek(0)
        return f"{st.st_dev}:{st.st_ino}:{hashlib.sha256(first).hexdigest()}", st.st_size

    def refresh(self, con: sqlite3.Connection, f) -> None:
        """Index the lines appended since the last refresh (or all of them, for a new log)."""
        identity, size = self._identity(f)
        meta = dict(con.execute("SELECT k, v FROM meta").fetchall())
        if meta.get("identity") == identity and int(meta.get("offset", 0)) == size:
            return
        con.execute("BEGIN IMMEDIATE")
        try:
            meta = dict(con.execute("SELECT k, v FROM meta").fetchall())
            done = int(meta.get("offset", 0))
            if meta.get("identity") != identity or done > size:
                con.execute("DELETE FROM ids")
                done = 0
            if done < size:
                f.seek(done)
                offset = done
                rows = []
                for raw in f:
                    if not raw.endswith(b"\n"):  # a line being written: index it next time
                        break
                    audit_id = _audit_id_of(raw)
                    if audit_id is not None:
                        rows.append((audit_id, offset, len(raw)))
                    offset += len(raw)
                    if len(rows) >= 5000:
                        con.executemany("INSERT OR IGNORE INTO ids VALUES (?, ?, ?)", rows)
                        rows.clear()
                con.executemany("INSERT OR IGNORE INTO ids VALUES (?, ?, ?)", rows)
                done = offset
            con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                            [("identity", identity), ("offset", str(done))])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def find(self, audit_id: str) -> dict | None:
        if not self.log_path.exists():
            return None
        try:
            con = self._connect()
        except (sqlite3.Error, OSError):
            return self._scan(audit_id)
        try:
            with open(self.log_path, "rb") as f:
                try:
                    self.refresh(con, f)
                except sqlite3.Error:
                    return self._scan(audit_id)
                row = con.execute("SELECT offset, length FROM ids WHERE audit_id = ?", (audit_id,)).fetchone()
                if row is None:
                    return None
                f.seek(row[0])
                raw = f.read(row[1])
        finally:
            con.close()
        rec, err = _parse_line(raw[:-1] if raw.endswith(b"\n") else raw)
        if rec is None:
            raise AuditRecordDamaged(f"the line of audit record {audit_id} cannot be read: {err}; "
                                     "run `sourcegate audit verify` on the log")
        if rec.get("audit_id") != audit_id:  # the log changed under the index: start again
            with self._lock:
                self.path.unlink(missing_ok=True)
            return self._scan(audit_id)
        return rec

    def _scan(self, audit_id: str) -> dict | None:
        for _, _, raw in iter_lines(self.log_path):
            if _audit_id_of(raw) == audit_id:
                rec, err = _parse_line(raw)
                if rec is None:
                    raise AuditRecordDamaged(f"the line of audit record {audit_id} cannot be read: {err}")
                return rec
        return None


# The audit_id key in a canonical line: quotes inside string values are escaped, so this only
# matches a key. (A nested object's own audit_id could match first: a lookup checks the record
# it reads, and falls back to a scan.)
_AUDIT_ID_KEY = re.compile(rb'"audit_id":"([A-Za-z0-9_-]{1,64})"')


def _audit_id_of(raw: bytes) -> str | None:
    """The audit_id of a line, read even from a line with a damaged byte elsewhere."""
    m = _AUDIT_ID_KEY.search(raw)
    if m is not None:
        return m.group(1).decode("ascii")
    try:
        rec = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    if isinstance(rec, dict) and isinstance(rec.get("audit_id"), str):
        return rec["audit_id"]
    return None
