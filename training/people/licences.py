"""Copy each source's licence, as read at its pinned commit, into `licences/`, beside the passages and
questions built from it.

    python -m training.people.licences SNAPSHOTS [--only KEY[,KEY...]]

Writes `licences/KEY.txt`: the source's `licence_file` at its current version's commit, headed by the
repository, commit, licence name and attribution of `sources/KEY.json`. A source whose repository only
states its licence in a notice (the GFDL manuals) also gets the licence's full text where the notice
names it and the system has it (`/usr/share/common-licenses`, as on Debian).
"""
import argparse
import os
import subprocess
import sys

from . import convert
from .common import HERE, source_configs

LICENCES_DIR = HERE / "licences"
# Full licence texts for sources that state their licence only in a notice: (licence prefix, text file)
SYSTEM_TEXTS = [("GFDL-1", "/usr/share/common-licenses/GFDL-1.3"), ("GPL-2", "/usr/share/common-licenses/GPL-2"),
                ("CC BY-SA 3.0", str(HERE.parents[2] / "shared" / "data" / "train" / "licenses" / "CC-BY-SA-3.0-Unported.txt")),
                ("Licence Ouverte 2.0", str(HERE.parents[2] / "shared" / "data" / "real" / "licences" / "Licence-Ouverte-2.0-etalab-guides.md"))]


def write(cfg: dict, snapshots: str, alias: dict) -> str:
    repo = alias.get(cfg["repo"], cfg["repo"])
    gitdir = convert.find_git_dir(snapshots, repo)
    if not gitdir:
        raise SystemExit(f"{cfg['key']}: no snapshot of {repo} in {snapshots}")
    current = next(v for v in cfg["versions"] if v["status"] == "current")
    try:
        text = convert.read_file(gitdir, current["commit"], cfg["licence_file"])
    except subprocess.CalledProcessError:
        raise SystemExit(f"{cfg['key']}: {cfg['licence_file']} is not in {repo} at {current['commit']}")
    head = (f"{cfg['name']}\nrepository: https://github.com/{cfg['repo']} at {current['commit']}\n"
            f"licence: {cfg['licence']}\nattribution: {cfg['attribution']}\n"
            f"file: {cfg['licence_file']}\n\n")
    full = ""
    for prefix, path in SYSTEM_TEXTS:
        if cfg["licence"].startswith(prefix) and os.path.exists(path) and (len(text) < 4000 or "README" in cfg["licence_file"]):
            full = f"\n\n--- {os.path.basename(path)}, full text ---\n\n" + open(path, encoding="utf-8").read()
            break
    LICENCES_DIR.mkdir(exist_ok=True)
    out = LICENCES_DIR / f"{cfg['key']}.txt"
    out.write_text(head + text + full, encoding="utf-8")
    return str(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snapshots")
    ap.add_argument("--only")
    ap.add_argument("--alias", action="append", default=[], metavar="REPO=SNAPSHOT_REPO",
                    help="read a repository from another snapshot of the same history (a fork)")
    a = ap.parse_args(argv)
    alias = dict(x.split("=", 1) for x in a.alias)
    configs = source_configs()
    for key in (a.only.split(",") if a.only else sorted(configs)):
        print(write(configs[key], a.snapshots, alias), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
