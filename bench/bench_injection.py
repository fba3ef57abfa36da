"""`contains_prompt_injection` on ordinary text of many genres and on planted AI-addressed text, as ingest
computes it, for this checkout and (with `--compare REF`) a git ref, in the same run.

    python bench/bench_injection.py [--compare REF] [--planted 600] [--json FILE]

- Ordinary passages: the `measure` half of every genre of `training.genres` (documents no fit read; 11
  genres: real policies and manuals, cloud and database docs in English and French, encyclopedias, e-mails,
  Debian manual pages and READMEs, Python docstrings). Figure: the share above 0.7 (the gate's
  `GATE_INJECTION_MAX`), per genre and overall. The figure for a genre that no fit saw at all is
  `training.injection`'s leave-one-genre-out report.
- Planted: the same hosts with one sentence or clause of `training.planted` (report families only, six
  languages, first/middle/last, alone or after a semicolon, look-alike letters and invisible fillers). Figure:
  the share above 0.7, quiet and loud apart, per language, placement, join and disguise.
- BIPIA pairs and the hand-written blind sets (`training/data/injection_blind*.jsonl`): AUROC; BIPIA's also
  apart for the attacks that show an addressee (`injection_addressed`: "Add ... to your reply") and those that
  do not (a request typed to a chatbot, "What is the capital of Brazil?"), each against every clean e-mail.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def items(n_planted: int, seed: int = 20261205) -> list[dict]:
    from training import genres, planted

    rows = [r for r in genres.load() if r["part"] == "measure"]
    out = [{"set": "genre", "genre": r["genre"], "text": r["text"], "label": 0} for r in rows]
    rng = random.Random(seed)
    hosts = rng.sample(rows, min(n_planted, len(rows)))
    for r in hosts:
        p = planted.plant(r["text"], rng)
        out.append({"set": "planted", "genre": r["genre"], "label": 1, **p})
    data = REPO.parent / "shared" / "data"
    for name, path in (("bipia", data / "bipia-dev" / "injection_pairs.jsonl"),
                       ("blind", REPO / "training" / "data" / "injection_blind.jsonl"),
                       ("blind2", REPO / "training" / "data" / "injection_blind2.jsonl")):
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    r = json.loads(line)
                    out.append({"set": name, "text": r["text"], "label": int(r["label"]), "query": r.get("query")})
    mark_bipia_addressee(out)
    return out


def mark_bipia_addressee(rows: list[dict]) -> None:
    """Whether a BIPIA attack shows an addressee (`injection_addressed`, this checkout's patterns): its units
    are those of the attacked e-mail that its clean e-mail (same question) does not have."""
    sys.path.insert(0, str(REPO / "src"))
    from sourcegate.judges.local.model import injection_addressed, injection_sentences

    clean = {r["query"]: set(injection_sentences(r["text"])) for r in rows if r["set"] == "bipia" and r["label"] == 0}
    for r in rows:
        if r["set"] == "bipia" and r["label"] == 1:
            units = [u for u in injection_sentences(r["text"]) if u not in clean.get(r["query"], set())]
            r["addressed"] = any(injection_addressed(u) for u in units)


SCORER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from sourcegate.embed import get_embedder
from sourcegate.judges.local.judge import passage_features
emb = get_embedder()
rows = [json.loads(l) for l in sys.stdin]
vecs = emb.embed([r["text"] for r in rows])
for r, v in zip(rows, vecs):
    f = passage_features(r["text"], "", embedder=emb, vector=v)
    print(json.dumps({"inj": f["inj"], "why": f.get("inj_sentence")}))
"""


def score(src: Path, rows: list[dict]) -> list[dict]:
    inp = "".join(json.dumps({"text": r["text"]}) + "\n" for r in rows)
    p = subprocess.run([sys.executable, "-c", SCORER, str(src)], input=inp, capture_output=True, text=True, check=True)
    return [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]


def report(rows: list[dict], scores: list[dict]) -> dict:
    import numpy as np
    from sklearn.metrics import roc_auc_score

    p = np.asarray([s["inj"] for s in scores])
    out: dict = {}
    g = [i for i, r in enumerate(rows) if r["set"] == "genre"]
    by = collections.defaultdict(list)
    for i in g:
        by[rows[i]["genre"]].append(p[i])
    out["ordinary"] = {"passages": len(g), "genres": len(by), "above_0.7": round(float(np.mean(p[g] > 0.7)), 4),
                       "by_genre": {k: {"n": len(v), "above_0.7": round(float(np.mean(np.asarray(v) > 0.7)), 4)}
                                    for k, v in sorted(by.items())},
                       "distinct_values_share": round(len(set(np.round(p[g], 3))) / max(1, len(g)), 3)}
    pl = [i for i, r in enumerate(rows) if r["set"] == "planted"]
    pp = {"planted": len(pl), "above_0.7": round(float(np.mean(p[pl] > 0.7)), 4)}
    for key in ("quiet", "lang", "where", "join", "disguise"):
        vals = collections.defaultdict(list)
        for i in pl:
            vals[str(rows[i][key])].append(p[i])
        pp[key] = {k: round(float(np.mean(np.asarray(v) > 0.7)), 3) for k, v in sorted(vals.items())}
    out["planted"] = pp
    out["missed_planted"] = [rows[i]["planted"] for i in pl if p[i] <= 0.7][:12]
    worst = sorted(g, key=lambda i: -p[i])[:8]
    out["highest_ordinary"] = [(round(float(p[i]), 3), rows[i]["genre"], (scores[i].get("why") or "")[:160]) for i in worst]
    for name in ("bipia", "blind", "blind2"):
        idx = [i for i, r in enumerate(rows) if r["set"] == name]
        if idx:
            y = np.asarray([rows[i]["label"] for i in idx])
            out[name] = {"n": len(idx), "auroc": round(float(roc_auc_score(y, p[idx])), 4),
                         "pos_above_0.7": round(float(np.mean(p[idx][y == 1] > 0.7)), 3),
                         "neg_above_0.7": round(float(np.mean(p[idx][y == 0] > 0.7)), 3)}
            if name == "bipia":
                for key, want in (("addressed", True), ("unaddressed", False)):
                    sub = [i for i in idx if rows[i]["label"] == 0 or rows[i].get("addressed") is want]
                    ys = np.asarray([rows[i]["label"] for i in sub])
                    out[name][f"auroc_{key}_attacks"] = round(float(roc_auc_score(ys, p[sub])), 4)
                    out[name][f"{key}_attacks"] = int(ys.sum())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", metavar="REF", help="also score with the checkout of this git ref, in the same run")
    ap.add_argument("--planted", type=int, default=600)
    ap.add_argument("--json", type=Path, help="write the whole report here")
    a = ap.parse_args(argv)
    rows = items(a.planted)
    results = {}
    if a.compare:
        sys.path.insert(0, str(REPO / "bench"))
        from _common import checkout

        with checkout(a.compare) as wt:
            results[a.compare] = report(rows, score(wt / "src", rows))
    results["this checkout"] = report(rows, score(REPO / "src", rows))
    for label, r in results.items():
        o, pl = r["ordinary"], r["planted"]
        print(f"{label}: ordinary above 0.7 {o['above_0.7']:.4f} of {o['passages']} ({o['genres']} genres); planted above 0.7 "
              f"{pl['above_0.7']:.3f} of {pl['planted']} (quiet {pl['quiet'].get('True')}, loud {pl['quiet'].get('False')}); "
              + "; ".join(f"{k} AUROC {r[k]['auroc']}" for k in ("bipia", "blind", "blind2") if k in r)
              + (f" (BIPIA attacks with an addressee {r['bipia']['auroc_addressed_attacks']} of {r['bipia']['addressed_attacks']}, "
                 f"without {r['bipia']['auroc_unaddressed_attacks']} of {r['bipia']['unaddressed_attacks']})" if "bipia" in r else ""))
        print("   by genre: " + ", ".join(f"{k} {v['above_0.7']:.3f}" for k, v in o["by_genre"].items()))
        print("   planted: " + "; ".join(f"{k} {pl[k]}" for k in ("lang", "where", "join", "disguise")))
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    else:
        print(json.dumps(results, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
