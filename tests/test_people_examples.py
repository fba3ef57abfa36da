"""The reader's examples from people's questions (`training/reader/people.py`): labels come from the
question's labels only, the span is taught only where the answer's place is known, and an archived
revision or a superseded question's forbidden revision is never a negative."""

from __future__ import annotations

import random

import pytest

from training.reader import people as P


def _p(pid: str, text: str) -> tuple[str, dict]:
    return pid, {"id": pid, "text": text}


PASSAGES = dict([
    _p("doc/a#1", "Retention. Deleted datasets are kept for 30 days before they are purged from the archive."),
    _p("doc/a#2", "Retention policies are set per project by an administrator in the console."),
    _p("doc/b#1", "In the old version, deleted datasets were kept for 90 days."),
    _p("doc/c#1", "Uploading a dataset requires an API key with write permission."),
    _p("doc/d#1", "A long passage without the answer's text. " * 40),
])


def _units(q: dict, near=(), fits=lambda q, c: len(c) < 700):
    return P.units_for(q, PASSAGES, list(near), random.Random(0), fits)


def test_span_question_labels_and_span():
    q = {"id": "x-1", "query": "how long are deleted datasets kept", "kind": "factual",
         "expected_sources": ["doc/a#1"], "relevant_sources": ["doc/a#2"], "forbidden_sources": [],
         "archived_sources": ["doc/b#1"], "answer": "30 days"}
    exs = _units(q, near=["doc/c#1", "doc/b#1"])
    pos = [e for e in exs if e["kind"] == "qa" and e["ans"] == 1]
    assert len(pos) == 1 and pos[0]["c"][pos[0]["a0"]:pos[0]["a1"]] == "30 days"
    negs = [e for e in exs if e["kind"] == "qa" and e["ans"] == 0]
    # the hard negative first, then the nearest passage; the agreeing archived revision is left out
    assert [e["c"] for e in negs] == [PASSAGES["doc/a#2"]["text"], PASSAGES["doc/c#1"]["text"]]
    assert all("90 days" not in e["c"] for e in exs)
    # the answering passage is not read as contradicting the question
    assert [e["nli"] for e in exs if e["kind"] == "nli"] == [-1]


def test_answer_place_unknown_keeps_the_answerable_label_only():
    q = {"id": "x-2", "query": "retention of deleted data", "kind": "fr_en", "expected_sources": ["doc/a#1"],
         "relevant_sources": [], "forbidden_sources": [], "answer": "trente jours"}
    pos = [e for e in _units(q) if e["kind"] == "qa"]
    assert pos[0]["ans"] == 1 and pos[0]["a0"] == -100
    # a passage too long for one window, its answer's place unknown: no label can be trusted
    q2 = dict(q, expected_sources=["doc/d#1"])
    assert not [e for e in _units(q2) if e.get("ans") == 1]


def test_forbidden_revisions_and_twins_are_not_negatives():
    q = {"id": "x-3", "query": "how long are deleted datasets kept now", "kind": "superseded",
         "expected_sources": ["doc/a#1"], "relevant_sources": [], "forbidden_sources": ["doc/b#1"], "answer": "30 days"}
    assert all("90 days" not in e["c"] for e in _units(q))
    # nor a twin, even when it is among the nearest passages: the twin stage sets it aside, not its text
    t = dict(q, kind="twin")
    assert all("90 days" not in e["c"] for e in _units(t, near=["doc/b#1"]))


def test_yes_no_and_false_premise():
    yes = {"id": "x-4", "query": "are deleted datasets kept for a while?", "kind": "yes_no_yes",
           "expected_sources": ["doc/a#1"], "relevant_sources": ["doc/c#1"], "forbidden_sources": [], "answer": "30 days"}
    exs = _units(yes)
    assert [(e["pol"], e["c"][:9]) for e in exs if e["kind"] == "polar"] == [(0, "Retention"), (2, "Uploading")]
    no = dict(yes, kind="yes_no_no")
    assert [e["pol"] for e in _units(no) if e["kind"] == "polar"][0] == 1
    fp = {"id": "x-5", "query": "since deleted datasets are kept forever, how do I restore one?",
          "kind": "false_premise", "expected_sources": ["doc/a#1"], "relevant_sources": ["doc/c#1"],
          "forbidden_sources": []}
    exs = _units(fp)
    assert [e["nli"] for e in exs if e["kind"] == "nli"] == [2, 1]
    assert all(e["ans"] == 0 for e in exs if e["kind"] == "qa")


