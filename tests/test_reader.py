"""The reader stage of the local judge (int8 ONNX through onnxruntime), and the pure parts of its
training recipe (windows, answer-removed negatives)."""

from __future__ import annotations

import random

import pytest

from sourcegate.judges.base import JudgeInput

reader_mod = pytest.importorskip("sourcegate.judges.local.reader")
stage_mod = pytest.importorskip("sourcegate.judges.local.reader_stage")
local = pytest.importorskip("sourcegate.judges.local")

STAGE = stage_mod.load_reader_stage()
needs_reader = pytest.mark.skipif(STAGE is None, reason="the reader's weights are not shipped in this build")

FILTER = ("HPU-7 hydraulic unit, return filter. The return-line filter element is replaced every 1,000 operating "
          "hours or once a year, whichever comes first. Use element HF-22 and a new O-ring.")
FILTER_NO_INTERVAL = ("HPU-7 hydraulic unit, return filter. The return-line filter protects the pumps and valves "
                      "from wear particles. Use element HF-22 and a new O-ring, and bleed the housing afterwards.")


@needs_reader
def test_reader_ranks_the_stated_answer_above_the_same_subject_without_it():
    r = STAGE.reader.read("How often is the return filter element replaced?", [FILTER, FILTER_NO_INTERVAL])
    assert r[0].p_answer > r[1].p_answer
    assert r[0].span and r[0].span in FILTER
    assert "1,000" in r[0].span


@needs_reader
def test_reader_reads_long_passages_in_windows_and_keeps_every_passage():
    long = " ".join(["The plant has two clarifiers and a sludge thickener."] * 60) + " " + FILTER
    r = STAGE.reader.read("How often is the return filter element replaced?", [long, "", FILTER])
    assert len(r) == 3
    assert r[1].span == ""
    # the answer sits past the first window: the windows still find it
    assert "1,000" in r[0].span
    assert r[0].p_answer > 0.5 * r[2].p_answer


@needs_reader
def test_judge_uses_the_reader_and_records_it():
    judge = local.LocalJudge(reader=True)
    j = judge.judge("How often is the return filter element on the HPU-7 replaced?",
                    [JudgeInput(id="a", text=FILTER), JudgeInput(id="b", text=FILTER_NO_INTERVAL)])
    assert "+reader-" in j.model
    assert j.usage["passages_read"] == 2
    a, b = (x.scores for x in j.results)
    assert a.contains_answer_evidence > b.contains_answer_evidence
    plain = local.LocalJudge()
    assert "+reader-" not in plain.model_id  # opt-in: the default judge has no reader stage


@needs_reader
def test_reader_failure_falls_back_to_the_interpretable_heads(monkeypatch):
    judge = local.LocalJudge(reader=True)
    q = "How often is the return filter element on the HPU-7 replaced?"
    ps = [JudgeInput(id="a", text=FILTER)]
    base = local.LocalJudge(reader=False).judge(q, ps).results[0].scores

    def broken(*a, **k):
        raise RuntimeError("onnxruntime failed")

    monkeypatch.setattr(judge.reader.reader, "read", broken)
    j = judge.judge(q, ps)
    assert j.usage["passages_read"] == 0
    assert j.results[0].scores == base


@needs_reader
def test_reader_skips_other_languages_and_irrelevant_passages():
    judge = local.LocalJudge(reader=True)
    j = judge.judge("À quelle fréquence remplace-t-on l'élément filtrant ?",
                    [JudgeInput(id="a", text=FILTER)])
    assert j.usage["passages_read"] == 0
    j = judge.judge("How often is the return filter element replaced?",
                    [JudgeInput(id="a", text="The annual staff picnic takes place in June at the lake.")])
    assert j.usage["passages_read"] == 0


def test_reader_files_and_licence_notice_travel_together():
    from sourcegate.judges.local.model import WEIGHTS_DIR

    onnx = WEIGHTS_DIR / reader_mod.ONNX_NAME
    if not onnx.exists():
        pytest.skip("no reader shipped")
    assert onnx.stat().st_size < 40 * 1024 * 1024
    assert (WEIGHTS_DIR / reader_mod.TOKENIZER_NAME).exists() and (WEIGHTS_DIR / stage_mod.HEADS_NAME).exists()
    notice = (WEIGHTS_DIR / "NOTICE.md").read_text()
    assert "all-MiniLM-L6-v2" in notice and "Apache" in notice and "reader" in notice.lower()


# --- the training recipe's pure parts (no torch needed)

data = pytest.importorskip("training.reader.data")

PARA = ("The castle was built in 1120 by Count Roger. It stands on a hill above the river. "
        "Its keep was rebuilt after a fire in 1350. Today it houses a museum of local history.")


def test_answer_removed_drops_every_sentence_with_an_answer_and_keeps_the_subject():
    rng = random.Random(1)
    out = data.answer_removed(PARA, ["1120", "Count Roger"], PARA.index("1120"), 1000, rng)
    assert out and "1120" not in out and "Roger" not in out
    assert "hill above the river" in out


def test_answer_removed_gives_up_when_nothing_is_left():
    assert data.answer_removed("Built in 1120.", ["1120"], 9, 1000, random.Random(1)) is None


def test_window_keeps_whole_sentences_within_the_budget():
    spans = data.sentences(PARA)
    assert len(spans) == 4
    s, e = data.window(PARA, spans, 1, 90, random.Random(3))
    piece = PARA[s:e]
    assert "It stands on a hill" in piece and len(piece) <= 90
    assert (s, e) != (0, len(PARA))
