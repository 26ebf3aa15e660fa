"""Bits per byte of one checkpoint on one text, by posenc and by lm-evaluation-harness (a peer).

::

    python -m venv VENV && VENV/bin/pip install lm_eval==0.4.13 accelerate torch transformers
    python benchmarks/lm_eval_bpb.py --lm-eval-python VENV/bin/python     # the packaged checkpoint

Measured on the packaged checkpoint (32 windows of 64 bytes of the standard library's validation
split): posenc 2.1260465516, lm-eval 2.1260470685, difference 5.2e-7 (lm_eval 0.4.13,
transformers 5.25; lm-eval's log-likelihoods come from float32 log-softmax). The command exits 1
when the two differ by more than 1e-6.

posenc's number is :func:`posenc.measuring.eval.measure.window_nats` over ``--windows`` windows of
``--length`` tokens (the checkpoint's trained context by default), summed bits over summed UTF-8
bytes. lm-evaluation-harness (``lm_eval``, installed in its own venv, run offline) computes
``bits_per_byte`` with ``loglikelihood_rolling`` on a local task whose documents are the same
windows' text. Its rolling window reads a document of at most its maximum length in one pass, the
first token predicted from a prefix token; the windows are therefore chosen to start right after a
newline in the text and lm-eval's prefix token is set to the newline's id, so both read exactly the
same tokens with the same context. The text is made ASCII, so bytes and byte-level tokens agree.
Prints both numbers and their difference.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from posenc.measuring.corpus import load_corpus
from posenc.measuring.eval import checkpoint, measure

TASK = """task: posenc_bpb
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: bits_per_byte
    aggregation: bits_per_byte
    higher_is_better: false
"""

PEER = """import json, sys
import lm_eval
from lm_eval.tasks import TaskManager
folder, tasks, prefix = sys.argv[1:4]
manager = TaskManager(include_path=tasks)
out = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={folder},dtype=float32,prefix_token_id={prefix}",
                              tasks=["posenc_bpb"], task_manager=manager, batch_size=1, device="cpu")
print(json.dumps(out["results"]["posenc_bpb"]))
"""


def windows(tokens: np.ndarray, length: int, count: int, newline: int) -> np.ndarray:
    """End offsets of ``count`` windows of ``length`` tokens, each starting right after a newline."""
    starts = [i + 1 for i in np.flatnonzero(tokens[: -length - 1] == newline)]
    picked = np.linspace(0, len(starts) - 1, count).astype(int)
    return np.array([starts[i] + length for i in picked], dtype=np.int64)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lm-eval-python", required=True, help="the python of a venv with lm_eval installed")
    p.add_argument("--model", default=str(checkpoint.FOLDER))
    p.add_argument("--length", type=int, default=None)
    p.add_argument("--windows", type=int, default=32)
    args = p.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True, dtype=torch.float32).eval()
    length = args.length or model.config.max_position_embeddings
    text = bytes(load_corpus(None).val).decode("utf-8", "replace").encode("ascii", "ignore").decode()
    tokens = np.asarray(tok(text, add_special_tokens=False)["input_ids"], dtype=np.int64)
    newline = tok("\n", add_special_tokens=False)["input_ids"][-1]
    ends = windows(tokens, length, args.windows, newline)
    nats = measure.window_nats(model, tokens, ends, length, length, batch=8, device=torch.device("cpu"))
    docs = [tok.decode(tokens[e - length : e]) for e in ends]
    ours = float(nats.sum() / math.log(2) / sum(len(d.encode("utf-8")) for d in docs))
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "docs.jsonl"
        data.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
        (Path(tmp) / "task").mkdir()
        (Path(tmp) / "task" / "posenc_bpb.yaml").write_text(TASK.format(data=data))
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        run = subprocess.run(
            [args.lm_eval_python, "-c", PEER, args.model, str(Path(tmp) / "task"), str(newline)],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
    if run.returncode != 0:
        print(run.stderr[-3000:], file=sys.stderr)
        return 1
    peer = json.loads(run.stdout.strip().splitlines()[-1])["bits_per_byte,none"]
    print(
        f"posenc {ours:.10f}  lm-eval {peer:.10f}  difference {abs(ours - peer):.3e} ({len(docs)} windows of {length})"
    )
    return 0 if abs(ours - peer) <= 1e-6 else 1


if __name__ == "__main__":
    raise SystemExit(main())
