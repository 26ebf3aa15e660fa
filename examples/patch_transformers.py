"""Patch a ``transformers`` Llama with posenc, check it, generate, and undo. No download.

Run: ``python examples/patch_transformers.py`` (needs ``transformers``; about ten seconds on a CPU).

The model is a randomly initialised 2-layer Llama with Llama-3.1-8B's rope fields (llama3 scaling,
``rope_theta`` 500000, 128k context). With a real checkpoint, replace the construction by
``AutoModelForCausalLM.from_pretrained(...)``; the rest is the same.
"""

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

from posenc.integrations.transformers import patch
from posenc.testing import float64_reference

transformers.logging.set_verbosity_error()
torch.manual_seed(0)

config = LlamaConfig(
    vocab_size=256,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=128,
    max_position_embeddings=131072,
    rope_theta=500000.0,
    rope_scaling={
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
)
model = LlamaForCausalLM(config).eval()
ids = torch.randint(0, 256, (1, 32))


def logits(m, position_ids=None):
    with torch.no_grad():
        return m(ids, position_ids=position_ids).logits.double()


# The yardstick: a float64 copy of the unpatched model whose rotary module forms its angles in float64
# (transformers' own module forms them in float32 even in a float64 model).
exact_model = float64_reference(model)

far = torch.arange(32)[None] + 1_000_000  # a million tokens into the context
unpatched_short, unpatched_far = logits(model), logits(model, far)

with patch(model) as handle:  # one call; undone when the block ends
    print(handle)
    print("replaced:", handle.rotary_modules, "and the rotation in", len(handle.attention_modules), "layers")
    short, far_logits = logits(model), logits(model, far)
    generated = model.generate(ids[:, :8], max_new_tokens=8, do_sample=False)

exact_short, exact_far = logits(exact_model), logits(exact_model, far)
print(f"positions 0..31:        |patched - unpatched| = {(short - unpatched_short).abs().max():.1e}")
print(
    f"positions 1M..1M+31:    unpatched float32 is {(unpatched_far - exact_far).abs().max():.1e} from float64, "
    f"patched {(far_logits - exact_far).abs().max():.1e}"
)
with torch.no_grad():
    again = model.generate(ids[:, :8], max_new_tokens=8, do_sample=False)
print("greedy tokens, patched == unpatched:", torch.equal(generated, again))
print("after the block the model is its original self:", type(model.model.rotary_emb).__name__)
