"""Passkey retrieval and interval verdicts of ``posenc lab``: the task's construction, greedy decoding
against a real autoregressive loop, known answers, and the verdict rule on constructed results."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from constructed_results import constructed_results

from posenc.measuring.lab.config import preset_config
from posenc.measuring.lab.passkey import (
    BIN_NAMES,
    KEY_DIGITS,
    MIN_DISTANCE,
    PLANT_OPEN,
    bins,
    build_sequence,
    evaluate_passkey,
    is_retrieval_step,
    max_distance,
    score_trials,
    summarize_trials,
    training_rows,
    trial_plan,
)
from posenc.measuring.lab.report import build_results, markdown
from posenc.measuring.lab.train import build_model
from posenc.measuring.lab.verdicts import NOT_MEASURED, NOT_SEEN, SEEN, WITHIN_NOISE, machinery_check_reason


def filler(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(97, 123, size=n).astype(np.uint8)  # a-z only


# -- the task ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [22, 32, 64, 257])
def test_plant_query_and_distance_are_where_the_docs_say(n):
    for distance in (MIN_DISTANCE, (MIN_DISTANCE + max_distance(n)) // 2, max_distance(n)):
        seq = build_sequence(filler(n + 1), 48213, distance)
        text = seq.tobytes()
        assert len(text) == n + 1
        assert text.endswith(b"<key:48213")  # query + answer at the very end
        planted = text.index(b"<key:48213>")  # the plant, complete, earlier
        answer = n + 1 - KEY_DIGITS
        assert answer - (planted + len(PLANT_OPEN)) == distance
        assert text.count(b"<key:") == 2
    with pytest.raises(ValueError, match="distance must be in"):
        build_sequence(filler(n + 1), 48213, max_distance(n) + 1)
    with pytest.raises(ValueError, match="distance must be in"):
        build_sequence(filler(n + 1), 48213, MIN_DISTANCE - 1)
    with pytest.raises(ValueError, match="exactly 5 digits"):
        build_sequence(filler(n + 1), 999, MIN_DISTANCE)


def test_bins_cover_near_mid_far_and_far_only_past_the_training_length():
    one = bins(64, 64)
    assert list(one) == ["near", "mid"]  # no key can be 64 back at 1x
    assert one["near"] == (MIN_DISTANCE, 31) and one["mid"] == (32, max_distance(64))
    eight = bins(512, 64)
    assert list(eight) == list(BIN_NAMES)
    assert eight["far"] == (64, max_distance(512))
    for length in (64, 128, 512):
        ranges = list(bins(length, 64).values())
        for (_, hi), (lo2, _) in zip(ranges, ranges[1:]):
            assert hi + 1 == lo2  # contiguous, no gaps
    with pytest.raises(ValueError, match="length must be >="):
        bins(10, 64)


def test_retrieval_steps_are_an_exact_evenly_spread_share():
    for share, total in ((0.2, 1000), (0.1, 300), (0.15, 40), (0.0, 50)):
        steps = [s for s in range(total) if is_retrieval_step(s, share)]
        assert len(steps) == math.floor(total * share)
        if len(steps) > 1:
            gaps = np.diff(steps)
            assert gaps.max() - gaps.min() <= 1


def test_training_rows_and_trial_plans_are_pure_functions():
    data = filler(5000)
    offsets = np.array([0, 100, 2000])
    a = training_rows(data, offsets, 64, seed=3, step=9)
    assert a.shape == (3, 65) and np.array_equal(a, training_rows(data, offsets, 64, seed=3, step=9))
    assert not np.array_equal(a, training_rows(data, offsets, 64, seed=3, step=10))
    for row in a:
        assert row.tobytes()[-10:-5] == b"<key:"
    plan = trial_plan(256, 64, 10, 5000, seed=0)
    assert plan == trial_plan(256, 64, 10, 5000, seed=0)
    ranges = bins(256, 64)
    assert [p[0] for p in plan] == [b for b in ranges for _ in range(10)]
    for name, offset, key, distance in plan:
        lo, hi = ranges[name]
        assert lo <= distance <= hi and 10_000 <= key <= 99_999 and 0 <= offset < 5000 - 257


# -- greedy decoding and known answers ---------------------------------------------------------------
def greedy_decode(model, prefix: torch.Tensor, steps: int) -> torch.Tensor:
    """Plain autoregressive greedy decoding: the definition the one-pass scorer must match."""
    out = prefix
    for _ in range(steps):
        nxt = model(out)[:, -1].argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
    return out[:, -steps:]


def test_one_pass_exact_match_equals_autoregressive_greedy_decoding():
    data = filler(4000)
    plan = trial_plan(48, 32, 6, data.size, seed=1)
    model = _Oracle("odd keys: third digit wrong")
    model.learn(data, plan, 48)
    correct, _ = score_trials(model, data, plan, 48, batch=4, device="cpu")
    assert correct.tolist() == [float(key % 2 == 0) for _, _, key, _ in plan]
    assert 0 < correct.sum() < len(plan)
    for i, (_, offset, key, distance) in enumerate(plan):
        seq = torch.from_numpy(build_sequence(data[offset : offset + 49], key, distance).astype(np.int64))
        decoded = greedy_decode(model, seq[None, :-KEY_DIGITS], KEY_DIGITS)[0]
        assert bool(correct[i]) == torch.equal(decoded, seq[-KEY_DIGITS:])
    # A real (untrained) model: the same equivalence, and log2 p(key) from the logits.
    torch.manual_seed(0)
    model = build_model(preset_config("smoke"), "rope")
    correct, logp = score_trials(model, data, plan, 48, batch=4, device="cpu")
    for i, (_, offset, key, distance) in enumerate(plan):
        seq = torch.from_numpy(build_sequence(data[offset : offset + 49], key, distance).astype(np.int64))
        prefix = seq[None, :-KEY_DIGITS]  # everything before the answer
        with torch.no_grad():
            decoded = greedy_decode(model, prefix, KEY_DIGITS)[0]
            logits = model(seq[None, :-1])[0, -KEY_DIGITS:]
        assert bool(correct[i]) == torch.equal(decoded, seq[-KEY_DIGITS:])
        want = torch.log_softmax(logits.double(), -1).gather(-1, seq[-KEY_DIGITS:, None]).sum()
        assert logp[i] == pytest.approx(float(want) / math.log(2), abs=1e-4)


class _Oracle(torch.nn.Module):
    """Predicts each next byte of a known sequence (looked up by its first 20 bytes), correctly or
    with chosen mistakes in the answer."""

    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode
        self.sequences = {}

    def learn(self, data, plan, length):
        for _, o, k, dd in plan:
            seq = torch.from_numpy(build_sequence(data[o : o + length + 1], k, dd).astype(np.int64))
            self.sequences[tuple(seq[:20].tolist())] = (seq, k)

    def forward(self, idx):
        logits = torch.full((*idx.shape, 256), -30.0)
        for row in range(idx.shape[0]):
            seq, key = self.sequences[tuple(idx[row, :20].tolist())]
            target = seq[1 : idx.shape[1] + 1].clone()
            answer = len(seq) - KEY_DIGITS  # index of the first answer digit
            if self.mode == "wrong":
                target = (target + 1) % 256
            elif self.mode == "odd keys: third digit wrong" and key % 2 and idx.shape[1] > answer + 1:
                target[answer + 1] = (target[answer + 1] + 1) % 256  # predicts digit 3 wrongly
            logits[row, torch.arange(idx.shape[1]), target] = 30.0
        return logits


def test_a_perfect_copier_scores_100_percent_and_a_uniform_model_minus_40_bits():
    data = filler(6000)
    plan = trial_plan(128, 64, 8, data.size, seed=2)
    for right, acc in ((True, 1.0), (False, 0.0)):
        oracle = _Oracle("right" if right else "wrong")
        oracle.learn(data, plan, 128)
        correct, logp = score_trials(oracle, data, plan, 128, batch=5, device="cpu")
        assert correct.tolist() == [acc] * len(plan)
        assert np.allclose(logp, 0.0 if right else -5 * 60 / math.log(2), atol=1e-3)
    model = build_model(preset_config("smoke"), "alibi")
    with torch.no_grad():
        model.head.weight.zero_()  # tied: every logit 0
    cells = evaluate_passkey(
        model, data, 128, train_len=64, trials=8, batch=8, bootstrap_samples=50, seed=0, device="cpu"
    )
    assert list(cells) == ["near", "mid", "far"]
    for cell in cells.values():
        assert cell["logp_bits"] == pytest.approx(-5 * 8.0, abs=1e-6)  # 5 bytes of 8 bits
        assert cell["logp_bits_ci"] == pytest.approx([-40.0, -40.0], abs=1e-6)
        assert cell["trials"] == 8


def test_summary_accuracy_and_bootstrap_interval():
    plan = [("near", 0, 10000, 11)] * 50 + [("mid", 0, 10000, 40)] * 50
    correct = np.array([1.0] * 50 + [1.0, 0.0] * 25)
    cells = summarize_trials(plan, correct, np.zeros(100), length=128, train_len=64, bootstrap_samples=500, seed=0)
    # Exact intervals: 50 of 50 is [0.929, 1] (0.025 ** (1/50)), never [1, 1].
    assert cells["near"]["accuracy"] == 1.0 and cells["near"]["accuracy_ci"] == pytest.approx([0.025**0.02, 1.0])
    assert cells["mid"]["accuracy"] == 0.5
    lo, hi = cells["mid"]["accuracy_ci"]
    assert lo < 0.5 < hi and hi - lo < 0.4
    assert cells["mid"]["correct"] == [1, 0] * 25 and len(cells["mid"]["logp"]) == 50
    assert "far" not in cells


# -- verdicts from paired and exact tests -------------------------------------------------------------
def test_verdicts_on_constructed_results():
    res = constructed_results()
    got = {v["claim"]: v for v in res["verdicts"]}
    assert got["RoPE reads text at 512 bytes (8x) worse than at 64 (1x)"]["verdict"] == SEEN
    alibi_ppl = got["ALiBi reads text at 512 bytes (8x) worse than at 64 (1x)"]
    assert alibi_ppl["verdict"] == WITHIN_NOISE and "paired t over 64 windows" in alibi_ppl["test"]
    # Near against far keys at the same length: 80% vs 0% of 64 trials.
    far_near = "retrieves far keys (beyond the training length) less often than near keys, both at 512 bytes"
    alibi_ret = got["ALiBi " + far_near]
    assert alibi_ret["verdict"] == SEEN and alibi_ret["test"].startswith("Fisher exact (0/64 vs 51/64)")
    assert "0% [0%, 6%]" in alibi_ret["evidence"]  # exact interval, never [0%, 0%]
    assert got["PI without fine-tuning reads 512 bytes worse than plain RoPE"]["verdict"] == SEEN
    after = got["After the same fine-tune, PI reads 512 bytes better than plain RoPE"]
    assert after["verdict"] == NOT_SEEN  # 2.95 against 2.7 on the same windows
    yarn = got["YaRN reads 512 bytes better than plain RoPE without retraining"]
    assert yarn["verdict"] == WITHIN_NOISE  # the same mean, its own small noise
    pi_ret = [v for v in res["verdicts"] if v["group"] == "extension-retrieval" and v["scheme"] == "linear"][0]
    assert pi_ret["verdict"] == SEEN and pi_ret["test"].startswith("exact McNemar (32 trials only the first right, 0")
    yarn_ret = [v for v in res["verdicts"] if v["group"] == "extension-retrieval" and v["scheme"] == "yarn"][0]
    assert yarn_ret["verdict"] == WITHIN_NOISE  # 15% vs 10%: 3 discordant trials, p = 0.25
    m = sum(v["verdict"] != NOT_MEASURED for v in res["verdicts"])
    for v in res["verdicts"]:
        if v["verdict"] != NOT_MEASURED:
            assert v["holm_tests"] == m and f"over {m} tests" in v["evidence"] and " vs " in v["evidence"]
    text = markdown(res)
    assert f"This run makes {m} comparisons" in text and "Holm" in text
    # what so many verdicts mean for the 95% intervals printed beside them
    assert f"95% on its own: of the {2 * m} printed for these comparisons, about {0.1 * m:.1f} would miss" in text
    assert "at 512 bytes, far keys 0% [0%, 6%] vs near keys 80% [68%, 89%]: seen" in text
    assert "## Passkey retrieval" in text and "| alibi | far | — | 0% [0%, 6%] · -15." in text
    assert "machinery check" not in text


def test_the_rope_far_keys_are_judged_against_near_keys_at_the_same_length():
    """Regression: far keys at 8x were compared with near keys at 1x, which mixes distance with length."""
    res = constructed_results()
    ret = [v for v in res["verdicts"] if v["group"] == "retrieval" and v["scheme"] == "rope"][0]
    assert ret["a"]["label"] == "far keys at 512" and ret["b"]["label"] == "near keys at 512"
    assert ret["b"]["value"] == pytest.approx(round(0.2 * 64) / 64)  # the 512 near cell, not the 64 one


def test_a_run_too_small_is_a_machinery_check_whatever_its_preset():
    res = constructed_results()
    assert res["machinery_check"] is False and res["verdicts"]
    cfg = dict(res["config"], steps=40)  # called "quick", sized like a smoke run
    small = build_results(cfg, res["corpus"], {}, {"eval": {}, "extension": {}, "lr_sweep": {}}, complete=True)
    assert small["machinery_check"] is True and small["verdicts"] == []
    assert "40 training steps" in small["machinery_check_reason"]
    text = markdown(small)
    assert "machinery check: numbers carry no meaning" in text.splitlines()[2]
    assert "**seen**" not in text and "None: machinery check" in text
    big = dict(res["config"], preset="smoke")  # called "smoke", sized like a real run
    assert (
        build_results(big, res["corpus"], {}, {"eval": {}, "extension": {}, "lr_sweep": {}}, True)["machinery_check"]
        is False
    )


def test_the_smoke_preset_is_a_machinery_check_by_its_size():
    smoke = preset_config("smoke").to_dict()
    reason = machinery_check_reason(smoke)
    assert "40 training steps" in reason and "16 validation windows" in reason and "12 passkey trials" in reason
    assert machinery_check_reason(preset_config("quick").to_dict()) is None


@pytest.mark.parametrize("weight", [0.0, 1.0])
def test_a_passkey_step_trains_on_passkey_rows_with_the_answer_term(weight):
    from posenc.measuring.lab.distributed import Dist
    from posenc.measuring.lab.passkey import answer_loss
    from posenc.measuring.lab.train import batch_offsets, train_steps

    cfg = preset_config("smoke")
    data = filler(20_000)
    step, length, batch = 4, 32, 4  # step 4 is a passkey step at 0.2
    assert is_retrieval_step(step, 0.2) and not is_retrieval_step(step - 1, 0.2)
    a, b = build_model(cfg, "rope"), build_model(cfg, "rope")
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    one_step = dict(start=step, total=step + 1, length=length, batch=batch, seed=3, device="cpu", d=Dist())
    plain_sgd = dict(lr=0.1, warmup=0, min_ratio=1.0, grad_clip=1e9)  # a constant rate, no clipping
    train_steps(a, opt_a, data, **one_step, **plain_sgd, retrieval_share=0.2, answer_weight=weight)
    rows = training_rows(data, batch_offsets(data.size, length, batch, 3, step), length, 3, step)
    t = torch.from_numpy(rows.astype(np.int64))
    logits = b(t[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), t[:, 1:].reshape(-1))
    (loss + weight * answer_loss(logits, t[:, 1:])).backward()
    torch.optim.SGD(b.parameters(), lr=0.1).step()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6), name


def test_training_stopped_part_way_continues_to_the_same_model():
    """``stop`` pauses a schedule of ``total`` steps; continuing from there gives the model that one
    uninterrupted call gives (same batches, same learning rates, same passkey steps)."""
    from posenc.measuring.lab.distributed import Dist
    from posenc.measuring.lab.train import make_optimizer, train_steps

    cfg = preset_config("smoke")
    data = filler(20_000)
    common = dict(
        total=10,
        length=32,
        batch=4,
        lr=3e-3,
        warmup=2,
        min_ratio=0.1,
        grad_clip=1.0,
        seed=5,
        device="cpu",
        d=Dist(),
        retrieval_share=0.5,
        answer_weight=5.0,
    )
    torch.manual_seed(0)
    a = build_model(cfg, "rope")
    b = copy.deepcopy(a)
    opt_a, opt_b = make_optimizer(a, 3e-3, 0.1), make_optimizer(b, 3e-3, 0.1)
    train_steps(a, opt_a, data, start=0, **common)
    train_steps(b, opt_b, data, start=0, stop=4, **common)
    assert not all(torch.equal(pa, pb) for pa, pb in zip(a.parameters(), b.parameters()))
    train_steps(b, opt_b, data, start=4, **common)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(pa, pb), name
    with pytest.raises(ValueError, match=r"stop must be in \[start, total\] = \[4, 10\], got 11"):
        train_steps(b, opt_b, data, start=4, stop=11, **common)


def test_the_report_says_when_no_model_learned_the_copy():
    res = constructed_results()
    assert "No model retrieved a single key" not in markdown(res)  # RoPE retrieves 90% of near keys at 1x
    for scheme in res["schemes"].values():
        for c in scheme["eval"]["64"]["retrieval"].values():
            c["accuracy"], c["accuracy_ci"] = 0.0, [0.0, 0.0]
    assert "No model retrieved a single key at the training length (64 bytes)." in markdown(res)
    res["schemes"]["alibi"]["eval"]["64"]["retrieval"]["mid"]["accuracy"] = 1 / 64  # one key is enough
    assert "No model retrieved" not in markdown(res)


@pytest.mark.parametrize("share", [0.0, 0.5])
def test_the_fine_tune_reads_passkey_sequences_only_when_asked(share):
    """``finetune_retrieval_share`` 0 (the default) fine-tunes on plain text; 0.5 makes every other
    fine-tune step a passkey step at the new length, with the run's answer weight."""
    from posenc.measuring.lab.extend import finetune

    cfg = preset_config("smoke", finetune_retrieval_share=share, finetune_steps=4)
    data = filler(20_000)
    torch.manual_seed(0)
    model = build_model(cfg, "rope")
    plain = copy.deepcopy(model)
    finetune(model, data, cfg, 64, device="cpu")
    finetune(plain, data, preset_config("smoke", finetune_retrieval_share=0.0, finetune_steps=4), 64, device="cpu")
    same = all(torch.equal(a, b) for a, b in zip(model.parameters(), plain.parameters()))
    assert same == (share == 0.0)  # steps 1 and 3 read passkey rows only when asked
