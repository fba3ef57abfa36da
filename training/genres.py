"""Ordinary text of many genres, none of it addressed to an AI: the negatives of the injection question
and its leave-one-genre-out figure.

Each genre is a list of passages `{"genre", "doc", "text"}` (400-1,500 characters, whole paragraphs where
the source has them), read from files on this machine or in `../shared/data`, never from the network:

| genre | source | licence |
|---|---|---|
| `db_docs_fr` | PostgreSQL documentation, French translation (`real/corpus`, `pgdocs-fr/`) | PostgreSQL Licence |
| `cloud_docs` | OpenStack keystone, glance, swift, cinder, designate docs (`real/corpus`, `openstack/`) | Apache-2.0 |
| `ops_manual_fr` | Vitam installation and operations manuals (`real/corpus`, `vitam/`) | Licence Ouverte 2.0 |
| `security_baseline` | CISA SCuBA secure configuration baselines (`real/corpus`, `scuba/`) | CC0 (US Government work) |
| `gov_guidance` | Etalab guides, data.gouv.fr docs, GC guardrails and Notify, GOV.UK Notify (`real/corpus`) | Licence Ouverte 2.0, MIT, OGL v3 |
| `encyclopedia_en` | SQuAD 1.0 paragraphs (Wikipedia, `train/squad1_train_xpara`) | CC BY-SA 4.0 |
| `encyclopedia_fr` | PIAF paragraphs (French Wikipedia, `train/piaf_fr`) | MIT (PIAF), CC BY-SA (Wikipedia) |
| `email` | BIPIA's clean e-mails (`bipia-dev`, label 0); read by no fit, only measured | MIT |
| `man_pages` | Debian's manual pages on this machine (`/usr/share/man/man1`, `man8`) | each package's own (`/usr/share/doc/PKG/copyright`) |
| `python_docs` | docstrings of the Python standard library | PSF Licence |
| `readme` | Debian's package READMEs on this machine (`/usr/share/doc/*/README*`) | each package's own |

None of this text is shipped: only weights fitted on it. `python -m training.genres --stats` prints what it
finds; the passages are cached in `.cache/injection/genres.jsonl`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
CACHE = ROOT / ".cache" / "injection" / "genres.jsonl"

REAL_GENRES = {"pgdocs": "db_docs_fr", "openstack": "cloud_docs", "vitam": "ops_manual_fr", "scuba": "security_baseline",
               "etalab": "gov_guidance", "datagouv": "gov_guidance", "gc": "gov_guidance", "govuk": "gov_guidance"}
# genres that no fit reads, not even the shipped one (measured only)
MEASURE_ONLY = {"email"}
# passages kept per genre (by hash of the document, so the same ones every run): the measured half at most
# MEASURE_MAX (4 a document), the fitted half at most FIT_MAX (20 a document)
MEASURE_MAX = 350
FIT_MAX = 4000


def h(s: str, mod: int = 1000) -> int:
    return int(hashlib.md5(s.encode("utf-8")).hexdigest(), 16) % mod


def doc_part(doc: str) -> str:
    """Half the documents of every genre are fitted on (when the genre is), half only measured."""
    if doc.startswith("bipia:"):
        return "measure"
    return "fit" if h("genre-doc:" + doc, 2) == 0 else "measure"


def chunks(text: str, lo: int = 400, hi: int = 1500) -> list[str]:
    """Whole paragraphs gathered into passages of `lo`-`hi` characters (a longer paragraph is cut at a
    sentence end)."""
    paras = [re.sub(r"[ \t]+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
    out, cur = [], ""
    for p in paras:
        if not p:
            continue
        while len(p) > hi:
            cut = max(p.rfind(". ", 0, hi), p.rfind("\n", 0, hi))
            cut = cut + 1 if cut > lo // 2 else hi
            if cur:
                out.append(cur)
                cur = ""
            out.append(p[:cut].strip())
            p = p[cut:].strip()
        if cur and len(cur) + len(p) + 2 > hi:
            out.append(cur)
            cur = ""
        cur = (cur + "\n\n" + p).strip()
        if len(cur) >= lo:
            out.append(cur)
            cur = ""
    if cur and len(cur) >= lo // 2:
        out.append(cur)
    return [c for c in out if len(c) >= lo // 2]


def _jsonl(p: Path):
    with open(p, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def real_corpus() -> list[dict]:
    out = []
    p = DATA / "real" / "corpus" / "passages.jsonl"
    for r in _jsonl(p):
        g = REAL_GENRES.get(r["doc_id"].split("/")[0].split("-")[0])
        if g:
            out.append({"genre": g, "doc": r["doc_id"], "text": r["text"]})
    return out


def squad() -> list[dict]:
    seen, out = set(), []
    for r in _jsonl(DATA / "train" / "squad1_train_xpara" / "data.jsonl"):
        t = r["text"]
        if t not in seen:
            seen.add(t)
            out.append({"genre": "encyclopedia_en", "doc": "squad:" + (r.get("title") or t[:40]), "text": t})
    return out


def piaf() -> list[dict]:
    seen, out = set(), []
    for r in _jsonl(DATA / "train" / "piaf_fr" / "data.jsonl"):
        t = r.get("context") or ""
        if t and t not in seen:
            seen.add(t)
            out.append({"genre": "encyclopedia_fr", "doc": "piaf:" + (r.get("title") or t[:40]), "text": t})
    return out


def email() -> list[dict]:
    seen, out = set(), []
    for r in _jsonl(DATA / "bipia-dev" / "injection_pairs.jsonl"):
        t = r["text"]
        if int(r.get("label", 0)) == 0 and t not in seen:
            seen.add(t)
            out.append({"genre": "email", "doc": "bipia:" + hashlib.md5(t.encode()).hexdigest()[:10], "text": t})
    return out


def man_pages(limit: int = 900) -> list[dict]:
    files = []
    for sect in ("man1", "man8", "man5"):
        d = Path("/usr/share/man") / sect
        if d.is_dir():
            files.extend(sorted(d.iterdir()))
    files = [f for f in files if f.is_file() and not f.is_symlink()]
    files.sort(key=lambda f: h("man:" + f.name, 10**6))
    out = []
    env = dict(os.environ, MANWIDTH="2000", MAN_KEEP_FORMATTING="0", LC_ALL="C.UTF-8")
    for f in files[: limit * 2]:
        try:
            r = subprocess.run(["man", "-P", "cat", "-l", str(f)], capture_output=True, env=env, timeout=20)
        except Exception:
            continue
        text = r.stdout.decode("utf-8", "replace")
        text = re.sub(r".\x08", "", text)
        lines = [ln.strip() for ln in text.splitlines()]
        text = "\n".join(lines)
        ps = chunks(text)
        if ps:
            out.extend({"genre": "man_pages", "doc": "man:" + f.name, "text": p} for p in ps[:6])
        if len({o["doc"] for o in out}) >= limit:
            break
    return out


def python_docs(names: list[str] | None = None) -> list[dict]:
    """Docstrings of the standard library's modules (`names`, or every importable one)."""
    import importlib
    import inspect
    import pkgutil
    import warnings

    out = []
    skip = ("test", "idlelib", "tkinter", "turtle", "lib2to3", "antigravity", "this", "__main__", "ensurepip", "pydoc_data")
    if names is None:
        names = sorted(m.name for m in pkgutil.iter_modules() if m.module_finder.path.startswith(sys.base_prefix))
    for name in names:
        if name.startswith("_") or name.startswith(skip):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = importlib.import_module(name)
        except BaseException:
            continue
        docs = [inspect.getdoc(mod) or ""]
        for _, obj in sorted(vars(mod).items()):
            if getattr(obj, "__module__", None) == name and (inspect.isclass(obj) or inspect.isfunction(obj)):
                docs.append(inspect.getdoc(obj) or "")
        for d in docs:
            for p in chunks(d, lo=300):
                out.append({"genre": "python_docs", "doc": "py:" + name, "text": p})
    return out


