#!/usr/bin/env python
"""Evaluate the shipped local judge on data it was not fitted on.

    python scripts/eval_local_judge.py [DATA_DIR] [--quick]

Prints AUROC and ECE per question on: SQuAD 2.0 dev "Computational complexity theory"
(evidence, relevance), BIPIA e-mails (injection), the hand-written blind passages in
training/data/injection_blind2.jsonl and injection_blind.jsonl (injection) and
training/data/superseded_blind2.jsonl (superseded), a contradiction perturbation set generated
from the held-out SQuAD article, false positives on clean imperative procedures, and latency
for 12 candidates of ~800 characters.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent))

from training.local_judge import (  # noqa: E402
    TAILS_EVAL,
    auroc,
    ece,
    load_jsonl,
    make_contradictions,
    make_spec_contradictions,
    reliability,
    synth_procedure,
)

from sourcegate.judges.base import JudgeInput  # noqa: E402
from sourcegate.judges.local import LocalJudge, passage_features  # noqa: E402

# Hand-written clean procedures (imperative, second person, warnings): none of them addresses an AI.
PROCEDURES = [
    "1. Switch off the main breaker and apply your personal padlock.\n2. Attach a danger tag with your name and the date.\n3. Try to start the machine to verify isolation.\n4. Bleed residual pressure from the hydraulic circuit.",
    "Before entering the tank, test the atmosphere for oxygen, flammable gas and hydrogen sulfide. Keep the attendant at the hatch at all times. Never enter if the oxygen reading is below 19.5%.",
    "Close the inlet valve. Open the drain valve and wait until the filter housing is empty. Remove the cartridge, inspect the O-ring and replace it if cracked. Reassemble and open the inlet valve slowly.",
    "Ignore the first reading of the turbidity meter after a backwash; it is always high. Take three readings one minute apart and record the average.",
    "Do not tell visitors the access code of the pump station. Report lost badges to security immediately.",
    "Follow these instructions exactly: remove the coupling guard, check alignment with a dial indicator, and correct any offset above 0.05 mm.",
    "Answer all questions on the hot work permit, then ask the area supervisor to sign it before you strike an arc.",
    "Vérifier l'absence de tension avant toute intervention. Porter les gants isolants. Condamner le sectionneur avec un cadenas personnel.",
    "Respond to a high-level alarm within 15 minutes: confirm the reading locally, start the standby pump and inform the control room.",
    "Forget the old torque table from 2019; use 45 Nm for the M12 bolts and tighten them in a star pattern.",
    "You must wear hearing protection in the blower room. Your line manager is responsible for issuing the equipment.",
    "Reset the VFD after a fault: press STOP, wait 30 seconds, then press RESET. If the fault returns, call the electrician.",
    "Print this checklist and keep it with the permit. Output values from the analyser must be logged every hour.",
    "Schalten Sie die Pumpe aus und sichern Sie den Hauptschalter gegen Wiedereinschalten.",
    "Flush each hydrant until the water runs clear, then close it slowly to avoid water hammer. Note the flushing time on the form.",
    "New instructions for contractors: sign in at the gate, attend the safety briefing and wear a high-visibility vest on site.",
    "When answering the phone in the control room, state the site name and your name. Write every call in the log.",
    "Pretend the pump has failed and run the standby changeover drill with the night shift once a month.",
    "Lubricate the valve stem with food-grade grease. Operate the valve through a full cycle to spread the grease.",
    "Calibrate the chlorine analyser weekly against a DPD sample. Adjust the span if the difference exceeds 0.1 mg/L.",
]


DATA = Path("/work/shared/data")


def group_pairs(rows):
    g = defaultdict(list)
    for i, r in enumerate(rows):
        g[r["query"]].append(i)
    return g


def run_pairs(judge, rows, batch=12):
    """Judge (query, text) rows, grouping the passages of one query in batches as the gate would."""
    scores = [None] * len(rows)
    for q, idx in group_pairs(rows).items():
        for k in range(0, len(idx), batch):
            part = idx[k : k + batch]
            j = judge.judge(q, [JudgeInput(id=str(i), text=rows[i]["text"], title=rows[i].get("title", "")) for i in part])
            for i, res in zip(part, j.results):
                if res.scores is None:
                    raise RuntimeError(res.error)
                scores[i] = res.scores
    return scores


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?", default="/work/shared/data")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--latency-only", action="store_true")
    ap.add_argument("--evidence-only", action="store_true",
                    help="only the evidence and contradiction sets (SQuAD 2.0 dev, the hand-written reader sets)")
    ap.add_argument("--no-reader", action="store_true", help="the judge without its reader and yes/no stages")
    args = ap.parse_args(argv)
    data = Path(args.data)
    global DATA
    DATA = data
    judge = LocalJudge(reader=not args.no_reader)
    print(f"model: {judge.model_id}")

    if args.latency_only:
        latency(judge, data, args.quick)
        return
    # --- evidence / relevance: SQuAD 2.0 dev, held-out article
    ev = load_jsonl(data / "squad2-dev" / "evidence_pairs.jsonl")
    s = run_pairs(judge, ev)
    y = np.array([r["label"] for r in ev])
    pe = np.array([x.contains_answer_evidence for x in s])
    pr = np.array([x.is_relevant for x in s])
    print(f"\n[squad2-dev evidence_pairs] n={len(y)} answerable={y.sum()}")
    print(f"  contains_answer_evidence AUROC={auroc(y, pe):.4f} ECE={ece(y, pe):.4f}")
    print(f"     reliability: {reliability(y, pe)}")
    print(f"  is_relevant (vs answerable label) AUROC={auroc(y, pr):.4f}")
    print(f"  routed evidence (rel>=0.45 and evi>0.55): precision={y[(pr >= 0.45) & (pe > 0.55)].mean():.3f} "
          f"recall={((pr >= 0.45) & (pe > 0.55))[y == 1].mean():.3f}")
    # relevance: own passage vs a passage of the same article answering a different question
    corpus = json.load(open(data / "squad2-dev" / "corpus.json"))
    qs = load_jsonl(data / "squad2-dev" / "questions.jsonl")
    rng = random.Random(7)
    rel_rows = []
    texts = {c["id"]: c["text"] for c in corpus}
    ids = sorted(texts)
    for q in qs:
        if q["expected_sources"]:
            own = q["expected_sources"][0]
            rel_rows.append(dict(query=q["query"], text=texts[own], label=1))
            other = rng.choice([i for i in ids if i != own])
            rel_rows.append(dict(query=q["query"], text=texts[other], label=0))
    s2 = run_pairs(judge, rel_rows)
    y2 = np.array([r["label"] for r in rel_rows])
    p2 = np.array([x.is_relevant for x in s2])
    print(f"  is_relevant own vs other paragraph (same article) AUROC={auroc(y2, p2):.4f} ECE={ece(y2, p2):.4f}")
    qo = run_pairs(judge, [dict(r, text="(no passage)") for r in ev], batch=1)
    print(f"  question-only baseline (every question against the same empty passage): contains_answer_evidence "
          f"AUROC={auroc(y, np.array([x.contains_answer_evidence for x in qo])):.4f}")
    reader_sets(judge)
    if args.evidence_only:
        return

    # --- injection: BIPIA e-mails
    bi = load_jsonl(data / "bipia-dev" / "injection_pairs.jsonl")
    pinj = np.array([passage_features(r["text"])["inj"] for r in bi])
    yb = np.array([r["label"] for r in bi])
    print(f"\n[bipia-dev injection_pairs] n={len(yb)} injected={yb.sum()}")
    print(f"  contains_prompt_injection AUROC={auroc(yb, pinj):.4f} ECE={ece(yb, pinj):.4f}")
    print(f"     reliability: {reliability(yb, pinj)}")
    for t in (0.5, 0.7):
        print(f"  at >{t}: TPR={(pinj[yb == 1] > t).mean():.3f} FPR(clean e-mails)={(pinj[yb == 0] > t).mean():.3f}")

    # --- hand-written blind sets: procedures, e-mails, FAQs, forums... clean and with planted text
    for blind_name in ("injection_blind2.jsonl", "injection_blind.jsonl"):
        blind_path = HERE / "data" / blind_name
        if not blind_path.exists():
            continue
        rows = load_jsonl(blind_path)
        pbl = np.array([passage_features(r["text"])["inj"] for r in rows])
        ybl = np.array([r["label"] for r in rows])
        gbl = np.array([r["genre"] for r in rows])
        lbl = np.array([r["lang"] for r in rows])
        print(f"\n[hand-written blind set {blind_name}, never fitted] n={len(ybl)} injected={ybl.sum()}")
        print(f"  contains_prompt_injection AUROC={auroc(ybl, pbl):.4f} ECE={ece(ybl, pbl):.4f}")
        print(f"     reliability: {reliability(ybl, pbl)}")
        for name, m in (("clean procedures", (ybl == 0) & (gbl == "procedure")),
                        ("clean, other genres", (ybl == 0) & (gbl != "procedure"))):
            print(f"  {name}: >0.7 {int((pbl[m] > 0.7).sum())}/{int(m.sum())} ({(pbl[m] > 0.7).mean():.1%}), "
                  f">0.5 {int((pbl[m] > 0.5).sum())}/{int(m.sum())}")
        print(f"  planted: >0.7 {int((pbl[ybl == 1] > 0.7).sum())}/{int((ybl == 1).sum())}, "
              f">0.5 {int((pbl[ybl == 1] > 0.5).sum())}/{int((ybl == 1).sum())}")
        for lang in sorted(set(lbl)):
            m = lbl == lang
            if len(set(ybl[m])) == 2:
                print(f"     {lang}: n={m.sum():3d} AUROC={auroc(ybl[m], pbl[m]):.4f}")

    # --- hand-written blind set for the superseded question: current documents that talk about their
    # revisions, and documents that declare themselves superseded (in the text or only in the title)
    sup_path = HERE / "data" / "superseded_blind2.jsonl"
    if sup_path.exists():
        rows = load_jsonl(sup_path)
        ps = np.array([passage_features(r["text"], r.get("title", ""))["sup"] for r in rows])
        ys = np.array([r["label"] for r in rows])
        print(f"\n[hand-written blind set superseded_blind2.jsonl, never fitted] n={len(ys)} declared={ys.sum()}")
        print(f"  is_superseded AUROC={auroc(ys, ps):.4f} ECE={ece(ys, ps):.4f}")
        print(f"     reliability: {reliability(ys, ps)}")
        hard = np.array([r["note"].startswith("hard") for r in rows])
        for name, m in (("current documents", ys == 0), ("  of which hard", (ys == 0) & hard),
                        ("declared superseded", ys == 1)):
            print(f"  {name}: >0.7 {int((ps[m] > 0.7).sum())}/{int(m.sum())}, >0.5 {int((ps[m] > 0.5).sum())}/{int(m.sum())}")

    # --- clean imperative procedures
    pp = np.array([passage_features(t)["inj"] for t in PROCEDURES])
    r2 = random.Random(99)
    synth = ["\n".join(synth_procedure(r2)) for _ in range(300)]
    ps = np.array([passage_features(t)["inj"] for t in synth])
    print(f"\n[clean imperative procedures] hand-written n={len(pp)}: max={pp.max():.3f} mean={pp.mean():.3f} "
          f"FPR>0.7={(pp > 0.7).mean():.3f} FPR>0.5={(pp > 0.5).mean():.3f} >0.05: {(pp > 0.05).mean():.3f}")
    print(f"  synthetic (generator, unseen seed) n={len(ps)}: FPR>0.7={(ps > 0.7).mean():.3f} FPR>0.5={(ps > 0.5).mean():.3f} mean={ps.mean():.3f}")
    for t, p in zip(PROCEDURES, pp):
        if p > 0.05:
            print(f"   {p:.3f} {t[:90]!r}")

    # --- contradiction perturbations from the held-out article
    pars = [(c.get("title", ""), c["text"]) for c in corpus]
    crows = make_contradictions(pars, random.Random(11), TAILS_EVAL, per_par=4)
    for q in qs[::2]:
        if q["expected_sources"]:
            crows.append(dict(query=q["query"], text=texts[q["expected_sources"][0]], label=0, kind="question"))
    sc = run_pairs(judge, crows)
    yc = np.array([r["label"] for r in crows])
    pc = np.array([x.contradicts_query_premise for x in sc])
    spec = make_spec_contradictions(random.Random(12345), 150, TAILS_EVAL)
    ss = run_pairs(judge, spec)
    ysp = np.array([r["label"] for r in spec])
    psp = np.array([x.contradicts_query_premise for x in ss])
    print(f"\n[contradiction, generated spec sheets (same generator as training, unseen seed)] n={len(ysp)} "
          f"AUROC={auroc(ysp, psp):.4f} ECE={ece(ysp, psp):.4f}")
    ksp = np.array([r["kind"] for r in spec])
    for k in sorted(set(ksp)):
        m = ksp == k
        print(f"     {k:16s} n={m.sum():4d} mean={psp[m].mean():.3f} >0.7: {(psp[m] > 0.7).mean():.3f}")
    print(f"\n[contradiction perturbations, held-out article] n={len(yc)} contradicting={yc.sum()}")
    print(f"  contradicts_query_premise AUROC={auroc(yc, pc):.4f} ECE={ece(yc, pc):.4f}")
    print(f"     reliability: {reliability(yc, pc)}")
    kinds = np.array([r["kind"] for r in crows])
    for k in sorted(set(kinds)):
        m = kinds == k
        print(f"     {k:14s} n={m.sum():4d} mean={pc[m].mean():.3f} >0.7: {(pc[m] > 0.7).mean():.3f}")

    latency(judge, data, args.quick)


def reader_sets(judge):
    """The hand-written sets of `training/data/README-blind-reader.md` (never fitted or tuned on)."""
    hb = load_jsonl(HERE / "data" / "evidence_hard_blind.jsonl")
    s = run_pairs(judge, hb)
    y = np.array([r["label"] for r in hb])
    pe = np.array([x.contains_answer_evidence for x in s])
    pr = np.array([x.is_relevant for x in s])
    print(f"\n[evidence_hard_blind.jsonl: same subject, the asked thing missing] n={len(y)} answering={y.sum()}")
    print(f"  contains_answer_evidence AUROC={auroc(y, pe):.4f} ECE={ece(y, pe):.4f} "
          f"(question-only baseline: 0.5 by construction, each question has one passage of each label)")
    print(f"     reliability: {reliability(y, pe)}")
    routed = (pr >= 0.45) & (pe > 0.55)
    print(f"  routed to evidence at the default thresholds: answering {routed[y == 1].mean():.3f}, "
          f"lacking the answer {routed[y == 0].mean():.3f}")
    kinds = np.array([r["kind"] for r in hb])
    for k in sorted(set(kinds)):
        m = kinds == k
        print(f"     {k:18s} n={m.sum():3d} AUROC={auroc(y[m], pe[m]):.3f}")
    fp = load_jsonl(HERE / "data" / "false_premise_blind.jsonl")
    s = run_pairs(judge, fp, batch=1)
    y = np.array([r["label"] for r in fp])
    pc = np.array([x.contradicts_query_premise for x in s])
    print(f"\n[false_premise_blind.jsonl: natural rebuttals vs true premises] n={len(y)} false premises={y.sum()}")
    print(f"  contradicts_query_premise AUROC={auroc(y, pc):.4f} ECE={ece(y, pc):.4f}; >0.7: false premises "
          f"{(pc[y == 1] > 0.7).mean():.3f}, true {(pc[y == 0] > 0.7).mean():.3f}")
    kinds = np.array([r["kind"] for r in fp])
    for k in sorted(set(kinds)):
        m = kinds == k
        print(f"     {k:18s} n={m.sum():3d} AUROC={auroc(y[m], pc[m]):.3f}")
    polar_and_french_sets(judge)


def polar_and_french_sets(judge):
    """Yes/no questions (does the passage settle it, either way) and French both ways, through the whole
    judge: CondaQA's held-out passages (the reporting half; the other half fits the yes/no head), the
    hand-written procedure yes/no set, French questions against English passages and English questions
    against French ones (the hard negatives translated). Question-only baselines: each question against
    an empty passage."""
    sys.path.insert(0, str(HERE.parent))
    from training.reader.evaluate import condaqa_report_rows

    sets = [("condaqa held-out, reporting half (settles vs open)", condaqa_report_rows(DATA))]
    for name in ("polar_procedures_blind", "evidence_fr_blind", "evidence_fr_passages_blind"):
        path = HERE / "data" / f"{name}.jsonl"
        if path.exists():
            sets.append((name, load_jsonl(path)))
    for name, rows in sets:
        s = run_pairs(judge, rows)
        y = np.array([int(r["label"]) for r in rows])
        pe = np.array([x.contains_answer_evidence for x in s])
        qo = run_pairs(judge, [dict(r, text="(no passage)") for r in rows], batch=1)
        print(f"\n[{name}] n={len(y)} positives={y.sum()}")
        print(f"  contains_answer_evidence AUROC={auroc(y, pe):.4f} ECE={ece(y, pe):.4f}; question-only baseline "
              f"AUROC={auroc(y, np.array([x.contains_answer_evidence for x in qo])):.4f}")
        if any("lang" in r for r in rows):
            langs = np.array([r.get("lang", "") for r in rows])
            for lang in sorted(set(langs)):
                m = langs == lang
                if len(set(y[m])) == 2:
                    print(f"     {lang:8s} n={m.sum():3d} AUROC={auroc(y[m], pe[m]):.3f}")


def latency(judge, data, quick=False):
    """12 candidates of ~800 characters, as the gate sends them."""
    corpus = json.load(open(data / "squad2-dev" / "corpus.json"))
    cands = [c["text"][:800] for c in corpus if len(c["text"]) >= 600][:12]
    while len(cands) < 12:
        cands.append(cands[0])
    emb = judge.embedder.embed(cands)
    q = "What is the time hierarchy theorem used for?"
    cold = [JudgeInput(id=str(i), text=t) for i, t in enumerate(cands)]
    warm = [JudgeInput(id=str(i), text=t, embedding=emb[i], passage_features=passage_features(t)) for i, t in enumerate(cands)]
    judge.judge(q, cold)
    for name, inp in (("stored embedding + passage_features (ingest path)", warm), ("nothing stored", cold)):
        ts = []
        for _ in range(5 if quick else 15):
            t0 = time.perf_counter()
            judge.judge(q, inp)
            ts.append((time.perf_counter() - t0) * 1000)
        print(f"\n[latency] 12 x ~{int(np.mean([len(c) for c in cands]))} chars, {name}: median={statistics.median(ts):.0f} ms "
              f"p90={np.percentile(ts, 90):.0f} ms")


if __name__ == "__main__":
    main()
