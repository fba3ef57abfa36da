"""Build a source's passages from a git snapshot of its repository, at pinned commits.

    python -m training.people.passages SNAPSHOTS [--only KEY[,KEY...]]

SNAPSHOTS holds one git directory per repository, named `owner+name` (a bare clone, or a folder with
the git directory in `owner+name/repo` or `owner+name/.git`):
    git clone --bare https://github.com/OWNER/NAME SNAPSHOTS/OWNER+NAME
Each source is described by `sources/KEY.json`; its passages go to `corpus/KEY.jsonl`, one object a
line, in the format of the shared real corpus:
    {"id", "doc_id", "title", "text", "url", "version", "lang", "licence", "source", "status"}
Files are read with `git show COMMIT:PATH`, so the output does not depend on the clone's branch.

A source file (`sources/KEY.json`):
    {"key": KEY, "name": "...", "repo": "owner/name", "genre": "...", "licence": "SPDX or name",
     "licence_file": "path in the repository, read at the pinned commit", "attribution": "...",
     "fmt": "md" | "rst" | "adoc", "lang": "en" | "fr" | null (null: from the path, see lang_globs),
     "lang_globs": {"fr": ["glob", ...]},          (optional: paths in that language)
     "versions": [{"label": "...", "commit": "40 hex", "status": "current" | "archived",
                   "only": ["glob", ...] | null}],
     "include": ["glob", ...], "exclude": ["glob", ...],
     "doc_alias": {"path in an old version": "path of the same document today"},   (optional)
     "inline_headings": ["Comments", ...],   (optional: headings repeated under every item of a list page,
                                              kept as text so that an item's passage keeps its own name)
     "max_passages_per_doc": N}   (optional: a source of few, long documents; default convert.MAX_PASSAGES_PER_DOC)
"""
import argparse
import fnmatch
import hashlib
import json
import subprocess
import sys

from . import convert
from .common import CORPUS_DIR, source_configs


def language(cfg: dict, path: str) -> str:
    for lang, globs in (cfg.get("lang_globs") or {}).items():
        if convert.matches(path, globs):
            return lang
    return convert.detect_lang(path, cfg.get("lang"))


def build_source(cfg: dict, snapshots: str, alias: dict | None = None) -> list[dict]:
    """The source's passages; `alias` maps its repository to another snapshot of the same history (a fork
    holding the same commits), whose files are read while ids and URLs keep the source's own repository."""
    repo = (alias or {}).get(cfg["repo"], cfg["repo"])
    gitdir = convert.find_git_dir(snapshots, repo)
    if not gitdir:
        raise SystemExit(f"{cfg['key']}: no snapshot of {repo} in {snapshots} (a folder named "
                         f"{repo.replace('/', '+')} holding a clone)")
    fmt = cfg["fmt"]
    if fmt not in convert.CONVERTERS:
        raise SystemExit(f"{cfg['key']}: fmt {fmt!r} is not one of {sorted(convert.CONVERTERS)}")
    seen, out = set(), []
    for v in cfg["versions"]:
        label, commit, status, only = v["label"], v["commit"], v["status"], v.get("only")
        try:
            files = convert.list_files(gitdir, commit)
        except subprocess.CalledProcessError:
            raise SystemExit(f"{cfg['key']}: commit {commit} is not in the snapshot of {cfg['repo']}")
        files = [f for f in files if convert.matches(f, cfg["include"]) and not convert.matches(f, cfg.get("exclude", []))]
        if only:
            files = [f for f in files if convert.matches(f, only)]
        for path in sorted(files):
            doc_path = (cfg.get("doc_alias") or {}).get(path, path)
            raw = convert.read_file(gitdir, commit, path)
            blocks = convert.CONVERTERS[fmt](raw)
            inline = set(cfg.get("inline_headings") or [])
            if inline:  # sub-headings that repeat under every item ("Comments", "Details"): kept as text, not new sections
                blocks = [("p", t) if k == "h" and t in inline else (k, t) for k, t in blocks]
            doc_title = next((t for k, t in blocks if k == "h"), path.rsplit("/", 1)[-1])
            lang = language(cfg, path)
            count = 0
            for heading, text in convert.chunk_blocks(blocks):
                if not convert.prose_ok(text):
                    continue
                h = hashlib.sha1((cfg["key"] + label + text).encode()).hexdigest()
                if h in seen:
                    continue
                seen.add(h)
                count += 1
                if count > cfg.get("max_passages_per_doc", convert.MAX_PASSAGES_PER_DOC):
                    break
                title = doc_title if not heading or heading == doc_title else f"{doc_title} › {heading}"
                out.append({
                    "id": f"{cfg['key']}/{convert.slug(doc_path)}@{convert.slug(label)}#{count:03d}",
                    "doc_id": f"{cfg['key']}/{doc_path}",
                    "title": title, "text": text,
                    "url": f"https://github.com/{cfg['repo']}/blob/{commit}/{path}",
                    "version": label, "lang": lang, "licence": cfg["licence"],
                    "source": f"{cfg['repo']}@{commit}:{path}", "status": status,
                })
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snapshots", help="folder of git snapshots named owner+name")
    ap.add_argument("--only", help="comma-separated source keys (default: every source)")
    ap.add_argument("--alias", action="append", default=[], metavar="REPO=SNAPSHOT_REPO",
                    help="read a repository from a snapshot of a fork with the same history (px4: "
                         "PX4/PX4-user_guide=pumabanks/PX4-user_guide)")
    args = ap.parse_args(argv)
    alias = dict(x.split("=", 1) for x in args.alias)
    configs = source_configs()
    keys = args.only.split(",") if args.only else sorted(configs)
    for key in keys:
        if key not in configs:
            raise SystemExit(f"no source {key!r}: sources/ has {', '.join(sorted(configs)) or 'none'}")
        rows = build_source(configs[key], args.snapshots, alias)
        CORPUS_DIR.mkdir(exist_ok=True)
        with open(CORPUS_DIR / f"{key}.jsonl", "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        docs = {r["doc_id"] for r in rows}
        langs = {}
        for r in rows:
            langs[r["lang"]] = langs.get(r["lang"], 0) + 1
        print(f"{key}: {len(rows)} passages from {len(docs)} documents {langs} -> corpus/{key}.jsonl", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
