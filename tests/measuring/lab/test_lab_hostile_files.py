"""``posenc lab`` against hostile run files and values: crafted ``progress.json`` cells, flags of 400
digits, a folder at the lock path, an interrupted write's temporaries, the umask of an export, the
statistics on overflowing or numpy inputs, and damaged per-seed records of a summary.

Each test here lost data or ended in a traceback before: ``--resume`` copied a string, NaN or
400-digit number planted in ``progress.json`` into ``results.json`` (NaN made it invalid JSON);
``--steps`` (and six other flags) of 400 digits raised ``OverflowError``, ``--seeds`` after creating
the run folder; a NaN standard error gave p = 0, which Holm's rule rejected; ``np.int64(10)`` was
refused as a count and ``True`` taken for one; a NaN or a string among one seed's per-window
differences stopped the whole rebuild of the across-seed verdicts; an export folder was 0700.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lab_cli import one_line, tiny_lab_flags

from posenc.cli import main
from posenc.measuring.lab.schema import Progress, RunFileError
from posenc.measuring.lab.stats import (
    binom_test,
    clopper_pearson,
    fisher_exact,
    holm,
    newcombe_paired,
    paired_t,
    welch_t,
    wilson,
)
from posenc.measuring.lab.store import LOCK_NAME
from posenc.measuring.lab.verdicts import NOT_MEASURED, SEEN, combine_seeds, compare
from posenc.runs import lab_schema

BIG = "1" + "0" * 400
SMOKE = ["lab", "--preset", "smoke", "--threads", "1", "--no-plots"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """The smallest real run (rope, two lengths) with one extension method, finished."""
    run = tmp_path_factory.mktemp("lab_hostile") / "tiny"
    flags = [f for f in tiny_lab_flags("rope") if f != "--no-extension"] + ["--extension-methods", "linear"]
    assert main(flags + ["--out", str(run)]) == 0
    return run


def _copy(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(run, out, ignore=shutil.ignore_patterns(LOCK_NAME))
    return out


# -- progress.json cells ---------------------------------------------------------------------------
PLANTS = [
    (("eval", "rope", "64", "bpb"), "1.5"),
    (("eval", "rope", "64", "bpb"), math.nan),
    (("eval", "rope", "32", "bpb_ci"), [0.0, int(BIG)]),
    (("eval", "rope", "32", "bpb_windows"), [1.0, 1.0, 1.0, math.inf]),
    (("eval", "rope", "32", "n_windows"), True),
    (("eval", "rope", "64", "loss_by_position"), ["x"]),
    (("eval", "rope", "64", "retrieval", "near", "correct"), [int(BIG), 0]),
    (("eval", "rope", "64", "retrieval", "near", "accuracy"), 1.5),
    (("eval", "rope", "64", "cpu_seconds"), -1.0),
    (("extension", "linear", "64", "bpb_final32"), int(BIG)),
    (("extension", "none", "64", "retrieval", "far", "logp"), [math.nan, 0.0]),
]


def _plant(progress: dict, where, value) -> None:
    cell = progress
    for key in where[:-1]:
        cell = cell[key]
    cell[where[-1]] = value


@pytest.mark.parametrize("where, value", PLANTS)
def test_resume_refuses_a_planted_cell_in_one_line_and_rewrites_nothing(tiny_run, tmp_path, capsys, where, value):
    run = _copy(tiny_run, tmp_path)
    progress = json.loads((run / "progress.json").read_text())
    _plant(progress, where, value)
    (run / "progress.json").write_text(json.dumps(progress))  # NaN and Infinity as Python writes them
    results = (run / "results.json").read_bytes()
    assert main(["lab", "--resume", str(run)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "progress.json" in line and f"{where[0]} {where[1]!r} at {where[2]!r}" in line and where[-1] in line
    assert (run / "results.json").read_bytes() == results


def test_every_cell_a_run_wrote_passes_the_check(tiny_run):
    progress = json.loads((tiny_run / "progress.json").read_text())
    cells = [(k, c) for k in ("eval", "extension") for per in progress[k].values() for c in per.values()]
    assert len(cells) >= 4
    assert all(lab_schema.check_progress_cell(c, finetuned=k == "extension") is None for k, c in cells)
    assert lab_schema.check_progress_cell({"cannot": True, "note": "cannot: the learned table has 32 rows"}) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**450), 10**450) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_cell_with_any_value_anywhere_is_refused_or_json_safe(tiny_run, data):
    """Any value put in any field of a real cell: the cell is refused with a reason, or it is still
    plain JSON (no NaN, no infinity, no number past float64) that a results file can hold."""
    progress = json.loads((tiny_run / "progress.json").read_text())
    cell = progress["eval"]["rope"]["64"]
    keys = sorted(cell) + ["retrieval.near." + k for k in sorted(cell["retrieval"]["near"])] + ["extra"]
    key = data.draw(st.sampled_from(keys))
    value = data.draw(JSON)
    target = cell["retrieval"]["near"] if key.startswith("retrieval.") else cell
    target[key.rsplit(".", 1)[-1]] = value
    problem = lab_schema.check_progress_cell(cell)
    if problem is None:
        text = json.dumps(cell, allow_nan=False)
        assert all(abs(float(v)) < 1e300 for v in _numbers(json.loads(text)))
        Progress.from_dict({"eval": {"rope": {"64": cell}}}, "progress.json")
    else:
        assert isinstance(problem, str) and len(problem) < 200
        with pytest.raises(RunFileError, match="cell eval 'rope' at '64'"):
            Progress.from_dict({"eval": {"rope": {"64": cell}}}, "progress.json")


def _numbers(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def test_a_planted_lr_sweep_score_or_cpu_time_is_refused():
    for data, words in (
        ({"lr_sweep": {"rope": {"0.003": "low"}}}, "lr_sweep 'rope' at '0.003'"),
        ({"lr_sweep": {"rope": {"0.003": math.nan}}}, "not bits per byte or null"),
        ({"cpu_seconds": int(BIG)}, "'cpu_seconds' is not a number of seconds"),
    ):
        with pytest.raises(RunFileError, match=words):
            Progress.from_dict(data, "progress.json")
    kept = Progress.from_dict({"lr_sweep": {"rope": {"0.003": None, "0.001": 3.2}}}, "p")
    assert kept.lr_sweep["rope"] == {"0.003": None, "0.001": 3.2}


# -- the run folder ----------------------------------------------------------------------------------
def test_an_interrupted_writes_temporaries_are_removed_on_resume(tiny_run, tmp_path):
    run = _copy(tiny_run, tmp_path)
    left = ["progress.json.k3j2x9.tmp", "results.md.ab12cd.tmp", "checkpoints/rope.pt.x1y2z3.tmp"]
    kept = ["notes.txt.abc123.tmp"]  # not a lab file's: left alone
    for name in left + kept:
        (run / name).write_bytes(b"half a file")
    assert main(["lab", "--resume", str(run)]) == 0
    assert [name for name in left + kept if (run / name).exists()] == kept


def test_a_folder_at_the_lock_path_is_refused_in_one_line(tiny_run, tmp_path, capsys):
    run = _copy(tiny_run, tmp_path)
    (run / LOCK_NAME).mkdir()
    assert main(["lab", "--resume", str(run)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "is a folder" in line and LOCK_NAME in line


def test_an_export_gets_the_folder_mode_the_umask_allows(tiny_run, tmp_path):
    pytest.importorskip("transformers")
    old = os.umask(0o022)
    try:
        assert main(["lab", "export", str(tiny_run), str(tmp_path / "ckpt")]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "ckpt").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "ckpt" / "config.json").stat().st_mode) == 0o644


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--steps", BIG], "steps must be <= "),
        (["--batch-size", BIG], "batch_size must be <= "),
        (["--d-model", BIG], "d_model must be <= "),
        (["--seed", BIG], "seed must be <= 4294967295"),
        (["--retrieval-trials", BIG], "retrieval_trials must be <= 100000"),
        (["--eval-multipliers", f"1,{BIG}"], "eval_multipliers must be increasing integers"),
        (["--threads", BIG], "--threads must be <= 4096, got a 401-digit number"),
        (["--seeds", f"1,{BIG}"], "--seeds must list distinct seeds >= 0 and <= 4294967295"),
        (["--seeds", "1,2", "--threads", BIG], "--threads must be <= 4096"),
        (["--seeds", "1,2", "--jobs", BIG], "--jobs must be <= 4096"),
        (["--seeds", "1,2", "--steps", BIG], "steps must be <= "),
    ],
)
def test_values_past_any_use_are_one_line_and_create_nothing(tmp_path, capsys, flags, words):
    out = tmp_path / "run"
    assert main(SMOKE + flags + ["--out", str(out)]) == 2
    assert words in one_line(capsys.readouterr().err)
    assert not out.exists()


# -- the statistics ----------------------------------------------------------------------------------
def test_numpy_counts_are_counts_and_a_bool_is_not():
    assert clopper_pearson(np.int64(3), np.int64(10)) == clopper_pearson(3, 10)
    assert wilson(np.int32(0), np.uint8(64)) == wilson(0, 64)
    assert fisher_exact(*map(np.int64, (1, 10, 5, 10))) == fisher_exact(1, 10, 5, 10)
    assert binom_test(np.int64(4), 10) == binom_test(4, 10)
    assert newcombe_paired(*map(np.int16, (1, 2, 3, 4))) == newcombe_paired(1, 2, 3, 4)
    for bad in ((True, 10), (3, True), (np.bool_(True), 10), (3.0, 10)):
        with pytest.raises(TypeError, match="must be an integer"):
            clopper_pearson(*bad)
    with pytest.raises(ValueError, match="k must be <= 10"):
        wilson(np.int64(11), np.int64(10))


def test_an_overflowing_effect_or_standard_error_is_never_a_rejection():
    # finite values whose differences overflow: effect inf, standard error NaN, which gave p = 0
    a, b = [1e308, 1e308, 0.0, 0.0], [-1e308, -1e308, 0.0, 0.0]
    with pytest.raises(ValueError, match="not a finite number"):
        paired_t(a, b)
    with pytest.raises(ValueError, match="not a finite number"):
        welch_t([1.7e308, 1.7e308, 1.7e308], [0.0, 0.0, 0.0])
    record = compare(
        "c",
        {"bpb": 1.0, "bpb_ci": [0.9, 1.1], "bpb_windows": a},
        {"bpb": 1.0, "bpb_ci": [0.9, 1.1], "bpb_windows": b},
        ">",
        labels=("a", "b"),
        group="perplexity",
        kind="bpb",
        paired=True,
    )
    assert record["verdict"] == NOT_MEASURED and record["p"] is None and "not a finite number" in record["evidence"]
    assert holm([None, 0.5]) == [False, False]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=2, max_size=6))
def test_a_t_test_is_a_finite_p_or_a_clear_error(values):
    for test, other in ((paired_t, [0.0] * len(values)), (welch_t, [-v for v in values])):
        try:
            out = test(values, other)
        except ValueError as err:
            assert "not a finite number" in str(err)
        else:
            assert 0.0 <= out["p"] <= 1.0 and all(math.isfinite(out[k]) for k in ("effect", "se", "df"))


# -- verdicts across seeds -------------------------------------------------------------------------
def _window_record(diffs, claim="c"):
    return {
        "claim": claim,
        "group": "perplexity",
        "scheme": "rope",
        "unit": "bpb",
        "relation": ">",
        "verdict": SEEN,
        "effect": float(np.mean([d for d in diffs if isinstance(d, float)])),
        "p": 1e-9,
        "units": "windows",
        "unit_diffs": diffs,
    }


@pytest.mark.parametrize("damage", [math.nan, "0.5", int(BIG)])
def test_a_damaged_seed_record_marks_its_claim_not_measured_and_the_others_go_on(damage):
    rng = np.random.default_rng(0)
    rows = 0.5 + 0.1 * rng.standard_normal((3, 16))
    per_seed = {
        s: [_window_record([float(v) for v in rows[s]], claim) for claim in ("damaged", "kept")] for s in range(3)
    }
    per_seed[1][0]["unit_diffs"][4] = damage
    got = {r["claim"]: r for r in combine_seeds(per_seed)}
    assert got["damaged"]["verdict"] == NOT_MEASURED and got["damaged"]["p"] is None
    assert "seed 1's per-window differences hold" in got["damaged"]["evidence"]
    assert got["kept"]["verdict"] == SEEN and got["kept"]["holm_tests"] == 1


@pytest.mark.parametrize(
    "counts, test, words",
    [
        ([70, 64, 0, 64], "Fisher exact (70/64 vs 0/64)", "more exact matches than trials"),
        ([1, 0, 1, 64], "Fisher exact (1/0 vs 1/64)", "more exact matches than trials"),
        ([0, 0, 0, 0], "exact McNemar (0 trials only the first right, 0 only the second)", "hold no trial"),
        ([1, -2, 3, 4], "exact McNemar (1 trials only the first right, 1 only the second)", "four whole numbers"),
        ([1, True, 3, 4], "exact McNemar (1 trials only the first right, 1 only the second)", "four whole numbers"),
    ],
)
def test_exact_match_counts_that_cannot_be_are_refused(counts, test, words):
    records = {
        s: [
            {
                **_window_record([0.0, 0.0]),
                "unit": "percent",
                "units": "trials",
                "effect": 0.1 * (s + 1),
                "se": 0.05,
                "df": 63.0,
                "test": test,
                "counts": list(counts) if s == 2 else [10, 64, 5, 64] if test.startswith("Fisher") else [5, 5, 0, 54],
            }
        ]
        for s in range(3)
    }
    got = combine_seeds(records)[0]
    assert got["verdict"] == NOT_MEASURED and "seed 2's counts" in got["evidence"] and words in got["evidence"]
