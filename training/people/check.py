"""Check every part of people's questions, its audit, and the source it is written on.

    python -m training.people.check                    every part: format, labels, overlap, audit
    python -m training.people.check --part parts/KEY.jsonl      one file (while writing it)
    python -m training.people.check --only KEY[,KEY] --out DIR  also write the library of those sources
                                                       (corpus.json + questions.jsonl) for `sourcegate eval`
    python -m training.people.check --stats            the table of sources, questions, kinds and languages

A question line has the format of the shared real-document training data (`train/build.py`):
  {"id", "source", "query", "lang": "en"|"fr", "kind", "expected_status",
   "expected_sources", "relevant_sources", "forbidden_sources", "archived_sources",
   "answer" (answerable kinds), "polarity" (yes/no kinds), "premise" (premise kinds)}

Beyond the format it checks what a writer can get wrong by program: every passage id exists and is
not on a held-out (`test`) document; an answer is exact text of an expected passage; the question is
paraphrased (mean content-word overlap with its answering passage at most MAX_OVERLAP per part);
a part has an audit (`audit/KEY.jsonl`) covering at least 10 % of its questions and every kind it
holds, whose last round finds at most 3 % wrong labels (or that has had every one of its questions read),
and whose wrong labels of every round were fixed. An audit line: {"id": question id, "round": 1, "verdict": "right"|"wrong", "note": "...",
"fixed": true|false}.
"""
import argparse
import collections
import json
import re
import sys
from pathlib import Path

from .common import AUDIT_DIR, PARTS_DIR, SHARED_REAL, load_passages, part_source, source_configs, split

ANSWER, CONFLICT, ABSTAIN = "answer_from_evidence", "premise_conflict", "insufficient_evidence"
KINDS = {
    "factual": ANSWER, "twin": ANSWER, "fr_en": ANSWER, "en_fr": ANSWER, "keyword": ANSWER,
    "yes_no_yes": ANSWER, "yes_no_no": ANSWER, "two_part": ANSWER,
    "false_premise": CONFLICT, "superseded": (ANSWER, CONFLICT),
    "yes_no_open": ABSTAIN, "unstated": ABSTAIN, "out_of_scope": ABSTAIN, "twin_missing": ABSTAIN,
}
POLAR = {"yes_no_yes": "yes", "yes_no_no": "no", "yes_no_open": "open"}
MAX_OVERLAP = 0.55
AUDIT_SHARE = 0.10
AUDIT_MAX_WRONG = 0.03
MACHINE = re.compile("|".join(["/" + "work" + "/", r"\." + "mirror", "/" + "tmp" + "/", "/" + "root" + "/"]))
ID_KEYS = ("expected_sources", "relevant_sources", "forbidden_sources", "archived_sources")


