"""``posenc eval`` on Llama 4's text model, whose attention temperature (``attn_temperature_tuning``,
``floor_scale``, ``attn_scale``: queries of its NoPE layers scaled by ``1 + attn_scale *
log(floor((pos + 1) / floor_scale) + 1)``) lives in the model's own attention code: eval measures
the checkpoint with it, as plain ``transformers`` computes it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")

import task_support  # noqa: E402

from posenc.cli import main  # noqa: E402
from posenc.measuring.eval import measure  # noqa: E402
from posenc.testing import tiny_model_of_type  # noqa: E402


def _checkpoint(folder, tune):
    model = tiny_model_of_type(
        "llama4_text", vocab_size=256, max_position_embeddings=32, floor_scale=8, attn_scale=0.5,
        attn_temperature_tuning=tune,
    )  # fmt: skip
    model.save_pretrained(folder)
    task_support.byte_tokenizer().save_pretrained(folder)
    return model


def test_eval_measures_llama4_with_its_attention_temperature_as_transformers_does(tmp_path):
    text = task_support.sample_text().encode("ascii", "ignore").decode()
    (tmp_path / "t.txt").write_text(text)
    bpb = {}
    for tune in (True, False):
        model = _checkpoint(tmp_path / f"m{tune}", tune)
        out = tmp_path / f"e{tune}"
        argv = ["eval", str(tmp_path / f"m{tune}"), "--text", str(tmp_path / "t.txt"), "--scalings", "none"]
        argv += ["--lengths", "32,64", "--windows", "2", "--passkey-trials", "0", "--no-plots", "--out", str(out)]
        assert main(argv) == 0  # an AttributeError before eval found Llama 4's decoder under its head
        bpb[tune] = json.loads((out / "results.json").read_text())["perplexity"]["none"]["32"]["bpb"]
        # plain transformers, posenc not installed: the same pieces of the same windows
        tokens = np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int64)
        ends = measure.window_ends(tokens.size, 64, 2)
        inputs, targets = measure.piece_rows(tokens, ends, 64, 32, None)
        with torch.no_grad():
            logits = model(input_ids=torch.from_numpy(inputs)).logits.double()
        nats = F.cross_entropy(logits.transpose(1, 2), torch.from_numpy(targets), reduction="sum")
        assert bpb[tune] == pytest.approx(float(nats) / math.log(2) / targets.size, rel=1e-5)
    assert abs(bpb[True] - bpb[False]) > 1e-3  # the temperature is in what eval measured
