"""Chapter 14's figures with the trained models (their default) and with the untrained block (the
toggle): what each returns, that the toggle switches the model and says so, and every claim the
chapter's text makes about them, checked on the figures' own numbers."""

from __future__ import annotations

import pytest
import torch

from posenc.teaching.lesson import trained
from posenc.teaching.lesson.chapters import FIGURES
from posenc.teaching.lesson.chapters import bag_of_tiles as bag
from posenc.teaching.lesson.chapters import big_picture as big
from posenc.teaching.lesson.mistakes import ROUNDING_LEVEL

SCHEMES = bag.FIGURE_SCHEMES
POSITIONAL = [s for s in SCHEMES if s != "nope"]


@pytest.fixture(scope="module")
def n():
    return big.numbers()


@pytest.fixture(scope="module")
def text(n):
    return " ".join(" ".join(b.text.split()) for b in big.prose(n))


def test_every_figure_defaults_to_the_trained_models_and_declares_the_toggle():
    figures = {r: f for r, f in FIGURES.items() if f.chapter == "big-picture"}
    assert set(figures) == {"big-picture", "attention", "attention-distance"}
    for figure in figures.values():
        model = next(p for p in figure.parameters if p.name == "model")
        assert model.kind == "choice" and model.default == "trained"
    assert big.MODELS == ("trained", "untrained")


@pytest.mark.parametrize(
    "call",
    [
        lambda: big.big_picture("rope", "random"),
        lambda: big.attention_map("the dog bit the man", "random"),
        lambda: big.attention_distance("random"),
    ],
)
def test_an_unknown_model_is_refused_by_name(call):
    with pytest.raises(ValueError, match=r"model must be one of \['trained', 'untrained'\], got 'random'"):
        call()


# -- the order figure -----------------------------------------------------------------------------------------
def _full_stop_state(lm, sentence, causal=True):
    idx, _ = trained.sentence_bytes(sentence.split())
    with torch.no_grad():
        return lm.hidden_states(idx, causal=causal)[0, -1]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_order_figure_reads_each_model_causally_and_against_itself_before_training(scheme):
    """Defect: the figure ran the causal models with their mask removed, and its "untrained" was chapter 1's
    one-block width-16 model. Recomputed by hand: the full stop's final state, causal, of the trained model
    and of the same model with its starting weights (``trained.initial_model``)."""
    a, b = big.ENDED_SENTENCES
    assert a.endswith(".") and b.endswith(".") and sorted(a) == sorted(b)  # the same bytes, one last byte
    for model, lm in (("trained", trained.model(scheme)), ("untrained", trained.initial_model(scheme))):
        expected = float((_full_stop_state(lm, a) - _full_stop_state(lm, b)).abs().max())
        d = big.big_picture(scheme, model)
        assert d["last_difference"] == pytest.approx(expected, rel=1e-9, abs=1e-15), (scheme, model)
        assert d["source"]["kind"] == model and "causal" in d["source"]["text"]
        assert "chapter 1" not in d["source"]["text"]
        unmasked = float((_full_stop_state(lm, a, False) - _full_stop_state(lm, b, False)).abs().max())
        if scheme != "nope":  # the mask matters: the figure is not the unmasked reading
            assert unmasked != pytest.approx(expected, rel=1e-3)


@pytest.mark.parametrize("model", big.MODELS)
def test_claim_nope_is_blind_after_the_first_block_and_the_mask_tells_order_after_the_second(model, n, text):
    for scheme in SCHEMES:
        d = big.big_picture(scheme, model)
        assert d["first_rounding"] is (scheme == "nope"), (scheme, model, d)
        assert not d["last_rounding"], (scheme, model, d)
        assert d["smallest"] <= min(v for v in (d["first_difference"], d["last_difference"]) if v > ROUNDING_LEVEL)
        assert max(d["first_difference"], d["last_difference"]) <= d["scale"]
    assert big.big_picture("rope", "trained")["scale"] == big.big_picture("rope", "untrained")["scale"]  # one axis
    assert f"At the end it is not ({big._num(n['big.trained.nope.last'])} trained)" in text