def readmes() -> list[dict]:
    out = []
    for d in sorted(Path("/usr/share/doc").iterdir()):
        for f in sorted(d.glob("README*")):
            if not f.is_file() or f.suffix in (".html", ".pdf"):
                continue
            try:
                raw = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
                text = raw.decode("utf-8")
            except Exception:
                continue
            for p in chunks(text)[:8]:
                out.append({"genre": "readme", "doc": "readme:" + d.name, "text": p})
    return out


def collect() -> list[dict]:
    rows = real_corpus() + squad() + piaf() + email() + man_pages() + python_docs() + readmes()
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["genre"], []).append(r)
    out = []
    for g, rs in sorted(by.items()):
        rs.sort(key=lambda r: h(r["doc"] + "|" + r["text"][:80], 10**9))
        # at most a few passages per document, so that no document fills a genre
        per_doc: dict[str, int] = {}
        n = {"fit": 0, "measure": 0}
        for r in rs:
            part = doc_part(r["doc"])
            cap, per = (MEASURE_MAX, 4 if not r["doc"].startswith("bipia:") else 1) if part == "measure" else (FIT_MAX, 20)
            if per_doc.get(r["doc"], 0) >= per or n[part] >= cap:
                continue
            per_doc[r["doc"]] = per_doc.get(r["doc"], 0) + 1
            n[part] += 1
            r["part"] = part
            out.append(r)
    return out


def load(refresh: bool = False) -> list[dict]:
    if CACHE.exists() and not refresh:
        return list(_jsonl(CACHE))
    rows = collect()
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return rows


if __name__ == "__main__":
    rows = load(refresh="--refresh" in sys.argv)
    import collections

    c = collections.Counter((r["genre"], r["part"]) for r in rows)
    for g in sorted({r["genre"] for r in rows}):
        print(f"{g:20s} fit {c[(g, 'fit')]:4d}  measure {c[(g, 'measure')]:4d}")
    print("total", len(rows))
