"""The attention-map figure's numbers: the layer's own weights, by word, from a trained lab model where
one exists and from the untrained block otherwise, saying which."""

from __future__ import annotations

import pytest
import torch

from posenc.factory import make_scheme
from posenc.model import CausalSelfAttention
from posenc.teaching.lesson.attention import attention_weights, by_word
from posenc.teaching.lesson.chapters import big_picture


@pytest.mark.parametrize("scheme", ["nope", "sinusoidal", "learned", "rope", "alibi"])
@pytest.mark.parametrize("causal", [True, False])
def test_the_weights_are_the_ones_the_layer_uses(scheme, causal):
    """weights @ v, projected out, is the layer's own output: the figure shows what the layer does."""
    torch.manual_seed(0)
    d, heads, seq = 16, 4, 7
    attention = CausalSelfAttention(d, heads).double().eval()
    sch = make_scheme(scheme, d_model=d, n_heads=heads, max_len=64).double()
    x = torch.randn(2, seq, d, dtype=torch.float64)
    pos = torch.arange(3, 3 + seq).unsqueeze(0)
    with torch.no_grad():
        w = attention_weights(attention, x, sch, pos, causal=causal)  # (B, H, S, S)
        v = attention.qkv(x).split(d, -1)[2].view(2, seq, heads, d // heads).transpose(1, 2)
        mine = attention.out((w @ v).transpose(1, 2).reshape(2, seq, d))
        theirs = attention(x, sch, pos, causal=causal)
    torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-12)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, heads, seq, dtype=torch.float64))
    if causal:
        assert float(w.triu(1).abs().max()) == 0.0


SPANS = [(0, 2), (2, 3), (3, 6)]


@pytest.mark.parametrize("causal", [True, False])
def test_by_word_folds_tokens_into_words_per_token_and_keeps_rows_summing_to_one(causal):
    """Each query token's weight on a word, divided by the word's tokens it sees, as a share of its row;
    a word's row is the mean of its tokens' rows. Checked against a plain loop."""
    logits = torch.randn(6, 6, dtype=torch.float64)
    if causal:
        logits = logits.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(logits, -1)
    words = by_word(w, SPANS, causal) if not causal else by_word(w, SPANS)  # causal is the default
    assert words.shape == (3, 3)
    torch.testing.assert_close(words.sum(-1), torch.ones(3, dtype=torch.float64))
    expected = torch.zeros(3, 3, dtype=torch.float64)
    for qw, (qs, qe) in enumerate(SPANS):
        for i in range(qs, qe):
            per = []
            for ks, ke in SPANS:
                seen = [j for j in range(ks, ke) if not causal or j <= i]
                per.append(sum(float(w[i, j]) for j in seen) / len(seen) if seen else 0.0)
            expected[qw] += torch.tensor(per, dtype=torch.float64) / sum(per) / (qe - qs)
    torch.testing.assert_close(words, expected)


@pytest.mark.parametrize("causal", [True, False])
def test_by_word_gives_a_long_word_no_weight_for_its_length(causal):
    """Defect: the fold added a word's columns, so a long word collected attention. Tokens that attend
    evenly to every token they see give every word they see the same share, however long it is."""
    spans = [(0, 12), (12, 14), (14, 16), (16, 18)]  # "aaaaaaaaaaaa b c d": 12 bytes, then " b", " c", " d"
    seen = torch.ones(18, 18, dtype=torch.float64)
    if causal:
        seen = seen.tril()
    even = seen / seen.sum(-1, keepdim=True)
    words = by_word(even, spans, causal) if not causal else by_word(even, spans)
    if causal:
        expected = torch.tensor([[1 / (i + 1) if j <= i else 0.0 for j in range(4)] for i in range(4)])
    else:
        expected = torch.full((4, 4), 0.25)
    torch.testing.assert_close(words, expected.to(torch.float64))


def test_the_untrained_maps_are_the_lesson_models_before_training_read_causally():
    """The lesson's models before training, causal: the two "the"s see different words before them, so
    their rows differ under every scheme; every row still sums to 1 and the upper right is empty."""
    d = big_picture.attention_map("the dog bit the man", "untrained")
    assert d["words"] == ["the", "dog", "bit", "the", "man"] and d["trained"] is False
    by_scheme = {m["scheme"]: torch.tensor(m["weights"], dtype=torch.float64) for m in d["maps"]}
    assert set(by_scheme) == {"nope", "sinusoidal", "learned", "rope", "alibi"}
    for w in by_scheme.values():
        torch.testing.assert_close(w.sum(-1), torch.ones(5, dtype=torch.float64))
        assert float(w.triu(1).abs().max()) == 0.0 and float(w[0, 0]) == pytest.approx(1.0)
    for m in d["maps"]:
        assert m["source"]["kind"] == "untrained" and "untrained" in m["source"]["text"]


def test_too_many_words_for_the_grid_is_refused_by_name():
    with pytest.raises(ValueError, match="at most 12 words"):
        big_picture.attention_map(" ".join(["w"] * 13))


@pytest.mark.slow
def test_a_lab_run_is_read_by_its_trained_model_and_the_page_says_which(tmp_path):
    from posenc.cli import main
    from posenc.measuring.corpus import stdlib_root

    text = tmp_path / "source.py.txt"
    text.write_text((stdlib_root() / "textwrap.py").read_text(encoding="utf-8"), encoding="utf-8")
    run = tmp_path / "run"
    args = [
        "lab",
        "--preset",
        "smoke",
        "--schemes",
        "rope",
        "--no-extension",
        "--steps",
        "2",
        "--checkpoint-every",
        "2",
        "--eval-windows",
        "2",
        "--retrieval-trials",
        "1",
        "--threads",
        "1",
        "--no-plots",
        "--warmup-steps",
        "1",
    ]
    assert main([*args, "--data", str(text), "--out", str(run)]) == 0
    d = big_picture.attention_map("the dog bit the man", lab_run=run)
    kinds = {m["scheme"]: m["source"] for m in d["maps"]}
    assert d["trained"] is True and kinds["rope"]["kind"] == "trained" and "trained rope" in kinds["rope"]["text"]
    # a scheme the run did not train is read by the lesson's own trained model, which says so
    assert kinds["alibi"]["kind"] == "trained" and "lesson's trained alibi" in kinds["alibi"]["text"]
    rope = torch.tensor(next(m["weights"] for m in d["maps"] if m["scheme"] == "rope"), dtype=torch.float64)
    torch.testing.assert_close(rope.sum(-1), torch.ones(5, dtype=torch.float64))
    assert float(rope.triu(1).abs().max()) == 0.0  # causal, as it was trained


def test_the_route_serves_the_map_and_refuses_a_long_sentence_in_words():
    from fastapi.testclient import TestClient

    from posenc.teaching.explorer.app import create_app

    with TestClient(create_app(), base_url="http://127.0.0.1") as client:
        ok = client.get("/api/lesson/attention", params={"text": "the man bit the dog"})
        assert ok.status_code == 200 and ok.json()["words"][1] == "man"
        bad = client.get("/api/lesson/attention", params={"text": " ".join(["w"] * 13)})
        assert bad.status_code == 422 and "at most 12 words" in bad.text