def test_claim_each_model_is_compared_with_itself_and_the_counter_cases_are_said(n, text):
    """Defect: the text gave only RoPE's and ALiBi's growth, measured against another architecture; the
    schemes whose change falls with training were left out. Every scheme is listed, each under what
    training did to it, and the text says what the comparison can and cannot show."""
    raised = text.split("training raised the end change for ")[1].split(", and lowered it for ")
    lowered = raised[1] if len(raised) > 1 else ""
    for scheme in SCHEMES:
        before, after = n[f"big.untrained.{scheme}.last"], n[f"big.trained.{scheme}.last"]
        said = f"{big.NAMES[scheme]} ({big._num(before)} → {big._num(after)})"
        assert said in (raised[0] if after > before else lowered), (scheme, said)
    # a scheme whose change falls with training is said as such (the stdlib-trained models had one: none)
    fell = {**n, "big.trained.sinusoidal.last": n["big.untrained.sinusoidal.last"] / 2}
    changes = big._training_changes(fell)
    assert ", and lowered it for sinusoidal (" in changes and "sinusoidal" not in changes.split(", and lowered")[0]
    assert "What this comparison can show, and what it cannot." in text
    assert "It cannot show that the model knows who bit whom" in text and "not the exact draw" in text


def test_alibis_bar_is_no_sliver_on_the_log_axis():
    """Defect: on a linear axis ALiBi's untrained change was 0.4% of the axis (2.6 px). On the log axis
    from the decade under the smallest change to the decade over the largest it takes more than a seventh."""
    import math

    for model in big.MODELS:
        d = big.big_picture("alibi", model)
        low, high = 10 ** math.floor(math.log10(d["smallest"])), 10 ** math.ceil(math.log10(d["scale"]))
        for key in ("first_difference", "last_difference"):
            share = (math.log10(d[key]) - math.log10(low)) / (math.log10(high) - math.log10(low))
            assert share > 0.15, (model, key, share)


def test_the_caption_names_the_sentences_the_numbers_are_of(text):
    """Defect: the caption named "the dog bit the man", the numbers were of "the dog bit man"."""
    caption = next(b.text for b in big.prose(big.numbers()) if b.slot == "big-caption")
    assert all(f"“{s}”" in caption for s in big.ENDED_SENTENCES)
    assert big.big_picture("rope")["sentences"] == list(big.ENDED_SENTENCES)


# -- the attention maps ---------------------------------------------------------------------------------------
def test_trained_maps_are_causal_rows_of_one_and_say_so():
    d = big.attention_map("the dog bit the man")
    assert d["model"] == "trained" and d["trained"] is True
    for m in d["maps"]:
        w = torch.tensor(m["weights"], dtype=torch.float64)
        torch.testing.assert_close(w.sum(-1), torch.ones(5, dtype=torch.float64))
        assert float(w.triu(1).abs().max()) == 0.0
        assert m["source"]["kind"] == "trained" and f"trained {m['scheme']} model" in m["source"]["text"]


def test_the_untrained_toggle_is_the_same_model_before_training_read_causally():
    """Defect: the maps' untrained toggle was chapter 1's width-16 block without a mask; it is each scheme's
    lesson model with its starting weights, causal."""
    d = big.attention_map("the dog bit the man", "untrained")
    assert d["trained"] is False
    for m in d["maps"]:
        w = torch.tensor(m["weights"], dtype=torch.float64)
        expected = trained.word_attention(trained.initial_model(m["scheme"]), big.ATTENTION_TEXT.split())
        torch.testing.assert_close(w, expected.to(torch.float64))
        assert float(w.triu(1).abs().max()) == 0.0
        assert m["source"]["kind"] == "untrained" and "weights it started training from" in m["source"]["text"]


@pytest.mark.parametrize("model", big.MODELS)
def test_a_sentence_longer_than_the_training_length_is_refused(model):
    long = " ".join(["abcdefghijk"] * 12)  # 143 bytes
    with pytest.raises(ValueError, match=r"text must be at most 128 bytes .* got 143"):
        big.attention_map(long, model)