def test_split_by_document():
    a = {"id": "1", "expected_sources": ["doc/a#1"]}
    b = {"id": "2", "expected_sources": ["doc/a#7"], "relevant_sources": ["doc/z#1"]}
    assert P.question_doc(a) == P.question_doc(b) == "doc/a"
    assert P.split_of(a) == P.split_of(b)
    assert P.split_of({"id": "3"}) in ("fit", "cal")


def test_span_loss_ignores_unknown_places():
    torch = pytest.importorskip("torch")
    from training.reader.train import loss_of

    class Fixed(torch.nn.Module):
        def forward(self, ids, am, tt):
            n, L = ids.shape
            z = torch.zeros(n, L, requires_grad=True)
            return z, z, torch.zeros(n), torch.zeros(n, 3), torch.zeros(n, 3)

    ids = torch.ones(2, 4, dtype=torch.long)
    b = {"input_ids": ids, "attention_mask": ids, "token_type_ids": ids, "kind": "qa",
         "start": torch.tensor([-100, -100]), "end": torch.tensor([-100, -100]), "ans": torch.tensor([1.0, 1.0])}
    only_ans = loss_of(Fixed(), b, False, "cpu")
    only_ans = only_ans.detach()
    assert torch.isfinite(only_ans) and abs(float(only_ans) - 0.6931) < 1e-3  # the answerable loss alone
    b["start"], b["end"] = torch.tensor([2, -100]), torch.tensor([3, -100])
    assert float(loss_of(Fixed(), b, False, "cpu").detach()) > float(only_ans)  # the known span adds its loss


def test_nearest_list_reads_the_cheap_listing_when_the_judges_pairs_are_absent(tmp_path, monkeypatch):
    import json

    listing = {"x-1": ["doc/a#1", "doc/c#1"]}
    (tmp_path / "nearest.json").write_text(json.dumps(listing))
    monkeypatch.setattr(P, "PAIRS", tmp_path / "pairs.jsonl")
    monkeypatch.setattr(P, "NEAREST", tmp_path / "nearest.json")
    assert P.nearest() == listing
    # the judge's pairs, when collected, are what the examples read
    (tmp_path / "pairs.jsonl").write_text(json.dumps({"qid": "x-1", "passage": "doc/a#2"}) + "\n")
    assert P.nearest() == {"x-1": ["doc/a#2"]}


def test_candidates_are_the_labelled_passages_then_the_nearest():
    np = pytest.importorskip("numpy")
    from training import real_heads as R

    ids = ["p1", "p2", "p3", "p4"]
    vecs = np.eye(4, dtype=np.float32)
    q = {"expected_sources": ["p3"], "relevant_sources": ["p4", "gone"], "forbidden_sources": [],
         "archived_sources": []}
    # nearest to the question: p2, then p1; labelled passages first, unknown ids dropped, no repeats
    got = R.candidates_for(q, ids, vecs, np.array([0.5, 0.9, 0.1, 0.0], dtype=np.float32))
    assert got[:2] == ["p3", "p4"] and got[2:4] == ["p2", "p1"] and sorted(got) == ids


def test_max_others_bounds_the_passages_that_do_not_answer_hard_negatives_first():
    q = {"id": "x-9", "query": "how long are deleted datasets kept", "kind": "factual",
         "expected_sources": ["doc/a#1"], "relevant_sources": ["doc/a#2"], "forbidden_sources": [], "answer": "30 days"}
    near = ["doc/c#1", "doc/d#1"]
    negs = lambda exs: [e["c"] for e in exs if e["kind"] == "qa" and e["ans"] == 0]  # noqa: E731
    assert len(negs(_units(q, near=near))) == 3
    one = P.units_for(q, PASSAGES, near, random.Random(0), lambda q, c: len(c) < 700, max_others=1)
    assert negs(one) == [PASSAGES["doc/a#2"]["text"]]
