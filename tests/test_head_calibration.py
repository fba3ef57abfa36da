"""The judge heads' calibration (`training/local_judge.fit_head`): isotonic steps put scores on a few
plateaus; the logistic map (`calibration="platt"`) keeps every reading apart, in the same order."""

from __future__ import annotations

import numpy as np

from sourcegate.judges.local.model import Head
from training.local_judge import fit_head


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X @ np.array([1.5, -1.0, 0.5]) + rng.normal(scale=1.0, size=n) > 0).astype(int)
    return X, y


def test_platt_calibration_is_smooth_and_keeps_the_order():
    Xf, yf = _data(400, 1)
    Xc, yc = _data(400, 2)
    Xt, _ = _data(300, 3)
    iso, platt = (Head(fit_head(Xf, yf, Xc, yc, ["a", "b", "c"], calibration=c)) for c in ("isotonic", "platt"))
    p_iso, p_platt = iso.predict(Xt), platt.predict(Xt)
    raw = platt.raw(Xt)
    # the same regression underneath; the logistic map keeps its ranking exactly
    assert np.allclose(iso.raw(Xt), raw)
    order = np.argsort(raw)
    assert np.all(np.diff(p_platt[order]) >= -1e-9)
    # isotonic steps repeat values; the logistic map gives (nearly) every passage its own
    values = lambda p: len(np.unique(np.round(p, 3)))  # noqa: E731
    assert values(p_platt) > 2 * values(p_iso)
    assert values(p_platt) > 200
    # and it is calibrated on rows it was not fitted on: mean predicted close to the observed rate
    Xv, yv = _data(2000, 4)
    assert abs(platt.predict(Xv).mean() - yv.mean()) < 0.05