def test_claim_trained_words_look_close_by_and_nope_does_not(n, text):
    """The text: trained, the last word gives itself and the word before it more than an even spread's
    share under every scheme with positions; NoPE is the exception, about even. Each share as printed."""
    even = n["big.even_nearby"]
    assert even == pytest.approx(2 / 5)
    for scheme in POSITIONAL:
        share = n[f"big.trained.{scheme}.nearby"]
        assert share > even, (scheme, share)
        assert f"{share:.0%}" in text and f"{n[f'big.trained.{scheme}.itself']:.0%}" in text
    assert abs(n["big.trained.nope.nearby"] - even) < 0.05
    assert f"NoPE is the exception ({n['big.trained.nope.nearby']:.0%}, about even)" in text
    # against the figure's own grid for the sentence
    maps = {m["scheme"]: m["weights"] for m in big.attention_map(big.ATTENTION_TEXT)["maps"]}
    assert sum(maps["rope"][-1][-2:]) == pytest.approx(n["big.trained.rope.nearby"], rel=1e-6)


MIXED = ["aaaaaaaaaaaa b c d", "a b c aaaaaaaaaaaa", "the extraordinarily big dog", "x supercalifragilistic y z"]


@pytest.mark.parametrize("sentence", MIXED)
def test_claim_a_long_word_collects_no_attention_by_its_length(sentence):
    """Defect: a word's byte columns were added, so a long word collected attention: in "aaaaaaaaaaaa b c d"
    the untrained models gave the 12-letter word 0.68 of the last word's row, ALiBi's trained model 0.59.
    Before training every byte attends almost evenly to the bytes it sees, and the fold per byte turns that
    into an even spread over the words, whatever their lengths."""
    for m in big.attention_map(sentence, "untrained")["maps"]:
        if m["scheme"] != "alibi":
            w = torch.tensor(m["weights"], dtype=torch.float64)
            assert big.even_deviation(w) < 0.01, (sentence, m["scheme"], m["weights"][-1])


def test_claim_the_long_word_three_words_back_gets_less_than_the_word_before(n, text):
    for scheme in SCHEMES:
        long, before = n[f"big.mixed.{scheme}.long"], n[f"big.mixed.{scheme}.before"]
        assert long < before, (scheme, long, before)
        assert f"{long:.0%} ({big.NAMES[scheme]})" in text
    assert f"In “{big.MIXED_TEXT}” the last word gives the long word" in text


def test_claim_untrained_maps_spread_evenly_but_alibis(n, text):
    assert n["big.untrained.map_deviation"] < 0.01
    assert f"at most {n['big.untrained.map_deviation']:.1%} off" in text
    alibi = torch.tensor(
        next(m for m in big.attention_map(big.ATTENTION_TEXT, "untrained")["maps"] if m["scheme"] == "alibi")["weights"]
    )
    assert big.even_deviation(alibi) > 0.05 and big.nearby_share(alibi) > n["big.even_nearby"]
    for model in big.MODELS:
        assert f"{n[f'big.{model}.alibi.nearby']:.0%} {model}" in text


# -- attention by distance ------------------------------------------------------------------------------------
def test_the_distance_curve_is_computed_as_defined():
    """Recomputed by hand for one model: each causal weight times the number of keys its query sees,
    averaged per distance; an even spread gives exactly 1 everywhere."""
    lm = trained.model("alibi")
    windows = trained.read_windows()[:4]
    length = 16
    idx = windows[:, :length].long()
    w = trained.layer_attention(lm, idx).mean(1)  # (N, L, L)
    expected = []
    for d in range(length):
        values = [float(w[b, q, q - d]) * (q + 1) for b in range(4) for q in range(d, length)]
        expected.append(sum(values) / len(values))
    got = trained.attention_by_distance(lm, windows, length)
    torch.testing.assert_close(got, torch.tensor(expected, dtype=got.dtype))


