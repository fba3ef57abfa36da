"""Replay past answers under new thresholds, from the scores stored in the audit log.

Routing is pure code over stored scores (`gate.apply_gate`), so a replay calls no judge, needs
no key and runs offline. Records whose hash does not verify are reported, not replayed: their
scores cannot be trusted. The command first checks the log's hash chain and refuses a broken one
(a record removed, reordered or inserted changes what a replay says) unless `--ignore-chain`.

A record of a restricted caller holds the candidates the store gave it, already trimmed to the
documents it may read (its `readers` rule is recorded beside them): replay re-routes those and
does not trim again, as it reads no library (docs/readers.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, ConfigDict, ValidationError

from .audit import format_chain_report, hash_problem, read_records, verify_chain
from .gate import GateThresholds, Status, TrustTiers, apply_gate
from .models import QUESTIONS, PassageScores
from .plan import Part, PartDecision, merge
from .tables import format_table

DEFAULT_EVIDENCE_LIMIT = 5


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass
class PassageChange:
    audit_id: str
    line: int
    chunk_id: str
    doc_id: str
    old_route: str
    new_route: str
    new_reason: str
    # The part of the question the passage was judged for, in a question that asks several things.
    part: int | None = None


@dataclass
class AnswerChange:
    audit_id: str
    line: int
    old_status: str
    new_status: str
    # The parts no passage answers, before and after (questions that ask several things).
    old_missing: list[str] = field(default_factory=list)
    new_missing: list[str] = field(default_factory=list)
    # The question asked, or None where the log keeps only its hash (AUDIT_REDACT_QUERY).
    query: str | None = None


@dataclass
class InvalidRecord:
    line: int
    audit_id: str | None
    error: str


@dataclass
class ReplayReport:
    thresholds: dict[str, float]
    trust_tiers: dict[str, Any] = field(default_factory=dict)
    records: int = 0
    replayed: int = 0
    passages: int = 0
    passage_changes: list[PassageChange] = field(default_factory=list)
    answer_changes: list[AnswerChange] = field(default_factory=list)
    invalid: list[InvalidRecord] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.invalid

    def to_json(self) -> dict[str, Any]:
        return {
            "thresholds": self.thresholds,
            "trust_tiers": self.trust_tiers,
            "records": self.records,
            "replayed": self.replayed,
            "passages": self.passages,
            "passage_changes": [asdict(c) for c in self.passage_changes],
            "answer_changes": [asdict(c) for c in self.answer_changes],
            "invalid": [asdict(c) for c in self.invalid],
        }



def _echo(message: object = "", err: bool = False) -> None:
    """`click.echo` without control or invisible characters (a crafted record or label file could
    hold terminal escape sequences): shown as escapes (see `inert.terminal_text`)."""
    from .inert import terminal_text

    click.echo(terminal_text(str(message)), err=err)

def _scores(raw: Any) -> PassageScores | None:
    if not raw:
        return None
    return PassageScores(**{q: float(raw[q]) for q in QUESTIONS})


def _evidence_limit(rec: dict) -> int:
    if isinstance(rec.get("evidence_limit"), int):
        return rec["evidence_limit"]
    retrieval = rec.get("retrieval") or {}
    key = "evidence_max_multi" if rec.get("multi_document") else "evidence_max_single"
    return int(retrieval.get(key, DEFAULT_EVIDENCE_LIMIT))


def _part_label(question: Any, n: int) -> str:
    """A part's question, or its number when the record keeps only a hash of it (AUDIT_REDACT_QUERY)."""
    return question if isinstance(question, str) else f"part {n + 1} (redacted)"


def _outweighs(rec: dict) -> bool:
    """The conflict policy the record was decided under (records made before it was recorded: off)."""
    policy = rec.get("policy") if isinstance(rec.get("policy"), dict) else {}
    return policy.get("conflict_outweighs") is True


