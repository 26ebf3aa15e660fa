"""Section: without position information, attention sees a bag of tiles.

Self-attention mixes every token with every other through weights that depend only on the tokens'
contents. Permute the input and, with no causal mask and no position scheme, the output is the same
set of vectors in the permuted order (permutation equivariance). Any order-free summary of it, such
as the mean over the sequence, is then identical for "the dog bit the man" and "the man bit the dog".
"""

from __future__ import annotations

import torch

from ..factory import SCHEMES
from ..model import ModelConfig, TinyLM
from ._show import plain, prose, sci, table, verdict

SENTENCE_A = "the dog bit the man"
SENTENCE_B = "the man bit the dog"
#: Each word is one token in this section, so a word swap is exactly a token permutation.
VOCAB = {"the": 0, "dog": 1, "bit": 2, "man": 3}
#: NoPE pooled outputs must agree to float32 rounding (~1e-7 here) ...
NOPE_TOLERANCE = 1e-5
#: ... and every scheme must move them by far more than that.
SCHEME_MARGIN = 1e-4

WHERE = {
    "nope": "nowhere",
    "sinusoidal": "input vectors",
    "learned": "input vectors",
    "rope": "queries and keys",
    "alibi": "attention logits",
}


def token_ids(sentence: str) -> torch.Tensor:
    """Word-level token ids of ``sentence``, shape (1, words)."""
    words = sentence.split()
    unknown = [w for w in words if w not in VOCAB]
    if unknown:
        raise ValueError(f"sentence contains words {unknown} outside the tour's vocabulary {sorted(VOCAB)}")
    return torch.tensor([[VOCAB[w] for w in words]])


def permutation(src: str, dst: str) -> torch.Tensor:
    """Indices ``perm`` with ``dst.split() == [src.split()[i] for i in perm]`` (same multiset)."""
    a, b = src.split(), dst.split()
    if sorted(a) != sorted(b):
        raise ValueError(f"{dst!r} is not a reordering of {src!r}")
    free = list(range(len(a)))
    perm = []
    for word in b:
        i = next(j for j in free if a[j] == word)
        free.remove(i)
        perm.append(i)
    return torch.tensor(perm)


def tiny_model(scheme: str, seed: int = 0) -> TinyLM:
    """The small reference LM used for this demonstration (untrained; order-blindness is structural)."""
    torch.manual_seed(seed)
    config = ModelConfig(scheme=scheme, vocab_size=len(VOCAB), d_model=32, n_layers=2, n_heads=4, max_len=16)
    return TinyLM(config).eval()


@torch.no_grad()
def hidden(model: TinyLM, sentence: str, causal: bool) -> torch.Tensor:
    """Final hidden states of the sentence, shape (words, d_model)."""
    return model.hidden_states(token_ids(sentence), causal=causal)[0]


def bag_of_tiles(ctx) -> None:
    plain(
        ctx,
        """A transformer looks at all the words of a sentence at the same moment, like tiles
    shaken out of a bag. Unless something tells it, it cannot know which word came first.""",
    )
    prose(
        ctx,
        f"""A transformer reads all tokens at once. Nothing in self-attention itself says
    which token came first: every query compares itself with every key, and the result depends only
    on what the tokens are. We feed [bold]"{SENTENCE_A}"[/] and [bold]"{SENTENCE_B}"[/] (one token
    per word) through posenc's reference model, [cyan]posenc.TinyLM[/] (2 layers, width 32, 4 heads,
    untrained), with attention [italic]unmasked[/] (every token sees every other, as in an encoder),
    and average each sentence's output vectors into one pooled vector. Where position is used at all,
    the model's input for each word is its word vector [italic]plus[/] a position vector of the same
    width: input = word + position.""",
    )

    perm = permutation(SENTENCE_A, SENTENCE_B)
    nope = tiny_model("nope")
    h_a, h_b = hidden(nope, SENTENCE_A, False), hidden(nope, SENTENCE_B, False)
    permuted = ctx.record("bag.nope.permuted_max_diff", float((h_b - h_a[perm]).abs().max()))
    ctx.console.print(
        f"With no position scheme (NoPE), sentence B's five output vectors equal "
        f"sentence A's taken in the order {perm.tolist()}: largest difference "
        f"[bold]{sci(permuted)}[/] (float32 rounding).",
        highlight=False,
    )
    ctx.console.print()

    t = table(
        "scheme",
        "position enters",
        "max |pooled A - pooled B|",
        "order visible?",
        title="Pooled outputs of the two sentences, unmasked attention",
    )
    for name in SCHEMES:
        model = nope if name == "nope" else tiny_model(name)
        pooled_a = hidden(model, SENTENCE_A, False).mean(0)  # (d_model,)
        pooled_b = hidden(model, SENTENCE_B, False).mean(0)
        diff = ctx.record(f"bag.{name}.pooled_max_diff", float((pooled_a - pooled_b).abs().max()))
        if name == "nope":
            mark = verdict(diff < NOPE_TOLERANCE, "no: identical bags", "unexpectedly yes")
        else:
            mark = verdict(diff > SCHEME_MARGIN, "yes", "no")
        t.add_row(name, WHERE[name], sci(diff), mark)
    ctx.console.print(t)
    smallest = min(ctx.facts[f"bag.{name}.pooled_max_diff"] for name in SCHEMES if name != "nope")
    token_std = ctx.record("bag.token_std", float(nope.tok.weight.detach().std()))
    nope_diff = ctx.facts["bag.nope.pooled_max_diff"]
    if nope_diff > 0:
        margin = ctx.record("bag.smallest_scheme_over_nope", smallest / nope_diff)
        compared = f"{margin:,.0f} times NoPE's, which is pure float32 rounding"
    else:
        ctx.record("bag.smallest_scheme_over_nope", None)
        compared = "far above NoPE's, which is exactly zero"
    prose(
        ctx,
        f"""The differences look small because the model is untrained and its word vectors
    are tiny (standard deviation {token_std:.3f}), but even the smallest is {compared}.""",
    )

    causal = tiny_model("nope")
    pooled_a = hidden(causal, SENTENCE_A, True).mean(0)
    pooled_b = hidden(causal, SENTENCE_B, True).mean(0)
    causal_diff = ctx.record("bag.nope_causal.pooled_max_diff", float((pooled_a - pooled_b).abs().max()))
    prose(
        ctx,
        f"""NoPE leaves the two sentences indistinguishable; every position scheme separates
    them. One aside: a decoder's [italic]causal[/] mask already breaks the symmetry, because token t
    sees exactly t+1 tokens. The same NoPE model with the causal mask gives pooled outputs that differ
    by {sci(causal_diff)}. That is why decoder-only models without any position encoding can still
    pick up some order, but only indirectly.""",
    )