def test_claim_untrained_only_alibi_prefers_near_and_training_teaches_rope_to(n, text):
    dist = {model: {e["scheme"]: e for e in big.attention_distance(model)["schemes"]} for model in big.MODELS}
    # untrained: every scheme but ALiBi within the stated deviation of an even spread, at every distance
    deviation = n["big.untrained.even_deviation"]
    assert deviation < 0.05 and f"at most {deviation:.1%} off" in text
    for scheme in ("nope", "sinusoidal", "learned", "rope"):
        assert max(abs(v - 1) for v in dist["untrained"][scheme]["curve"]) <= deviation
    # ALiBi's penalty alone: near far above even, far below it, before any training
    untrained_alibi = dist["untrained"]["alibi"]
    assert untrained_alibi["near"] > 2 and untrained_alibi["far"] < 0.6
    # trained, ALiBi's curve barely moves (within a tenth), RoPE's near share grows several times
    for key in ("near", "far"):
        assert dist["trained"]["alibi"][key] == pytest.approx(untrained_alibi[key], rel=0.1)
    assert dist["trained"]["rope"]["near"] > 4 * dist["untrained"]["rope"]["near"]
    assert dist["trained"]["rope"]["far"] < 0.5
    for scheme in ("sinusoidal", "learned"):  # "and so have the sinusoidal and learned models"
        assert dist["trained"][scheme]["near"] > 4 and dist["trained"][scheme]["far"] < 0.5
    nope = dist["trained"]["nope"]  # "NoPE stays near even"
    assert 0.8 < nope["far"] < 1.25 and 0.8 < nope["near"] < 1.25
    for model, scheme in (("untrained", "alibi"), ("trained", "alibi"), ("trained", "rope"), ("trained", "nope")):
        for key in ("near", "far"):
            assert f"{n[f'big.{model}.{scheme}.{key}']:.2f}" in text, (model, scheme, key)


def test_the_key_points_print_nopes_float32_noise_as_rounding(n):
    """The key-point row printed NoPE's pooled difference digit by digit (2.38e-07 in one process, 5.07e-07
    in another); below the chapter 1 tolerance it is rounding, and the row says so whatever the noise."""

    def row(value):
        table = next(b for b in big.prose({**n, "big.nope_difference": value}) if b.kind == "table")
        return table.rows[1][1]

    assert row(2.38e-7) == row(5.07e-7) and row(2.38e-7).startswith("rounding (below 1e-05) vs ")
    assert row(3e-4).startswith("3.00e-04 vs ")


@pytest.mark.slow
def test_a_lab_runs_learned_table_too_short_for_the_sentence_gives_way_to_the_lessons_model(tmp_path):
    """With --lab-run, a run trained on 32 bytes has a learned table of 32 rows: a sentence of 38 bytes
    was read past its last row (an error); the lesson's own trained model reads it, and the map says so."""
    from posenc.cli import main
    from posenc.measuring.corpus import stdlib_root

    text = tmp_path / "source.py.txt"
    text.write_text((stdlib_root() / "textwrap.py").read_text(encoding="utf-8"), encoding="utf-8")
    run = tmp_path / "run"
    args = ["lab", "--preset", "smoke", "--schemes", "learned,rope", "--no-extension", "--steps", "2"]
    args += ["--checkpoint-every", "2", "--eval-windows", "2", "--retrieval-trials", "1", "--threads", "1"]
    args += ["--no-plots", "--warmup-steps", "1", "--data", str(text), "--out", str(run)]
    assert main(args) == 0
    sentence = "the dog bit the man and the cat saw it"  # 38 bytes
    d = big.attention_map(sentence, lab_run=run)
    sources = {m["scheme"]: m["source"]["text"] for m in d["maps"]}
    assert "of the run given" in sources["rope"]
    assert "lesson's trained learned" in sources["learned"]
    assert "of the run given" in big.attention_map("the dog bit the man", lab_run=run)["maps"][2]["source"]["text"]


