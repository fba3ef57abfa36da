"""The default offline judge: interpretable features + small fitted models, calibrated.

`LocalJudge(embedder=None)` answers the five gate questions for each passage; `passage_features`
computes the passage-only signals (prompt injection, superseded) once at ingest.
"""

from .judge import FEATURES_VERSION, LocalJudge, passage_features

__all__ = ["LocalJudge", "passage_features", "FEATURES_VERSION"]
