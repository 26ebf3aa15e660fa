"""``posenc eval``'s output folder and results: no run lost or mixed, numbers that mean what they say,
and a run rebuilt from its results file.

Each data-loss test here lost data before: a second eval into a running one's folder, the same path
holding another model, ``--write-config`` over the checkpoint's own config, ``--out`` over a folder
of other files. Tiny random checkpoints built here; nothing downloaded.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from posenc.cli import main  # noqa: E402
from posenc.measuring.eval import measure  # noqa: E402
from posenc.measuring.eval.files import LOCK_NAME, depth_key  # noqa: E402
from posenc.measuring.lab.export import export_model  # noqa: E402
from posenc.model import ModelConfig, TinyLM  # noqa: E402
from posenc.runs import RunLock  # noqa: E402
from posenc.teaching.explorer.eval_results import read_eval_results  # noqa: E402

LN2 = math.log(2.0)


def _text(folder: Path) -> Path:
    from posenc.measuring.corpus import stdlib_root

    path = folder / "text.txt"
    source = (stdlib_root() / "textwrap.py").read_text(encoding="utf-8")
    path.write_bytes(source.encode("ascii", "ignore"))
    return path


@pytest.fixture()
def checkpoint(tmp_path):
    folder = tmp_path / "ckpt"
    torch.manual_seed(0)
    export_model(TinyLM(ModelConfig(d_model=32, n_layers=1, n_heads=2)), folder, max_position_embeddings=32)
    return folder


def _argv(model: Path, text: Path, out: Path, *extra: str) -> list:
    argv = ["eval", str(model), "--lengths", "32,64", "--scalings", "none,linear:2", "--windows", "3"]
    return (
        argv
        + ["--passkey-trials", "2", "--depths", "0,1", "--passkey-format", "lab", "--no-plots"]
        + [
            "--text",
            str(text),
            "--out",
            str(out),
            *extra,
        ]
    )


def _files(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != LOCK_NAME}


# -- lost or mixed work --------------------------------------------------------------------------------------
def test_a_second_eval_into_a_running_ones_folder_is_refused(checkpoint, tmp_path, monkeypatch, capsys):
    """While one evaluation runs, another with other settings into the same --out is refused (both
    used to exit 0, and the folder held one run's cells under the other's settings)."""
    text, out = _text(tmp_path), tmp_path / "out"
    real, codes = measure.window_nats, []

    def nested(*a, **k):
        if not codes:  # from inside the first evaluation, start a second one
            codes.append(main(_argv(checkpoint, text, out, "--seed", "7")))
        return real(*a, **k)

    monkeypatch.setattr(measure, "window_nats", nested)
    assert main(_argv(checkpoint, text, out)) == 0
    assert codes == [2]
    assert "in use by another posenc eval" in capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["settings"]["seed"] == 0
    assert set(results["perplexity"]) == {"none", "linear:2"}


def test_the_lock_is_held_across_processes(checkpoint, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    with RunLock(out, LOCK_NAME):  # as another process's eval would hold it (flock: per open file)
        assert main(_argv(checkpoint, _text(tmp_path), out)) == 2
    assert "in use by another posenc eval (process " in capsys.readouterr().err
    assert main(_argv(checkpoint, _text(tmp_path), out)) == 0  # free again


def test_resume_knows_the_checkpoint_by_content_not_path(checkpoint, tmp_path, monkeypatch, capsys):
    text, out = _text(tmp_path), tmp_path / "out"
    assert main(_argv(checkpoint, text, out)) == 0
    # the same files at another path: the same evaluation, nothing measured again
    moved = tmp_path / "moved"
    checkpoint.rename(moved)
    real, calls = measure.window_nats, []
    monkeypatch.setattr(measure, "window_nats", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert main(_argv(moved, text, out)) == 0 and calls == []
    moved.rename(checkpoint)
    done = _files(out)
    weights = (checkpoint / "model.safetensors").read_bytes()
    # other weights at the same path: another model, refused (it used to report the old numbers)
    torch.manual_seed(1)
    other = tmp_path / "other"
    export_model(TinyLM(ModelConfig(d_model=32, n_layers=1, n_heads=2)), other, max_position_embeddings=32)
    (checkpoint / "model.safetensors").write_bytes((other / "model.safetensors").read_bytes())
    capsys.readouterr()
    assert main(_argv(checkpoint, text, out)) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "another checkpoint" in err and "model_sha256" in err
    # the first weights back, another config at the same path (a scaling written over it): refused too
    (checkpoint / "model.safetensors").write_bytes(weights)
    assert main(["eval", str(checkpoint), "--scalings", "linear:2", "--write-config", str(checkpoint), "--force"]) == 0
    assert main(_argv(checkpoint, text, out)) == 2
    assert calls == [] and _files(out) == done  # nothing measured, nothing of the first run touched


def test_out_holding_other_files_is_refused_and_untouched(checkpoint, tmp_path, capsys):
    text = _text(tmp_path)
    for folder in (checkpoint, tmp_path / "lab-run"):
        folder.mkdir(exist_ok=True)
        if folder.name == "lab-run":
            (folder / "results.json").write_text('{"schema": "posenc.lab/results"}')
            (folder / "config.json").write_text("{}")
        before = _files(folder)
        assert main(_argv(checkpoint, text, folder)) == 2
        assert _files(folder) == before
    err = capsys.readouterr().err
    assert "is the checkpoint's folder" in err and "holds files posenc eval did not write" in err
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "results.json").write_text('{"schema": "someone/else"}')
    assert main(_argv(checkpoint, text, stray)) == 2
    assert (stray / "results.json").read_text() == '{"schema": "someone/else"}'


def test_write_config_never_replaces_a_file_without_force(checkpoint, tmp_path, capsys):
    own = (checkpoint / "config.json").read_bytes()
    argv = ["eval", str(checkpoint), "--scalings", "yarn:4", "--write-config"]
    assert main(argv + [str(checkpoint)]) == 2  # the checkpoint's own config.json
    assert "the checkpoint's own config.json" in capsys.readouterr().err
    assert (checkpoint / "config.json").read_bytes() == own
    assert main(argv + [str(checkpoint), "--force"]) == 0
    assert (checkpoint / "config.json.orig").read_bytes() == own  # kept
    written = json.loads((checkpoint / "config.json").read_text())
    assert written["rope_parameters"]["rope_type"] == "yarn"
    assert main(argv + [str(checkpoint / "config.json"), "--force"]) == 0  # a second backup, not over the first
    assert (checkpoint / "config.json.orig").read_bytes() == own
    assert json.loads((checkpoint / "config.json.orig.1").read_text()) == written
    new = tmp_path / "new"
    assert main(argv + [str(new)]) == 0 and (new / "config.json").is_file()
    assert main(argv + [str(new)]) == 2  # an existing file elsewhere: refused as well


# -- numbers that mean what they say --------------------------------------------------------------------------
def _bpe_checkpoint(folder: Path, text: str) -> Path:
    """A Llama-shaped random model with a byte-level BPE tokenizer trained here on ``text``: tokens
    cover 1 to many bytes, so windows differ in bytes per token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from posenc import testing

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False)
    model = testing.tiny_model_of_type(
        "llama", vocab_size=tok.get_vocab_size(), max_position_embeddings=32, bos_token_id=None, eos_token_id=None
    )
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def test_bits_per_byte_is_total_bits_over_total_bytes(tmp_path):
    """With a BPE tokenizer the mean of per-window ratios differs from the ratio of totals; eval reports
    the latter, recomputed here with plain transformers from the window offsets the results record."""
    text = _text(tmp_path)
    folder = _bpe_checkpoint(tmp_path / "bpe", text.read_text())
    out = tmp_path / "out"
    argv = ["eval", str(folder), "--lengths", "64", "--scalings", "none", "--windows", "6", "--passkey-trials", "0"]
    assert main(argv + ["--text", str(text), "--out", str(out), "--no-plots"]) == 0
    results = json.loads((out / "results.json").read_text())
    ends, span = results["settings"]["window_ends"], results["settings"]["span"]
    tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()
    ids = tok(text.read_text(), add_special_tokens=False)["input_ids"]
    bits, nbytes = [], []
    for end in ends:
        window = torch.tensor([ids[end - span - 1 : end]])
        with torch.no_grad():
            logp = torch.log_softmax(model(window[:, :-1]).logits.double(), -1)
        bits.append(float(-logp[0].gather(-1, window[0, 1:, None]).sum()) / LN2)
        nbytes.append(len(tok.decode(ids[end - span : end]).encode("utf-8")))
    total, per_window = sum(bits) / sum(nbytes), float(np.mean(np.array(bits) / np.array(nbytes)))
    assert abs(total - per_window) > 1e-4  # the two definitions differ here, so the check can fail
    assert results["perplexity"]["none"]["64"]["bpb"] == pytest.approx(total, abs=1e-6)
    lo, hi = results["perplexity"]["none"]["64"]["bpb_ci"]
    assert lo <= total <= hi


