"""Judges: backends behind one contract (`Judge.judge(query, passages) -> Judgement`), chosen by name."""

from __future__ import annotations

from .base import Judge, JudgeInput, Judgement, PassageJudgement

__all__ = ["Judge", "JudgeInput", "Judgement", "PassageJudgement", "make_judge"]

JUDGE_NAMES = ("local", "typesafe", "recorded", "llm")


def make_judge(settings, embedder=None) -> Judge:
    name = settings.judge
    if name == "local":
        from .local import LocalJudge

        return LocalJudge(embedder=embedder, reader=getattr(settings, "reader", True),
                          contradiction=getattr(settings, "reader_contradiction", False))
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