def _gate(cands: list[dict], thresholds: GateThresholds, trust: TrustTiers | None, limit: int, named=None,
          outweighs: bool = False):
    """Re-gate stored candidates. With `trust`, each candidate's tier is re-read from its stored
    source_type under that setting; without, the tier it was given (records made before trust tiers
    have neither: every source then weighs the same, as it did)."""
    if trust is not None:
        tiers = [trust.tier(c.get("source_type")) for c in cands]
    else:
        tiers = [int(c["tier"]) if isinstance(c.get("tier"), int) else 2 for c in cands]
    return apply_gate([(c["id"], c["doc_id"], _scores(c.get("scores"))) for c in cands], thresholds, limit,
                      subject_named=named, tiers=tiers, values=[c.get("values") or [] for c in cands],
                      current=[c.get("status") != "archived" for c in cands],
                      document_injection=[_number(c.get("document_injection")) for c in cands],
                      conflict_outweighs=outweighs)


def replay_record(rec: dict, thresholds: GateThresholds, line: int = 0,
                  trust: TrustTiers | None = None) -> tuple[list[PassageChange], AnswerChange | None]:
    """The passage and answer decisions of one (verified) record that change under `thresholds` and
    the trust tiers `trust` (None: the tiers recorded). A question that asked several things is
    re-gated part by part, then merged again."""
    cands = rec.get("candidates") or []
    audit_id = str(rec.get("audit_id"))
    query = rec.get("query") if isinstance(rec.get("query"), str) else None
    parts = rec.get("parts")
    if not parts:
        # a question about a unit no passage named: the passages naming other units were flagged (`subject_named`)
        named = [bool(c.get("subject_named", True)) for c in cands] if any("subject_named" in c for c in cands) else None
        gated, status = _gate(cands, thresholds, trust, _evidence_limit(rec), named, outweighs=_outweighs(rec))
        changes = [PassageChange(audit_id, line, c["id"], c["doc_id"], c.get("route", "?"), g.route.value, g.reason)
                   for c, g in zip(cands, gated) if c.get("route") != g.route.value]
        if rec.get("status") != status.value:
            return changes, AnswerChange(audit_id, line, str(rec.get("status")), status.value, query=query)
        return changes, None
    changes = []
    decisions = []
    for n, p in enumerate(parts):
        mine = [c for c in cands if c.get("part") == n]
        named = [bool(c.get("subject_named", True)) for c in mine] if any("subject_named" in c for c in mine) else None
        gated, part_status = _gate(mine, thresholds, trust, int(p.get("evidence_limit", DEFAULT_EVIDENCE_LIMIT)), named,
                                   outweighs=_outweighs(rec))
        changes += [PassageChange(audit_id, line, c["id"], c["doc_id"], c.get("route", "?"), g.route.value, g.reason, n)
                    for c, g in zip(mine, gated) if c.get("route") != g.route.value]
        decisions.append(PartDecision(Part(_part_label(p.get("question"), n), p.get("subject")), part_status))
    merged = merge(decisions)
    old_missing = [_part_label(p.get("question"), n) for n, p in enumerate(parts)
                   if p.get("status") == Status.INSUFFICIENT.value]
    if rec.get("status") != merged.status.value or old_missing != merged.missing:
        return changes, AnswerChange(audit_id, line, str(rec.get("status")), merged.status.value, old_missing,
                                     merged.missing, query)
    return changes, None


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


class _CandidateShape(_Shape):
    id: str
    doc_id: str
    scores: dict[str, float] | None = None
    route: str | None = None
    part: int | None = None
    subject_named: bool | None = None
    tier: int | None = None
    source_type: str | None = None
    status: str | None = None
    values: list | None = None


class _PartShape(_Shape):
    question: str | dict | None = None
    subject: str | None = None
    status: str | None = None
    evidence_limit: int | None = None


class _RecordShape(_Shape):
    """What replay reads of a record: a record that verifies but does not have this shape (written
    by hand, by another tool) is reported, never a traceback."""

    audit_id: str
    status: str
    query: str | dict | None = None
    candidates: list[_CandidateShape] = []
    parts: list[_PartShape] | None = None
    evidence_limit: int | None = None
    multi_document: bool | None = None
    retrieval: dict | None = None