def test_depths_keep_exact_keys_and_their_own_trials(checkpoint, tmp_path):
    """Two depths equal to 6 significant digits are two rows (one used to overwrite the other); a depth's
    trials are the same whatever other depths are asked for."""
    text = _text(tmp_path)
    close = ["0.1234561", "0.1234562"]
    runs = {}
    for name, depths in (("a", ",".join(close + ["0.5"])), ("b", "0.5,1")):
        out = tmp_path / name
        argv = _argv(checkpoint, text, out) + ["--depths", depths, "--scalings", "none"]
        assert main(argv) == 0
        runs[name] = json.loads((out / "results.json").read_text())
    grid = runs["a"]["passkey"]["none"]["64"]
    assert set(grid) == {*close, "0.5"} and depth_key(0.1234561) == "0.1234561"
    assert grid["0.5"]["offsets"] == runs["b"]["passkey"]["none"]["64"]["0.5"]["offsets"]
    assert grid["0.5"]["keys"] == runs["b"]["passkey"]["none"]["64"]["0.5"]["keys"]
    assert grid[close[0]]["offsets"] != grid[close[1]]["offsets"] or grid[close[0]]["keys"] != grid[close[1]]["keys"]
    page = read_eval_results(tmp_path / "a")
    assert set(page["passkey"]["none"]["64"]) == {*close, "0.5"}  # the explorer shows both rows
    assert "0.123456" in (tmp_path / "a" / "results.md").read_text()
    header = next(line for line in (tmp_path / "a" / "results.md").read_text().splitlines() if "| length |" in line)
    assert close[0] in header and close[1] in header