def test_claim_the_text_states_the_models_as_the_summary_and_the_files_have_them(n, text):
    """The opening of the trained figures: sizes, steps and each model's bits per byte are the packaged
    summary's and the packaged models' own."""
    info = trained.summary()
    length = info["train_len"]
    for scheme in SCHEMES:
        assert f"{info['models'][scheme]['bpb'][str(length)]:.2f}" in text
        assert sum(p.numel() for p in trained.model(scheme).parameters()) == info["models"][scheme]["parameters"]
    rope, learned = (info["models"][s]["parameters"] for s in ("rope", "learned"))
    assert f"{rope:,} weights each, the learned table {learned - rope:,} more" in text
    assert f"{info['config']['steps']:,} steps on texts of {length} bytes" in text


def test_the_distance_figure_says_its_untrained_curves_are_the_models_before_training():
    """Its toggle reads the same models with initial weights, not chapter 1's block, and says so."""
    for entry in big.attention_distance("untrained")["schemes"]:
        assert entry["source"]["kind"] == "untrained"
        assert "weights it started training from" in entry["source"]["text"]
        assert "chapter 1" not in entry["source"]["text"]


def test_the_text_says_what_the_models_read_and_what_the_sentences_are_to_them(n, text, monkeypatch):
    """Defect: the models were shown English without a word about what they had learned from. The text
    names the corpus of the packaged summary, and says whether the English sentences are the language the
    models learned; both cases are read from the summary's config."""
    corpus = trained.corpus()
    assert f"bytes of {corpus['text']}" in text and f"On {corpus['held_out']} they need" in text
    assert big.attention_distance()["held_out"] == corpus["held_out"]
    said = "the language they learned" if corpus["english"] else "They learned from Python, not English"
    assert said in text
    info = trained.summary()
    for data, english in ((None, False), ("runs/lesson-models/english.txt", True)):
        monkeypatch.setattr(trained, "summary", lambda data=data: {**info, "config": {**info["config"], "data": data}})
        assert trained.corpus()["english"] is english
        assert ("pydoc_data.topics" in trained.corpus()["text"]) is english


def test_the_distance_figure_says_how_many_queries_each_point_averages(n):
    """Defect: past 115 bytes back the curves jump because few queries reach that far, and nothing said
    so. Distance k is seen by the L - k queries of each window at least k bytes in; the text gives the
    counts at one byte back and from 115 back, and the caption says the far right jumps."""
    d = big.attention_distance()
    windows, length = d["windows"], d["length"]
    assert d["queries"] == [windows * (length - k) for k in range(length)]
    said = " ".join(next(b.text for b in big.prose(n) if b.slot == "distance" and b.kind == "p").split())
    assert f"{windows * (length - 1):,} at one byte back" in said
    assert f"{windows * (length - big.FEW_FROM):,} or fewer from {big.FEW_FROM} bytes back" in said
    caption = " ".join(next(b.text for b in big.prose(n) if b.slot == "dist-caption").split())
    assert "both axes logarithmic" in caption and "rests on few queries and jumps" in caption


def test_claim_the_longer_texts_paragraph_is_the_summarys_measurement(n, text):
    """Defect: the lab's clearest result (ALiBi flat on longer texts, the sine code losing) never reached a
    chapter. The paragraph states each model's bits per byte at its training length and at the longest the
    summary measures, and names the flattest and the steepest from those numbers."""
    info = trained.summary()
    short, long = str(info["train_len"]), str(max(info["eval_lengths"]))
    growth = {}
    for scheme in SCHEMES:
        a, b = info["models"][scheme]["bpb"][short], info["models"][scheme]["bpb"][long]
        assert f"{big.NAMES[scheme]} {a:.2f} → " + (f"{b:.2f}" if b is not None else "no rows to read it") in text
        if b is not None:
            growth[scheme] = b - a
    least, most = min(growth, key=growth.get), max(growth, key=growth.get)
    assert f"{big.NAMES[least]} stays flattest, {big.NAMES[most]} loses the most" in text
    assert info["models"]["learned"]["bpb"][long] is None and "learned table has no rows past" in text
