"""What the reranker recipe's steps share, free of torch (so that tests and `evaluate.py` run without it)."""

from __future__ import annotations

import json
import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "real"
CACHE = REPO / ".cache" / "rerank"
RERANK_DEPTH = 30  # the fused pool's first passages the reranker orders (and negatives are drawn from)


def passage_text(title: str | None, text: str) -> str:
    """What the reranker reads of a passage: its title (document and heading path), then its text."""
    return f"{title}\n{text}" if title and not text.startswith(title) else text


def load_pools(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def corpus() -> dict[str, dict]:
    rows = [json.loads(x) for x in (DATA / "corpus" / "passages.jsonl").read_text().splitlines() if x.strip()]
    return {r["id"]: r for r in rows}


def groups_of(rows: list[dict], passages: dict[str, dict], group: int, rng: random.Random) -> list[tuple[str, list[str]]]:
    """One training group per question: (question, [an answering passage, then `group - 1` others of its
    pool]). The answering passage is one of the pool's if it holds one, else the expected passage from the
    corpus; the others are the pool's top non-answering passages for half of them, the rest drawn from
    the remainder of its first RERANK_DEPTH."""
    out = []
    for r in rows:
        expected = set(r["expected_sources"])
        pool = r["pool"][:RERANK_DEPTH]
        pos = [c for c in pool if c["doc"] in expected]
        if pos:
            p = rng.choice(pos)
            pos_text = passage_text(p["title"], p["text"])
        else:
            pid = rng.choice(sorted(expected))
            if pid not in passages:
                continue
            pos_text = passage_text(passages[pid].get("title"), passages[pid]["text"])
        negs = [c for c in pool if c["doc"] not in expected]
        k = group - 1
        top = negs[: k // 2]
        rest = negs[k // 2:]
        rng.shuffle(rest)
        chosen = top + rest[: k - len(top)]
        if not chosen:
            continue
        out.append((r["query"], [pos_text] + [passage_text(c["title"], c["text"]) for c in chosen]))
    return out