def test_a_run_is_rebuilt_from_its_results_file(checkpoint, tmp_path):
    """The passkey rows, rebuilt from the offsets, keys and plant starts in results.json and the text,
    give the recorded accuracy and log2 p(key) on the checkpoint alone."""
    text, out = _text(tmp_path), tmp_path / "out"
    assert main(_argv(checkpoint, text, out)) == 0
    results = json.loads((out / "results.json").read_text())
    tok = transformers.AutoTokenizer.from_pretrained(checkpoint, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, local_files_only=True).eval()
    tokens = np.asarray(tok(text.read_text(), add_special_tokens=False)["input_ids"])
    checked = 0
    for n, cells in results["passkey"]["none"].items():
        for cell in cells.values():
            rows, answers = [], []
            for offset, key, start in zip(cell["offsets"], cell["keys"], cell["plant_starts"]):
                plant, query, answer = measure.key_tokens(tok, measure.LAB, key)
                filler = tokens[offset : offset + int(n) + 1]
                rows.append(measure.passkey_row(filler, plant, query + answer, start))
                answers.append(len(answer))
            correct, logp = measure.score_rows(model, np.stack(rows), answers, torch.device("cpu"))
            assert float(correct.mean()) == cell["accuracy"]
            assert float(logp.mean()) == pytest.approx(cell["logp_bits"], abs=1e-9)
            checked += 1
    assert checked == 4


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda c: c.update(nats=c["nats"][:1], final_nats=c["final_nats"][:1]), "needs nats as 3 finite numbers"),
        (lambda c: c.update(nats=["x"] * 3), "needs nats as 3 finite numbers"),
        (lambda c: c.update(tokens=32), "scored 32 tokens per window, not 64"),
        (lambda c: c.clear(), "scored None tokens"),
    ],
)
def test_malformed_progress_cells_are_refused_in_one_line(checkpoint, tmp_path, capsys, damage, words):
    """A cell of one window used to be accepted (bits per byte far from the truth); a non-number ended
    the resume in a traceback."""
    text, out = _text(tmp_path), tmp_path / "out"
    argv = _argv(checkpoint, text, out)
    assert main(argv) == 0
    progress = json.loads((out / "progress.json").read_text())
    damage(progress["cells"]["ppl|none|64"])
    (out / "progress.json").write_text(json.dumps(progress))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("posenc eval:") and words in last and "ppl|none|64" in last and "Traceback" not in err


