"""Paths, the corpus of the project's own sources, and the held-out split rule."""
import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES_DIR = HERE / "sources"
CORPUS_DIR = HERE / "corpus"
PARTS_DIR = HERE / "parts"
AUDIT_DIR = HERE / "audit"
# The first seven sources and their questions live in the shared real-document data, beside the checkout.
SHARED_REAL = HERE.parents[2] / "shared" / "data" / "real"


def split(doc_id: str) -> str:
    """train / cal / test by document (MD5 of the doc id, the rule of the shared real data): a question
    is never written on a `test` document."""
    k = int(hashlib.md5(("doc:" + doc_id).encode("utf-8")).hexdigest(), 16) % 100
    return "test" if k < 20 else ("cal" if k < 32 else "train")


def source_configs() -> dict[str, dict]:
    out = {}
    for f in sorted(SOURCES_DIR.glob("*.json")):
        cfg = json.loads(f.read_text(encoding="utf-8"))
        if cfg.get("key") != f.stem:
            raise SystemExit(f"{f.name}: its key must be {f.stem!r}")
        out[f.stem] = cfg
    return out


def load_passages(keys=None, shared: bool = False) -> dict[str, dict]:
    """Every passage of the project's sources (`corpus/KEY.jsonl`), and of the shared corpus when asked."""
    rows = {}
    files = sorted(CORPUS_DIR.glob("*.jsonl"))
    if shared and (SHARED_REAL / "corpus" / "passages.jsonl").exists():
        files.append(SHARED_REAL / "corpus" / "passages.jsonl")
    for f in files:
        if keys is not None and f.stem not in keys and f.parent == CORPUS_DIR:
            continue
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    rows[r["id"]] = r
    return rows


def part_source(path: Path) -> str:
    return path.name[: -len(".jsonl")].split(".")[0]


def people_sources() -> tuple[str, ...]:
    """The project's own sources that have questions (`parts/KEY*.jsonl`), sorted."""
    return tuple(sorted({part_source(p) for p in PARTS_DIR.glob("*.jsonl")}))


def people_questions(sources=None) -> list[dict]:
    """Every question of the project's own parts (each with `part` = its source), in file order."""
    return read_parts(PARTS_DIR, sources)


def read_parts(directory: Path, sources=None) -> list[dict]:
    """Every question of the parts in `directory` (`SOURCE.jsonl`, `SOURCE.N.jsonl`), each with `part` =
    its source (every batch of a source together), in file order; only `sources` when given."""
    out = []
    for f in sorted(directory.glob("*.jsonl")):
        src = part_source(f)
        if sources is not None and src not in sources:
            continue
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                q = json.loads(line)
                q["part"] = src
                out.append(q)
    return out
