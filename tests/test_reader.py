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
def test_a_passage_reads_the_same_whatever_is_read_beside_it():
    # The int8 graph quantizes activations per tensor: in a shared padded batch a passage's reading
    # moved with its neighbours. Read alone, it does not.
    q = "How often is the return filter element replaced?"
    long = " ".join(["The plant has two clarifiers and a sludge thickener."] * 60)
    alone = STAGE.reader.read(q, [FILTER])[0]
    for beside in ([long, FILTER], [FILTER_NO_INTERVAL, FILTER, "Bleed the housing."], [FILTER, FILTER]):
        got = STAGE.reader.read(q, beside)[beside.index(FILTER)]
        assert got == alone, (beside, got, alone)


@needs_reader
def test_a_one_thread_reader_reads_questions_side_by_side_as_it_reads_them_alone():
    # A server's reader runs one onnxruntime thread per question, without a lock: calls from several
    # threads at once must read exactly what they read one at a time.
    from concurrent.futures import ThreadPoolExecutor

    reader = reader_mod.Reader(threads=1)
    long = " ".join(["The plant has two clarifiers and a sludge thickener."] * 60) + " " + FILTER
    cases = [("How often is the return filter element replaced?", [FILTER, long]),
             ("Which element does the return filter take?", [FILTER_NO_INTERVAL]),
             ("Is the housing bled after the element is changed?", [FILTER_NO_INTERVAL, FILTER]),
             ("How many clarifiers does the plant have?", [long])] * 3
    alone = [reader.read(q, ps) for q, ps in cases]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda c: reader.read(*c), cases))
    assert together == alone


@needs_reader
def test_judge_uses_the_reader_and_records_it():
    judge = local.LocalJudge(reader=True)
    j = judge.judge("How often is the return filter element on the HPU-7 replaced?",
                    [JudgeInput(id="a", text=FILTER), JudgeInput(id="b", text=FILTER_NO_INTERVAL)])
    assert "+reader-" in j.model
    assert j.usage["passages_read"] == 2
    a, b = (x.scores for x in j.results)
    assert a.contains_answer_evidence > b.contains_answer_evidence
    assert "+reader-" in local.LocalJudge().model_id  # on by default
    assert "+reader-" not in local.LocalJudge(reader=False).model_id  # SOURCEGATE_READER=false


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


FILTER_FR = ("Groupe hydraulique HPU-7, filtre de retour. L'élément filtrant de la ligne de retour est remplacé "
             "toutes les 1 000 heures de fonctionnement ou une fois par an, au premier des deux termes atteint.")


@needs_reader
def test_reader_reads_across_languages_and_skips_irrelevant_passages():
    judge = local.LocalJudge()
    # a French question against an English passage, and an English question against a French one
    j = judge.judge("À quelle fréquence remplace-t-on l'élément filtrant du HPU-7 ?",
                    [JudgeInput(id="a", text=FILTER), JudgeInput(id="b", text=FILTER_NO_INTERVAL)])
    assert j.usage["passages_read"] == 2
    a, b = (x.scores.contains_answer_evidence for x in j.results)
    assert a > b
    r = STAGE.reader.read("How often is the return filter element replaced?", [FILTER_FR, FILTER_NO_INTERVAL])
    assert r[0].p_answer > r[1].p_answer
    j = judge.judge("How often is the return filter element replaced?",
                    [JudgeInput(id="a", text="The annual staff picnic takes place in June at the lake.")])
    assert j.usage["passages_read"] == 0


VALVE_NEVER = ("CR-5 roaster, daily maintenance. Close the main gas valve before opening any panel. "
               "Never leave the gas valve open while the drum or the burner is being cleaned. "
               "Let the drum cool below 50 °C.")
VALVE_OPEN = ("CR-5 roaster, daily maintenance. Empty the chaff collector and brush the cooling tray. "
              "Check that the drum turns freely. Let the drum cool below 50 °C before cleaning it.")


@needs_reader
def test_a_passage_that_says_no_settles_a_yes_no_question_and_is_quoted():
    judge = local.LocalJudge()
    q = "Can the gas valve stay open during CR-5 maintenance?"
    j = judge.judge(q, [JudgeInput(id="a", text=VALVE_NEVER), JudgeInput(id="b", text=VALVE_OPEN)])
    a, b = j.results
    assert a.scores.contains_answer_evidence > b.scores.contains_answer_evidence
    # the quote is the sentence that settles it, not the heading
    assert a.quote and "gas valve" in a.quote and not a.quote.startswith("CR-5 roaster")


@needs_reader
def test_the_quote_is_the_sentence_holding_the_span():
    j = local.LocalJudge().judge("How often is the return filter element on the HPU-7 replaced?",
                                 [JudgeInput(id="a", text=FILTER)])
    q = j.results[0].quote
    assert q and "1,000 operating hours" in q and not q.startswith("HPU-7 hydraulic unit, return filter.")


def test_a_passage_about_a_sibling_unit_is_never_evidence():
    judge = local.LocalJudge(reader=False)
    p300 = ("P-300 pump bearings. Grease the P-300 bearings every 1,000 operating hours with 15 g of "
            "polyurea grease.")
    p200 = p300.replace("P-300", "P-200")
    j = judge.judge("How often are the P-200 bearings greased?", [JudgeInput(id="a", text=p300),
                                                                  JudgeInput(id="b", text=p200)])
    other, own = (x.scores.contains_answer_evidence for x in j.results)
    assert other <= local.judge.OTHER_UNIT_EVIDENCE_MAX < own