def shape_problem(rec: dict) -> str | None:
    """Why `rec` is not an audit record replay can read (the first field at fault), or None."""
    try:
        _RecordShape.model_validate(rec)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "the record"
        return f"not an audit record of the expected shape: {where}: {err['msg']}"
    return None


Records = Iterable[tuple[int, dict | None, str | None]] | Iterable[dict]


def _record_thresholds(rec: dict, thresholds: GateThresholds, given: dict[str, float] | None) -> GateThresholds:
    """The thresholds a record is replayed under. A record decided under an adaptation (`sourcegate
    adapt`) holds the scores the gate read (adapted) and the thresholds in force then: with `given`
    (the thresholds asked for explicitly), those are replayed from the record's own, not the settings',
    which were never applied to adapted scores."""
    if given is None or not rec.get("adaptation") or not isinstance(rec.get("thresholds"), dict):
        return thresholds
    own = {k: float(v) for k, v in rec["thresholds"].items() if k in GateThresholds.__dataclass_fields__
           and isinstance(v, (int, float)) and not isinstance(v, bool)}
    return replace(GateThresholds(**own), **given)


def replay(records: Records, thresholds: GateThresholds, key: bytes | None = None,
           trust: TrustTiers | None = None, given: dict[str, float] | None = None) -> ReplayReport:
    """Replay records — `(line, record, error)` triples from `audit.read_records`, or plain
    dicts — under `thresholds` and the trust tiers `trust` (None: each record's own); verify each
    record's hash first (HMAC ones with `key`). With `given` (the thresholds asked for explicitly), a
    record decided under an adaptation is replayed from its own thresholds with `given` applied."""
    report = ReplayReport(thresholds=thresholds.as_dict(), trust_tiers=trust.as_dict() if trust else {})
    for n, item in enumerate(records, start=1):
        line, rec, err = item if isinstance(item, tuple) else (n, item, None)
        report.records += 1
        if rec is None:
            report.invalid.append(InvalidRecord(line, None, err or "unreadable line"))
            continue
        audit_id = rec.get("audit_id")
        problem = hash_problem(rec, key)
        if problem is not None:
            report.invalid.append(InvalidRecord(line, audit_id, problem))
            continue
        problem = shape_problem(rec)
        if problem is not None:
            report.invalid.append(InvalidRecord(line, audit_id if isinstance(audit_id, str) else None, problem))
            continue
        try:
            changes, answer = replay_record(rec, _record_thresholds(rec, thresholds, given), line, trust)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            report.invalid.append(InvalidRecord(line, audit_id, f"malformed record ({type(e).__name__}: {e})"))
            continue
        report.replayed += 1
        report.passages += len(rec.get("candidates") or [])
        report.passage_changes += changes
        if answer:
            report.answer_changes.append(answer)
    return report


def format_report(report: ReplayReport, path: str) -> str:
    t = report.thresholds
    lines = [f"replayed {report.replayed} of {report.records} records ({report.passages} passages) from {path}",
             "thresholds: " + ", ".join(f"{k} {v}" for k, v in t.items())]
    if report.trust_tiers:
        tt = report.trust_tiers
        lines.append("trust tiers: " + ", ".join([f"{k}={v}" for k, v in tt["tiers"].items()] + [f"*={tt['unknown']}"]))
    else:
        lines.append("trust tiers: as recorded")
    lines.append("")
    if report.passage_changes:
        lines.append(f"passages whose route changes ({len(report.passage_changes)}):")
        for c in report.passage_changes:
            part = f"  part {c.part + 1}" if c.part is not None else ""
            lines.append(f"  line {c.line}  {c.audit_id}{part}  {c.chunk_id}  {c.old_route} -> {c.new_route} ({c.new_reason})")
    else:
        lines.append("no passage changes route")
    if report.answer_changes:
        lines.append(f"answers whose status changes ({len(report.answer_changes)}):")
        lines.append(format_table(["line", "audit id", "was", "now", "question"],
                                  [[a.line, a.audit_id, a.old_status, a.new_status,
                                    a.query if a.query is not None else "(redacted)"] for a in report.answer_changes],
                                  indent="  "))
        for a in report.answer_changes:
            if a.old_missing != a.new_missing:
                lines.append(f"  line {a.line}  not found: {'; '.join(a.old_missing) or '-'} -> "
                             f"{'; '.join(a.new_missing) or '-'}")
    else:
        lines.append("no answer changes status")
    if report.invalid:
        lines.append("")
        lines.append(f"records failing verification ({len(report.invalid)}), not replayed:")
        for i in report.invalid:
            lines.append(f"  line {i.line}  {i.audit_id or '-'}  {i.error}")
    return "\n".join(lines)


