"""Judges: backends behind one contract (`Judge.judge(query, passages) -> Judgement`), chosen by name."""

from __future__ import annotations

from .base import Judge, JudgeInput, Judgement, PassageJudgement

__all__ = ["Judge", "JudgeInput", "Judgement", "PassageJudgement", "make_judge", "preload"]

JUDGE_NAMES = ("local", "typesafe", "recorded", "llm")


def preload(settings):
    """Start loading, in a daemon thread, what the judge the settings name loads on its first
    question: the local judge's reader (onnxruntime, its session and tokenizer, part of it outside
    the GIL). A one-shot command (`sourcegate ask`) overlaps it with its imports and retrieval.
    Returns the thread to join before exiting, or None when there is nothing to load. A failure is
    left for the judge to meet (and report) when it loads the reader itself."""
    if settings.judge != "local" or not getattr(settings, "reader", True):
        return None
    import threading

    def load() -> None:
        try:
            from .local.reader_stage import load_reader_stage

            load_reader_stage()
        except Exception:  # the judge loads it again on its first question and fails closed there
            pass

    thread = threading.Thread(target=load, name="sourcegate-preload", daemon=True)
    thread.start()
    return thread


def make_judge(settings, embedder=None) -> Judge:
    name = settings.judge
    if name == "local":
        from .local import LocalJudge

        return LocalJudge(embedder=embedder, reader=getattr(settings, "reader", True),
                          contradiction=getattr(settings, "reader_contradiction", False),
                          weights_dir=getattr(settings, "judge_weights", None))
    if name == "typesafe":
        from .typesafe import TypeSafeJudge

        return TypeSafeJudge.from_settings(settings)
    if name == "llm":
        from .llm_readout import LlmReadoutJudge

        return LlmReadoutJudge.from_settings(settings)
    if name == "recorded":
        from .recorded import RecordedJudge

        if not settings.recorded_scores_path:
            raise ValueError("the recorded judge needs SOURCEGATE_RECORDED_SCORES=path/to/scores.jsonl")
        return RecordedJudge.from_file(settings.recorded_scores_path)
    raise ValueError(f"unknown judge {name!r}: set SOURCEGATE_JUDGE to one of {', '.join(JUDGE_NAMES)}")