def test_malformed_passkey_cells_and_unknown_keys_are_refused(checkpoint, tmp_path, capsys):
    text, out = _text(tmp_path), tmp_path / "out"
    argv = _argv(checkpoint, text, out)
    assert main(argv) == 0
    good = json.loads((out / "progress.json").read_text())
    for change, words in (
        (lambda cells: cells["passkey|none|64|1"].update(correct=[2.0, 0.0]), "exact match other than 0 or 1"),
        (lambda cells: cells["passkey|none|64|1"].update(keys=[1.5, 2]), "needs keys as 2 integers"),
        (lambda cells: cells.update({"passkey|none|64|0.7": cells["passkey|none|64|1"]}), "not a cell of this"),
    ):
        progress = json.loads(json.dumps(good))
        change(progress["cells"])
        (out / "progress.json").write_text(json.dumps(progress))
        capsys.readouterr()
        assert main(argv) == 2
        assert words in capsys.readouterr().err.strip().splitlines()[-1]


def test_one_window_is_refused(checkpoint, tmp_path, capsys):
    argv = _argv(checkpoint, _text(tmp_path), tmp_path / "o") + ["--windows", "1"]
    assert main(argv) == 2
    assert "--windows must be at least 2" in capsys.readouterr().err


def test_the_lab_lock_is_the_shared_one():
    from posenc.measuring.lab import store
    from posenc.runs import FolderBusy

    assert issubclass(store.RunLock, RunLock) and store.FolderBusy is FolderBusy


# -- smaller fixes -----------------------------------------------------------------------------------------
def test_a_fitted_scaling_is_labelled_with_the_factor_it_uses():
    from posenc.measuring.eval.scalings import parse_spec, scaled_config, spec_summary

    lengths = [32, 64, 128]
    assert [scaled_config(parse_spec("dynamic"), n, 32).factor for n in lengths] == [2.0, 2.0, 2.0]
    assert spec_summary(parse_spec("dynamic"), 32, lengths) == "factor 2 at every length (as posenc lab extends)"
    assert spec_summary(parse_spec("linear"), 32, lengths) == "factor L / 32 at each length L (as posenc lab extends)"


def test_the_written_static_ntk_is_described_in_evals_words(checkpoint, tmp_path, capsys):
    assert main(["eval", str(checkpoint), "--scalings", "ntk:4", "--write-config", str(tmp_path / "w")]) == 0
    said = capsys.readouterr().out
    assert "panels" not in said and "rope type 'default' with rope_theta" in said


def test_the_heatmaps_show_intervals_and_log_probabilities(checkpoint, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    from posenc.measuring.eval import report

    shown = []
    real = Axes.text
    monkeypatch.setattr(Axes, "text", lambda self, x, y, s, *a, **k: shown.append(s) or real(self, x, y, s, *a, **k))
    out = tmp_path / "out"
    assert main(_argv(checkpoint, _text(tmp_path), out)) == 0
    results = json.loads((out / "results.json").read_text())
    written = report.plots(results, out)
    assert any(p.name.startswith("passkey_") for p in written)
    cells = [s for s in shown if "bits" in s]
    assert len(cells) == 2 * 2 * 2  # two scalings, two lengths, two depths
    cell = results["passkey"]["none"]["32"]["0"]
    lo, hi = cell["accuracy_ci"]
    assert f"[{lo:.0%}, {hi:.0%}]" in cells[0] and f"{cell['logp_bits']:.1f} bits" in cells[0]
