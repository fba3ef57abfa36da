"""training/reader/recover.py: the float16 weights that training continues from, rebuilt from the shipped
int8 ONNX export, load into the torch reader and give what onnxruntime gives on the same inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from training.reader import recover as R  # noqa: E402

W = Path(__file__).resolve().parents[1] / "src" / "sourcegate" / "judges" / "weights"
ONNX = W / R.ONNX_NAME
pytestmark = pytest.mark.skipif(not ONNX.exists(), reason="the reader's weights are not shipped in this build")

PAIRS = R.PAIRS[:3]


@pytest.fixture(scope="module")
def recovered(tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("reader") / "weights.pt"
    r = R.recover(ONNX, out)
    return out, r


def test_weights_have_the_format_train_reads(recovered):
    out, r = recovered
    st = torch.load(out, weights_only=False, map_location="cpu")
    assert set(st) == {"model", "history"}
    want = R.reader_from_config(r["config"]).state_dict()
    assert set(st["model"]) == set(want)
    for k, v in want.items():
        assert tuple(st["model"][k].shape) == tuple(v.shape), k
        assert st["model"][k].dtype == torch.float16, k
    cfg = r["config"]
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.vocab_size) == (6, 384, 12, 30000)
    meta = json.loads((W / R.META_NAME).read_text())
    runs = meta.get("runs") or []
    assert st["history"][: len(runs)] == runs
    last = st["history"][-1]
    assert last["recovered"]["from"].endswith("reader.onnx") and last["examples"] == {}


def test_recovered_reader_agrees_with_onnxruntime(recovered):
    out, r = recovered
    res = R.compare(out, ONNX, W / R.TOKENIZER_NAME, r["special"], r["config"], pairs=PAIRS)
    # what remains is the int8 export rounding activations at run time
    assert res["worst_rel"] < 0.15, res
    for name in ("start", "end", "answerable", "nli", "polar"):
        assert res[name]["mean_abs_diff"] < 0.05 * res[name]["range"], (name, res[name])
    assert res["decisions_agree"]["nli"] and res["decisions_agree"]["polar"] and res["decisions_agree"]["answerable"], res


def test_every_layer_matches_given_the_same_input(recovered):
    _, r = recovered
    res = R.layerwise(ONNX, W / R.TOKENIZER_NAME, r["special"], r["config"], pairs=PAIRS)
    for k in ["embeddings"] + [f"layer.{i}" for i in range(r["config"].num_hidden_layers)]:
        # float precision, but for the odd activation rounded the other way (it moves its token's vector
        # by about one int8 step); a weight mapped wrongly would move every token by much more
        assert res[k]["median_abs_diff"] < 1e-5, (k, res[k])
        assert res[k]["tokens_over_1e-4"] < 0.05, (k, res[k])
        assert res[k]["max_abs_diff"] < 0.5, (k, res[k])
    for k in ("start", "end", "answerable", "nli", "polar"):
        assert res[k]["max_abs_diff"] < 1e-3, (k, res[k])
