"""The learning curve's count of examples trained (`training/reader/curve.py`): the run's plan rebuilt
from its checkpoint's arguments gives, up to its step, how many examples of each set it has read."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from training.reader import curve  # noqa: E402
from training.reader.train import batches  # noqa: E402


def _ex(kind: str, n: int) -> dict:
    return {"kind": kind, "ids": list(range(n))}


def test_examples_of_counts_each_set_up_to_the_step(tmp_path):
    data = {"people_fit": [[_ex("qa", 5 + i % 7), _ex("nli", 9)] for i in range(40)],
            "squad1_train": [_ex("qa", 11 + i % 5) for i in range(60)],
            "nli_train": [_ex("nli", 8) for _ in range(30)]}
    path = tmp_path / "examples.pt"
    torch.save(data, path)
    mixture = (("people_fit", 2.0), ("squad1_train", 0.5), ("nli_train", 1.0))
    args = {"examples": str(path), "mixture": repr(mixture), "epochs": "1", "batch": "8", "seed": "3",
            "max_batches": "0"}
    plan = batches(data, 8, 3, mixture)
    whole = {"people_fit": 2 * 80, "squad1_train": 30, "nli_train": 30}
    ck = tmp_path / "step-all.pt"
    torch.save({"args": args, "step": len(plan)}, ck)
    curve._DATA.clear()
    assert curve.examples_of(ck) == whole
    # part way: the sets' counts add up to the examples of the first batches, each set at most its whole
    step = len(plan) // 3
    torch.save({"args": args, "step": step}, ck)
    part = curve.examples_of(ck)
    assert sum(part.values()) == sum(len(b) for _, b in plan[:step])
    assert set(part) <= set(whole) and all(part[k] <= whole[k] for k in part) and part != whole