@needs_reader
def test_nli_reading_tells_entailment_from_contradiction():
    premise = "A technician is greasing the bearings of a pump in the plant room."
    p = STAGE.reader.nli([(premise, "A technician is in the plant room."),
                          (premise, "Nobody is in the plant room."),
                          (premise * 30, "A technician is in the plant room.")])  # a long premise: windows
    assert p.shape == (3, 3)
    assert abs(p[:2].sum(axis=1) - 1).max() < 1e-5  # one window each: a distribution
    assert p[0].argmax() == 0 and p[1].argmax() == 2
    assert p[2, 0] > p[2, 2]


@pytest.mark.parametrize("q,polar", [
    ("Can the gas valve stay open during CR-5 maintenance?", True),
    ("Do I need lockout/tagout for bearing work on P-200?", True),
    ("Faut-il consigner la P-200 avant d'intervenir ?", True),
    ("Le filtre doit-il être remplacé chaque année ?", True),
    ("Est-ce que le CR-5 accepte 5 kg ?", True),
    ("How often is the filter replaced?", False),
    ("Quelle est la pression d'alimentation en gaz du CR-7 ?", False),
    ("Is the valve brass or steel?", False),
])
def test_yes_no_questions_are_recognised(q, polar):
    from sourcegate.text import is_polar

    assert is_polar(q) is polar


def test_reader_files_and_licence_notice_travel_together():
    from sourcegate.judges.local.model import WEIGHTS_DIR

    onnx = WEIGHTS_DIR / reader_mod.ONNX_NAME
    if not onnx.exists():
        pytest.skip("no reader shipped")
    assert onnx.stat().st_size < 40 * 1024 * 1024
    assert (WEIGHTS_DIR / reader_mod.TOKENIZER_NAME).exists() and (WEIGHTS_DIR / stage_mod.HEADS_NAME).exists()
    notice = (WEIGHTS_DIR / "NOTICE.md").read_text()
    assert "multilingual-e5-small" in notice and "MIT" in notice and "reader" in notice.lower()
    for source in ("CondaQA", "BoolQ", "PIAF", "DACCORD", "RTE3", "SQuAD"):
        assert source in notice


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


def test_edited_questions_keep_the_subject_and_lose_the_answer():
    rng = random.Random(2)
    ctx = ("The castle was built in 1120 by Count Roger of Sicily. Its keep was rebuilt after a fire in 1350 "
           "by Duke Henry.")
    seen = set()
    for _ in range(40):
        out = data.perturb_question("When was the castle built by Count Roger?", ctx, ["1120"], rng)
        assert out is not None
        q, kind = out
        assert q != "When was the castle built by Count Roger?" and "1120" not in q
        seen.add(kind)
    assert "negation" in seen and "entity" in seen
    # nothing to edit: no antonym, no auxiliary, no entity, no attribute
    assert data.perturb_question("what colour", "It is red.", ["red"], rng) is None


def test_held_out_splits_keep_every_edit_of_a_passage_together():
    assert data.is_condaqa_eval("444") == data.is_condaqa_eval("444")
    share = sum(data.is_condaqa_eval(str(i)) for i in range(2000)) / 2000
    assert 0.15 < share < 0.25
    share = sum(data.is_piaf_eval(f"t{i}") for i in range(2000)) / 2000
    assert 0.15 < share < 0.25


def test_four_bit_blocks_dequantise_as_the_engine_reads_them():
    e5 = pytest.importorskip("training.reader.e5base")
    import numpy as np

    # one Q4_0 block: fp16 scale 0.5, byte j -> weight j (low nibble) and j + 16 (high nibble), minus 8
    scale = np.float16(0.5).tobytes()
    qs = bytes((j % 16) | (((15 - j) % 16) << 4) for j in range(16))
    w = e5._deq_q4(memoryview(scale + qs), 1, 32)
    assert w.shape == (1, 32)
    assert w[0, 0] == (0 - 8) * 0.5 and w[0, 15] == (15 - 8) * 0.5
    assert w[0, 16] == (15 - 8) * 0.5 and w[0, 31] == (0 - 8) * 0.5


def test_preload_loads_the_reader_only_for_the_local_judge_with_its_reader(monkeypatch):
    # `sourcegate ask` starts loading the reader beside its imports and retrieval; the judge then
    # finds it loaded. Other judges, or the reader turned off, load nothing.
    from types import SimpleNamespace

    from sourcegate.judges import preload

    assert preload(SimpleNamespace(judge="recorded", reader=True)) is None
    assert preload(SimpleNamespace(judge="local", reader=False)) is None
    calls = []
    monkeypatch.setattr(stage_mod, "load_reader_stage", lambda *a: calls.append(a) or STAGE)
    thread = preload(SimpleNamespace(judge="local", reader=True))
    thread.join(60)
    assert not thread.is_alive() and thread.daemon and calls == [()]

    def broken(*a):
        raise OSError("reader.onnx unreadable")

    import threading

    raised = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    monkeypatch.setattr(stage_mod, "load_reader_stage", broken)
    thread = preload(SimpleNamespace(judge="local", reader=True))
    thread.join(60)  # the failure is left for the judge to meet and report, not raised in the thread
    assert not thread.is_alive() and raised == []