@click.command("replay")
@click.argument("audit_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--injection-max", type=float, help="Exclude above this injection score [env GATE_INJECTION_MAX].")
@click.option("--superseded-max", type=float, help="Exclude above this superseded score [env GATE_SUPERSEDED_MAX].")
@click.option("--contradicts-min", type=float, help="Conflict above this score [env GATE_CONTRADICTS_MIN].")
@click.option("--relevant-min", type=float, help="Exclude below this relevance [env GATE_RELEVANT_MIN].")
@click.option("--evidence-min", type=float, help="Evidence above this score [env GATE_EVIDENCE_MIN].")
@click.option("--trust-tiers", "trust_spec", metavar="SPEC",
              help="Trust tiers by source_type, 'procedure=3, forum=1, *=2' [env GATE_TRUST_TIERS; "
                   "default: the tiers each record was decided with].")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--ignore-chain", is_flag=True,
              help="Replay even if the hash chain is broken (each record's own hash is still checked).")
@click.pass_context
def replay_cmd(ctx: click.Context, audit_file: Path, as_json: bool, ignore_chain: bool, trust_spec: str | None,
               **flags: float | None) -> None:
    """Replay an audit log (JSONL) under new thresholds, without calling the judge.

    Thresholds come from the environment (GATE_EVIDENCE_MIN=0.6 ...) or the flags (flags win);
    trust tiers from --trust-tiers or GATE_TRUST_TIERS, else those each record was decided with.
    Lists the passages and answers whose decision would change and the records whose hash does
    not verify; exits 2 if any record fails verification. A log whose hash chain is broken (a
    record edited, removed, reordered or inserted) is refused, exit 2, unless --ignore-chain."""
    settings = (ctx.obj or {}).get("settings") if ctx.obj else None
    if settings is None:
        from .settings import Settings

        settings = Settings()
    thresholds = settings.thresholds()
    given = {k: v for k, v in flags.items() if v is not None}
    for k, v in given.items():
        if not 0.0 <= v <= 1.0:
            raise click.BadParameter(f"{v} is not a probability: use a value between 0 and 1",
                                     param_hint=f"--{k.replace('_', '-')}")
    thresholds = replace(thresholds, **given)
    trust = None
    spec = trust_spec if trust_spec is not None else settings.gate_trust_tiers
    if spec is not None:
        try:
            trust = TrustTiers.parse(spec)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--trust-tiers") from None
    key = settings.audit_key
    chain = verify_chain(audit_file, key)
    if not chain.ok and not ignore_chain:
        _echo(format_chain_report(chain, key is not None), err=True)
        _echo(f"refusing to replay {audit_file}: its hash chain is broken (see above); run "
                   "`sourcegate audit verify` for the details, or pass --ignore-chain to replay the records "
                   "whose own hash verifies", err=True)
        ctx.exit(2)
    if not chain.ok:
        # Replayed anyway: the break is said first, and the exit code still says it (a record
        # edited and resealed verifies on its own; only the chain shows it).
        _echo(format_chain_report(chain, key is not None), err=True)
        _echo(f"warning: the hash chain of {audit_file} is broken (see above): records that verify on their "
                   "own are replayed, but the log is not what was written", err=True)
    report = replay(read_records(audit_file), thresholds, key, trust, given=given)
    if as_json:
        data = report.to_json()
        data["chain"] = chain.to_json()
        _echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        _echo(format_report(report, str(audit_file)))
    if not report.ok or not chain.ok:
        ctx.exit(2)
