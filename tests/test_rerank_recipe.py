"""The reranker trial's pure parts (training/rerank/): training groups, reordering, and a weight chosen
without the source it is applied to."""

from __future__ import annotations

import random

from training.rerank.common import groups_of, passage_text
from training.rerank.evaluate import found, nested_weight, order


def _pool(*docs: str) -> list[dict]:
    return [{"doc": d, "title": f"T {d}", "text": f"text of {d}", "score": 1.0 - n / 100} for n, d in enumerate(docs)]


def test_groups_hold_one_answering_passage_first_and_none_after():
    rows = [{"query": "q1", "expected_sources": ["b"], "pool": _pool("a", "b", "c", "d", "e", "f", "g", "h", "i")},
            # the answer is not in the pool: it comes from the corpus
            {"query": "q2", "expected_sources": ["z"], "pool": _pool("a", "c")}]
    passages = {"z": {"title": "Z", "text": "the answer"}}
    groups = groups_of(rows, passages, group=6, rng=random.Random(1))
    (q1, texts1), (q2, texts2) = groups
    assert q1 == "q1" and texts1[0] == passage_text("T b", "text of b") and len(texts1) == 6
    assert passage_text("T b", "text of b") not in texts1[1:]
    # half of the others are the top of the pool, in order
    assert texts1[1:3] == [passage_text("T a", "text of a"), passage_text("T c", "text of c")]
    assert texts2 == ["Z\nthe answer", passage_text("T a", "text of a"), passage_text("T c", "text of c")]


def test_order_by_fused_plus_weighted_logit():
    pool = _pool("a", "b", "c")
    assert [c["doc"] for c in order(pool, [0.0, 0.0, 50.0], 0.01)] == ["c", "a", "b"]
    assert [c["doc"] for c in order(pool, [0.0, 0.0, 50.0], 0.0)] == ["a", "b", "c"]
    assert [c["doc"] for c in order(pool, [3.0, 1.0, 2.0], None)] == ["a", "c", "b"]
    # only the first `depth` are reordered
    assert [c["doc"] for c in order(pool, [0.0, 9.0], 1.0, depth=2)] == ["b", "a", "c"]
    assert found(order(pool, [0.0, 0.0, 50.0], 0.01), {"c"}, 1)


def test_the_weight_for_a_source_is_chosen_on_the_others():
    # source A's questions gain from a strong weight, B's lose from it: each is given the other's choice
    rows, scores = [], {}
    for n in range(3):
        rows.append({"id": f"A{n}", "part": "A", "expected_sources": ["x"], "pool": _pool("p", "q", "x")})
        scores[f"A{n}"] = [0.0, 0.0, 1.0]  # fused p 1.0, q 0.99, x 0.98: x comes first from w = 0.05 on
        rows.append({"id": f"B{n}", "part": "B", "expected_sources": ["p"], "pool": _pool("p", "q", "x")})
        scores[f"B{n}"] = [0.0, 0.0, 1.0]
    chosen = nested_weight(rows, scores, k=1, depth=3)
    # on B alone any weight that lifts x over p loses, so A gets the smallest weight; on A alone the
    # weights that lift x win, so B gets the smallest of those
    assert chosen["A"] == 0.02
    assert chosen["B"] == 0.05