def squash(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def overlap(query: str, text: str) -> float:
    """Share of the question's content stems that the passage holds (the product's own stems)."""
    from sourcegate.text import content_stems
    q = set(content_stems(query))
    return len(q & set(content_stems(text))) / len(q) if q else 0.0


def check_question(q: dict, where: str, source: str, passages: dict, seen: set, dev: set) -> list[str]:
    errs = []
    kind, status = q.get("kind"), q.get("expected_status")
    if kind not in KINDS:
        return [f"{where}: kind {kind!r} not in {sorted(KINDS)}"]
    allowed = KINDS[kind] if isinstance(KINDS[kind], tuple) else (KINDS[kind],)
    if status not in allowed:
        errs.append(f"{where}: kind {kind} expects {' or '.join(allowed)}, not {status}")
    for key in ("id", "query", "lang"):
        if not isinstance(q.get(key), str) or not q[key].strip():
            errs.append(f"{where}: missing {key}")
    if q.get("source") != source:
        errs.append(f"{where}: source must be {source!r}, the part's name before its first dot")
    if q.get("lang") not in ("en", "fr"):
        errs.append(f"{where}: lang must be en or fr")
    sq = squash(q.get("query", ""))
    if sq in seen:
        errs.append(f"{where}: duplicate query")
    if sq in dev:
        errs.append(f"{where}: query copied from the dev set")
    seen.add(sq)
    for key in ID_KEYS:
        ids = q.get(key, [])
        if not isinstance(ids, list):
            errs.append(f"{where}: {key} must be a list")
            continue
        for pid in ids:
            if pid not in passages:
                errs.append(f"{where}: {key} names unknown passage {pid!r}")
            elif split(passages[pid]["doc_id"]) == "test":
                errs.append(f"{where}: {pid} is in the held-out split")
    for pid in q.get("archived_sources", []):
        if pid in passages and passages[pid]["status"] != "archived":
            errs.append(f"{where}: archived_sources names a current passage {pid}")
    exp = set(q.get("expected_sources", []))
    if any(p in passages and passages[p]["status"] == "archived" for p in exp) and \
            not all(p in passages and passages[p]["status"] == "archived" for p in exp):
        errs.append(f"{where}: an archived passage beside a current one goes in archived_sources")
    sets = {k: set(q.get(k, [])) for k in ID_KEYS}
    for a, b in (("expected_sources", "forbidden_sources"), ("expected_sources", "relevant_sources"),
                 ("relevant_sources", "forbidden_sources")):
        if sets[a] & sets[b]:
            errs.append(f"{where}: a passage is in both {a} and {b}")
    if status in (ANSWER, CONFLICT) and not exp:
        errs.append(f"{where}: {status} needs expected_sources")
    if status == ABSTAIN and exp:
        errs.append(f"{where}: an abstention has no expected_sources")
    if status == ANSWER and kind != "two_part":
        ans = q.get("answer")
        if not isinstance(ans, str) or len(ans.strip()) < 2:
            errs.append(f"{where}: answerable question without 'answer'")
        elif not any(squash(ans) in squash(passages[p]["text"]) for p in exp if p in passages):
            errs.append(f"{where}: answer {ans[:60]!r} is not text of an expected source")
    if kind in POLAR and q.get("polarity") != POLAR[kind]:
        errs.append(f"{where}: {kind} needs polarity {POLAR[kind]!r}")
    if status == CONFLICT and not (isinstance(q.get("premise"), str) and q["premise"].strip()):
        errs.append(f"{where}: a premise conflict needs 'premise'")
    if MACHINE.search(json.dumps(q, ensure_ascii=False)):
        errs.append(f"{where}: a machine path")
    return errs


def read_part(path: Path) -> tuple[list[dict], list[str]]:
    rows, errs = [], []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            errs.append(f"{path.name}:{i}: not JSON ({e})")
            continue
        q["_where"] = f"{path.name}:{i}"
        rows.append(q)
    return rows, errs


def part_overlap(rows: list[dict], passages: dict) -> float:
    vals = []
    for q in rows:
        if q.get("expected_status") == ANSWER and q.get("kind") not in ("fr_en", "en_fr"):
            exp = [p for p in q.get("expected_sources", []) if p in passages]
            if exp:  # the first answering passage, the one the writer started from; across languages left out
                vals.append(overlap(q["query"], passages[exp[0]]["text"]))
    return sum(vals) / len(vals) if vals else 0.0


def check_audit(source: str, rows: list[dict]) -> tuple[list[str], dict]:
    """The source's audit: coverage by kind, wrong share of the last round, earlier wrongs fixed."""
    path = AUDIT_DIR / f"{source}.jsonl"
    if not path.exists():
        return [f"{source}: no audit (audit/{source}.jsonl)"], {}
    by_id = {q["id"]: q for q in rows}
    lines = [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
    errs = []
    for a in lines:
        if a.get("id") not in by_id:
            errs.append(f"audit/{source}.jsonl: {a.get('id')!r} is not a question of {source}")
        if a.get("verdict") not in ("right", "wrong"):
            errs.append(f"audit/{source}.jsonl: {a.get('id')}: verdict must be right or wrong")
    rounds = collections.defaultdict(list)
    for a in lines:
        rounds[int(a.get("round", 1))].append(a)
    last = max(rounds) if rounds else 0
    audited = {a["id"] for a in lines if a.get("id") in by_id}
    if len(audited) < AUDIT_SHARE * len(rows):
        errs.append(f"{source}: audit covers {len(audited)} of {len(rows)} questions (at least {AUDIT_SHARE:.0%})")
    files = collections.defaultdict(list)  # every batch audited, not only the source as a whole
    for q in rows:
        files[q.get("_where", "").split(":")[0]].append(q["id"])
    for name, ids in sorted(files.items()):
        seen = sum(1 for i in ids if i in audited)
        if len(files) > 1 and seen < AUDIT_SHARE * len(ids):
            errs.append(f"{source}: audit covers {seen} of the {len(ids)} questions of {name} (at least {AUDIT_SHARE:.0%})")
    missing = {q["kind"] for q in rows} - {by_id[i]["kind"] for i in audited}
    if missing:
        errs.append(f"{source}: audit has no question of kind {', '.join(sorted(missing))}")
    wrong_last = sum(a["verdict"] == "wrong" for a in rounds.get(last, []))
    share = wrong_last / len(rounds[last]) if rounds.get(last) else 0.0
    # a part whose every question an auditor has read, every wrong label fixed, needs no further sample
    read_all = audited >= set(by_id)
    # the round that decides must be a sample, not a handful: at least 20 questions, or 10 % of a small part
    least = min(20, -(-len(rows) // 10))
    if rounds.get(last) is not None and len(rounds[last]) < least and not read_all:
        errs.append(f"{source}: the last audit round (round {last}) read {len(rounds[last])} questions; it needs at "
                    f"least {least} to decide")
    if share > AUDIT_MAX_WRONG and not read_all:
        errs.append(f"{source}: round {last} of the audit found {share:.1%} wrong labels (at most "
                    f"{AUDIT_MAX_WRONG:.0%}): correct the part and audit it again (round {last + 1})")
    for r, items in rounds.items():
        for a in items:
            if a["verdict"] == "wrong" and not a.get("fixed"):
                errs.append(f"audit/{source}.jsonl: {a['id']} (round {r}) was found wrong and is not marked fixed")
    return errs, {"audited": len(audited), "rounds": last, "wrong_last": share, "read_all": read_all}


def dev_queries() -> set:
    path = SHARED_REAL / "dev" / "questions.jsonl"
    if not path.exists():
        return set()
    return {squash(json.loads(l)["query"]) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", help="check this file only (no audit needed yet)")
    ap.add_argument("--only", help="comma-separated sources")
    ap.add_argument("--out", help="write the library of --only (or of every source) here")
    ap.add_argument("--stats", action="store_true")
    args = ap.parse_args(argv)
    passages = load_passages()
    configs = source_configs()
    dev = dev_queries()
    paths = [Path(args.part)] if args.part else sorted(PARTS_DIR.glob("*.jsonl"))
    only = set(args.only.split(",")) if args.only else None
    by_source = collections.defaultdict(list)
    seen, bad, total = set(), 0, 0
    for path in paths:
        source = part_source(path)
        rows, errs = read_part(path)
        if source not in configs:
            errs.append(f"{path.name}: no sources/{source}.json for this part")
        for q in rows:
            errs += check_question(q, q["_where"], source, passages, seen, dev)
        ov = part_overlap(rows, passages)
        if ov > MAX_OVERLAP:
            errs.append(f"{path.name}: mean content-word overlap with the answering passage {ov:.2f} "
                        f"(at most {MAX_OVERLAP}): paraphrase more")
        for e in errs[:40]:
            print("FAIL:", e)
        if len(errs) > 40:
            print(f"FAIL: ... {len(errs) - 40} more in {path.name}")
        kinds = collections.Counter(q.get("kind") for q in rows)
        fr = sum(q.get("lang") == "fr" for q in rows)
        print(f"{path.name}: {len(rows)} questions ({fr} French), overlap {ov:.2f}, {len(errs)} problems; "
              f"kinds {dict(sorted(kinds.items()))}")
        bad += len(errs)
        total += len(rows)
        by_source[source] += rows
    if not args.part:
        for source, rows in sorted(by_source.items()):
            errs, info = check_audit(source, rows)
            for e in errs:
                print("FAIL:", e)
            bad += len(errs)
            if info:
                print(f"audit {source}: {info['audited']} questions read, {info['rounds']} round(s), "
                      f"last round {info['wrong_last']:.1%} wrong" + (", every question read" if info["read_all"] else ""))
    if args.stats:
        print_stats(by_source, configs)
    print(f"total {total} questions in {len(by_source)} sources; {bad} problems")
    if args.out:
        write_library(by_source, passages, only, Path(args.out))
    return 1 if bad else 0


def print_stats(by_source: dict, configs: dict) -> None:
    print("| source | genre | licence | questions | French | kinds |")
    print("|---|---|---|---|---|---|")
    for s, rows in sorted(by_source.items()):
        c = configs.get(s, {})
        fr = sum(q.get("lang") == "fr" for q in rows)
        kinds = len({q["kind"] for q in rows})
        print(f"| {s} | {c.get('genre', '')} | {c.get('licence', '')} | {len(rows)} | {fr} | {kinds} |")


def write_library(by_source: dict, passages: dict, only, out: Path) -> None:
    questions = [{k: v for k, v in q.items() if not k.startswith("_")}
                 for s, rows in sorted(by_source.items()) if only is None or s in only for q in rows]
    docs = {passages[p]["doc_id"] for q in questions for k in ID_KEYS for p in q.get(k, []) if p in passages}
    library = [{"id": r["id"], "title": r["title"], "text": r["text"], "url": r["url"],
                "source_type": "documentation", "version": r["version"], "status": r["status"]}
               for r in passages.values() if r["doc_id"] in docs]
    out.mkdir(parents=True, exist_ok=True)
    (out / "corpus.json").write_text(json.dumps(library, ensure_ascii=False, indent=0), encoding="utf-8")
    with open(out / "questions.jsonl", "w", encoding="utf-8") as f:
        for q in questions:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    print(f"wrote {out}/questions.jsonl ({len(questions)}) and corpus.json ({len(library)} passages, {len(docs)} documents)")


if __name__ == "__main__":
    sys.exit(main())
