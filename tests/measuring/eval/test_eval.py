"""``posenc eval``: against the lab's own numbers for an exported lab model, against transformers'
own rotary code for ``--write-config``, and on hostile inputs.

Everything runs on CPU on tiny models; nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from posenc.cli import main  # noqa: E402
from posenc.measuring.corpus import load_corpus, stdlib_root  # noqa: E402
from posenc.measuring.eval import cli, measure, settings  # noqa: E402
from posenc.measuring.eval.cli import estimate_bytes  # noqa: E402
from posenc.measuring.eval.scalings import SpecError, parse_spec, parse_specs, scaled_config  # noqa: E402
from posenc.measuring.lab import passkey as lab_passkey  # noqa: E402
from posenc.measuring.lab.export import export_model, load_run_model  # noqa: E402
from posenc.model import ModelConfig, TinyLM  # noqa: E402
from posenc.rope import rope_frequencies  # noqa: E402
from posenc.rope.registry import extension_types  # noqa: E402

METHODS = ",".join(extension_types())


def _ascii_source(tmp_path: Path) -> Path:
    root = stdlib_root()
    text = "\n\n".join((root / n).read_text(encoding="utf-8") for n in ("argparse.py", "textwrap.py", "dataclasses.py"))
    path = tmp_path / "source.txt"
    path.write_bytes(text.encode("ascii", "ignore"))  # the byte tokenizer's ids are then the file's bytes
    return path


@pytest.fixture(scope="module")
def lab_model(tmp_path_factory):
    """A tiny lab run (RoPE, every extension method, passkey trials), exported, and its validation text."""
    tmp = tmp_path_factory.mktemp("evallab")
    data, run, out = _ascii_source(tmp), tmp / "run", tmp / "exported"
    argv = ["lab", "--preset", "smoke", "--schemes", "rope", "--extension-methods", METHODS, "--steps", "30"]
    argv += ["--warmup-steps", "3", "--eval-windows", "4", "--retrieval-trials", "4", "--threads", "1"]
    assert main(argv + ["--no-plots", "--data", str(data), "--out", str(run)]) == 0
    assert main(["lab", "export", str(run), str(out)]) == 0
    val = tmp / "val.txt"
    val.write_bytes(bytes(load_corpus(str(data)).val))
    return {"run": run, "model": out, "val": val, "results": json.loads((run / "results.json").read_text())}


@pytest.mark.slow  # a lab run and an eval of every scaling: tens of seconds on 2 cores
def test_eval_reproduces_the_labs_numbers_and_extension_table(lab_model, tmp_path):
    out = tmp_path / "eval"
    argv = ["eval", str(lab_model["model"]), "--text", str(lab_model["val"]), "--windows", "4", "--out", str(out)]
    argv += ["--scalings", "none," + METHODS, "--passkey-trials", "2", "--passkey-format", "lab", "--no-plots"]
    assert main(argv) == 0
    ours = json.loads((out / "results.json").read_text())
    lab = lab_model["results"]
    assert ours["schema"] == "posenc.eval/results" and ours["schema_version"] == 2 and ours["complete"]
    assert ours["trained_context"] == lab["train_len"] == 32
    assert ours["lengths"] == lab["eval_lengths"] == [32, 64, 128, 256]
    compared = 0
    for n in ours["lengths"]:
        plain = lab["schemes"]["rope"]["eval"][str(n)]
        e = ours["perplexity"]["none"][str(n)]
        assert e["bpb"] == pytest.approx(plain["bpb"], abs=1e-5)
        assert e["final_bpb"] == pytest.approx(plain["bpb_final32"], abs=1e-5)
        for method in extension_types():
            if n == lab["train_len"]:
                continue
            assert ours["perplexity"][method][str(n)]["bpb"] == pytest.approx(
                lab["extension"][method][str(n)]["bpb"], abs=1e-5
            ), (method, n)
            compared += 1
    assert compared == 3 * len(extension_types())
    # the extension methods change the numbers (so the comparison above could fail)
    far = {m: ours["perplexity"][m]["256"]["bpb"] for m in ["none", *extension_types()]}
    assert len({round(v, 6) for v in far.values()}) == len(far)
    assert set(ours["passkey"]["yarn"]["256"]) == {"0", "0.25", "0.5", "0.75", "1"}
    table = (out / "results.md").read_text()
    assert "| yarn |" in table and "## Passkey retrieval" in table


@pytest.mark.slow  # a lab run and an eval of every scaling: tens of seconds on 2 cores
def test_passkey_reproduces_the_labs_trials(lab_model):
    """The lab's planted keys, built by eval's row builder and scored on the exported model, give the
    lab's exact matches and log-probabilities, and the lab's accuracies."""
    lab = lab_model["results"]
    tiny, train_len = load_run_model(lab_model["run"], "rope")
    hf = transformers.AutoModelForCausalLM.from_pretrained(lab_model["model"], local_files_only=True).eval()
    tok = transformers.AutoTokenizer.from_pretrained(lab_model["model"], local_files_only=True)
    val = np.frombuffer(lab_model["val"].read_bytes(), dtype=np.uint8)
    cfg = json.loads((lab_model["run"] / "config.json").read_text())
    for n in lab["eval_lengths"]:
        plan = lab_passkey.trial_plan(n, train_len, cfg["retrieval_trials"], val.size, cfg["seed"])
        rows, answers = [], []
        for _, offset, key, distance in plan:
            plant, query, answer = measure.key_tokens(tok, measure.LAB, key)
            start = (n + 1 - len(answer)) - distance - len(b"<key:")  # the lab's distance as a start
            row = measure.passkey_row(val[offset : offset + n + 1], plant, query + answer, start)
            np.testing.assert_array_equal(row, lab_passkey.build_sequence(val[offset : offset + n + 1], key, distance))
            rows.append(row)
            answers.append(len(answer))
        correct, logp = measure.score_rows(hf, np.stack(rows), answers, torch.device("cpu"))
        lab_correct, lab_logp = lab_passkey.score_trials(tiny, val, plan, n, batch=64, device="cpu")
        np.testing.assert_array_equal(correct, lab_correct)
        np.testing.assert_allclose(logp, lab_logp, atol=1e-4)
        for name, cell in lab["schemes"]["rope"]["eval"][str(n)]["retrieval"].items():
            idx = [i for i, p in enumerate(plan) if p[0] == name]
            assert float(correct[idx].mean()) == pytest.approx(cell["accuracy"])
            assert float(logp[idx].mean()) == pytest.approx(cell["logp_bits"], abs=1e-4)


@pytest.mark.slow  # a lab run and an eval of every scaling: tens of seconds on 2 cores
def test_passkey_under_each_extension_reproduces_the_labs_extension_retrieval(lab_model):
    """Each fitted scaling as eval applies it (through the patch, on the exported model) retrieves the
    lab's planted keys as the lab's extended TinyLM did: the extension table's retrieval, bin by bin."""
    from posenc.measuring.eval.scalings import applied

    lab = lab_model["results"]
    hf = transformers.AutoModelForCausalLM.from_pretrained(lab_model["model"], local_files_only=True).eval()
    tok = transformers.AutoTokenizer.from_pretrained(lab_model["model"], local_files_only=True)
    val = np.frombuffer(lab_model["val"].read_bytes(), dtype=np.uint8)
    cfg = json.loads((lab_model["run"] / "config.json").read_text())
    train_len, compared, logps = lab["train_len"], 0, set()
    for method in extension_types():
        for n in lab["eval_lengths"][1:]:
            plan = lab_passkey.trial_plan(n, train_len, cfg["retrieval_trials"], val.size, cfg["seed"])
            rows, answers = [], []
            for _, offset, key, distance in plan:
                plant, query, answer = measure.key_tokens(tok, measure.LAB, key)
                start = (n + 1 - len(answer)) - distance - len(b"<key:")
                rows.append(measure.passkey_row(val[offset : offset + n + 1], plant, query + answer, start))
                answers.append(len(answer))
            with applied(hf, parse_spec(method), n, train_len) as scaled:
                correct, logp = measure.score_rows(scaled, np.stack(rows), answers, torch.device("cpu"))
            cells = lab["extension"][method][str(n)]["retrieval"]
            assert cells, (method, n)
            for name, cell in cells.items():
                idx = [i for i, p in enumerate(plan) if p[0] == name]
                assert float(correct[idx].mean()) == pytest.approx(cell["accuracy"]), (method, n, name)
                assert float(logp[idx].mean()) == pytest.approx(cell["logp_bits"], abs=1e-3), (method, n, name)
                logps.add(round(cell["logp_bits"], 3))
                compared += 1
    assert compared >= len(extension_types()) * 3 * 2 and len(logps) > 1


@pytest.mark.slow  # a lab run and an eval of every scaling: tens of seconds on 2 cores
def test_chunked_head_equals_the_models_own_logits(lab_model):
    hf = transformers.AutoModelForCausalLM.from_pretrained(lab_model["model"], local_files_only=True).eval()
    x = torch.randint(0, 256, (2, 70))
    with torch.no_grad():
        full = torch.nn.functional.log_softmax(hf(x).logits.double(), -1)
        want = -full[:, :-1].gather(-1, x[:, 1:, None])[..., 0]
        got = measure.causal_lm_nats(hf, x[:, :-1], x[:, 1:], chunk=16)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# -- --write-config: transformers' own rotary code is the oracle ------------------------------------------
@pytest.fixture(scope="module")
def random_export(tmp_path_factory):
    folder = tmp_path_factory.mktemp("random")
    torch.manual_seed(0)
    export_model(
        TinyLM(ModelConfig(d_model=64, n_layers=1, n_heads=2, rotary_dim=16)), folder, max_position_embeddings=64
    )
    return folder


@pytest.mark.parametrize(
    "spec", ["linear:4", "yarn:4", "yarn:8:beta_fast=16:beta_slow=2", "llama3:4", "dynamic:4", "ntk:4"]
)
def test_write_config_loads_in_transformers_with_posencs_frequencies(random_export, tmp_path, spec, capsys):
    out = tmp_path / "cfg"
    assert main(["eval", str(random_export), "--scalings", spec, "--write-config", str(out)]) == 0
    written = json.loads((out / "config.json").read_text())
    source = json.loads((random_export / "config.json").read_text())
    assert {k: v for k, v in written.items() if "rope" not in k and k != "max_position_embeddings"} == {
        k: v for k, v in source.items() if "rope" not in k and k != "max_position_embeddings"
    }
    config = transformers.AutoConfig.from_pretrained(out, local_files_only=True)
    rope_type = config.rope_parameters["rope_type"]
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    seq = 200  # for dynamic: a length past the trained context
    if rope_type == "default":
        base = config.rope_parameters["rope_theta"]
        theirs = 1.0 / (base ** (torch.arange(0, 16, 2, dtype=torch.float64) / 16)), 1.0
    elif rope_type == "dynamic":
        theirs = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq)
    else:
        theirs = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu")
    ours = rope_frequencies(scaled_config(parse_spec(spec), 64, 64), 16, 10000.0, seq_len=seq)
    torch.testing.assert_close(theirs[0].double(), ours[0], rtol=1e-6, atol=0)
    assert theirs[1] == pytest.approx(ours[1], rel=1e-6)
    # the model loads with the written config, without posenc
    model = transformers.AutoModelForCausalLM.from_pretrained(random_export, config=config, local_files_only=True)
    assert model.config.rope_parameters["rope_type"] == rope_type


# -- specs ----------------------------------------------------------------------------------------------
def test_specs_come_from_the_registry():
    linear, yarn, fixed = parse_specs("linear,yarn:8:beta_fast=16,ntk:4")
    assert linear.fit and not fixed.fit and yarn.params == {"factor": 8.0, "beta_fast": 16.0}
    assert scaled_config(linear, 256, 64).factor == 4.0  # fitted to the length, as the lab does
    assert scaled_config(fixed, 256, 64).factor == 4.0 and scaled_config(fixed, 1024, 64).factor == 4.0
    assert scaled_config(yarn, 256, 64).original_max_position_embeddings == 64
    for bad, words in (
        ("nope", "unknown scaling 'nope'"),
        ("yarn:abc", "is not a number"),
        ("yarn:4:bogus=1", "has no parameter 'bogus'"),
        ("none:2", "takes no parameters"),
        ("longrope", "needs short_factor, long_factor, which are not numbers a spec can give"),
        ("longrope:4", "(--search finds them)"),  # used to end in a raw TypeError
        ("linear,linear", "more than once"),
    ):
        with pytest.raises(SpecError, match=words):
            parse_specs(bad)


# -- cost ----------------------------------------------------------------------------------------------
def test_lengths_that_do_not_fit_are_skipped_with_a_message(random_export, tmp_path, capsys, monkeypatch):
    # With fused attention every length reads the same tokens in the same memory; with eager attention
    # the scores grow as length^2, so a limit between two lengths' estimates skips the longer one.
    import functools

    monkeypatch.setattr(cli, "estimate_bytes", functools.partial(estimate_bytes, attention="eager"))
    config = transformers.AutoConfig.from_pretrained(random_export, local_files_only=True)
    fits, too_big = (estimate_bytes(config, r, n, 4, "cpu", attention="eager") for r, n in ((2, 128), (1, 256)))
    assert too_big > fits
    limit = (too_big / 0.9 + fits / 0.9) / 2 / 2**30  # between the two, in GiB
    out = tmp_path / "e"
    argv = ["eval", str(random_export), "--lengths", "64,128,256", "--scalings", "none", "--windows", "2"]
    argv += ["--passkey-trials", "0", "--memory-limit", repr(limit), "--out", str(out), "--no-plots"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "skipping length 256" in err and "per forward pass" in err
    res = json.loads((out / "results.json").read_text())
    assert set(res["perplexity"]["none"]) == {"64", "128"} and "256" in res["skipped"]


@pytest.mark.slow  # a lab run and an eval of every scaling: tens of seconds on 2 cores
def test_an_interrupted_eval_resumes_without_redoing_cells(random_export, tmp_path, monkeypatch):
    argv = ["eval", str(random_export), "--lengths", "64,128", "--scalings", "none,linear:2", "--windows", "2"]
    argv += ["--passkey-trials", "2", "--depths", "0,1", "--passkey-format", "lab", "--no-plots"]
    clean = tmp_path / "clean"
    assert main(argv + ["--out", str(clean)]) == 0
    real, calls = measure.window_nats, []

    def flaky(*a, **k):
        calls.append(a[4])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(measure, "window_nats", flaky)
    run = tmp_path / "resumed"
    assert main(argv + ["--out", str(run)]) == 130
    done = json.loads((run / "progress.json").read_text())["cells"]
    assert sum(k.startswith("ppl|") for k in done) == 2
    calls.clear()
    assert main(argv + ["--out", str(run)]) == 0
    assert len(calls) == 2  # only the two perplexity cells not finished before
    a, b = (json.loads((p / "results.json").read_text()) for p in (clean, run))
    assert a["perplexity"] == b["perplexity"] and a["passkey"] == b["passkey"]
    assert main(argv[:-1] + ["--seed", "1", "--out", str(run)]) == 2  # other settings: refused


# -- hostile inputs: one line, exit 2 ---------------------------------------------------------------------
def test_mistakes_are_one_line_and_exit_2(random_export, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    m = str(random_export)
    cases = [
        ([str(tmp_path / "missing")], "no such folder"),
        ([str(tmp_path / "file")], "is a file"),
        ([str(tmp_path / "empty")], "no config.json"),
        ([str(bert)], "posenc's patch supports"),
        ([m, "--scalings", "warp:4"], "unknown scaling 'warp'"),
        ([m, "--scalings", "yarn:-2"], "yarn:-2"),
        ([m, "--scalings", "yarn:4:beta_fast=x"], "is not a number"),
        ([m, "--scalings", "model"], "no rope scaling of its own"),
        ([m, "--lengths", "0,64"], "--lengths must be comma-separated positive integers"),
        ([m, "--lengths", "abc"], "--lengths must be"),
        ([m, "--lengths", "48,64"], "must divide the longest"),
        ([m, "--windows", "-1"], "--windows must be a positive int"),
        ([m, "--depths", "0,2"], "--depths must be"),
        ([m, "--dtype", "float8"], "--dtype must be one of"),
        ([m, "--passkey-format", "ruler"], "--passkey-format must be one of"),
        ([m, "--device-map", "balanced"], "--device-map takes only 'auto'"),
        ([m, "--passkey-trials", "-3"], "--passkey-trials must be a positive int"),
        ([m, "--seed", "-1"], "--seed must be an integer >= 0, got '-1'"),
        ([m, "--seed", "x"], "--seed must be an integer >= 0, got 'x'"),
        ([m, "--bootstrap-samples", "1000000000"], "--bootstrap-samples must be at most 100,000"),
        ([m, "--text", str(tmp_path / "nope.txt"), "--passkey-trials", "0"], "--text"),
        ([m, "--scalings", "linear", "--write-config", str(tmp_path / "c")], "needs a fixed factor"),
        ([m, "--scalings", "linear:2,yarn:2", "--write-config", str(tmp_path / "c")], "writes one scaling"),
        ([m, "--device", "cuda:0" if not torch.cuda.is_available() else "nonsense"], "--device"),
    ]
    if importlib.util.find_spec("accelerate") is None:
        text = tmp_path / "t.txt"
        text.write_text("def f(x):\n    return x\n" * 200)
        cases.append(([m, "--device-map", "auto", "--text", str(text)], "needs accelerate"))
    for extra, words in cases:
        capsys.readouterr()
        assert main(["eval", *extra, "--out", str(tmp_path / "o")]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert err.startswith("posenc eval:") and words in err and len(err.splitlines()) == 1, (extra, err)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs as on POSIX")
def test_crafted_config_and_run_files_are_one_line_and_exit_2(random_export, tmp_path, capsys):
    """config.json, progress.json and search.json are read with a size cap and only as regular files:
    a FIFO would block, /dev/zero never ends, deep nesting overflows the parser's stack."""

    def model_with(name, make):
        folder = tmp_path / name
        folder.mkdir()
        for item in random_export.iterdir():
            if item.name != "config.json":
                (folder / item.name).symlink_to(item)
        make(folder / "config.json")
        return folder

    deep = model_with(
        "deep", lambda p: p.write_text('{"model_type": "llama", "a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    )
    fifo = model_with("fifo", os.mkfifo)
    big = model_with("big", lambda p: p.open("wb").truncate(settings.MAX_CONFIG_BYTES + 1))  # sparse: nothing written
    zero = model_with("zero", lambda p: p.symlink_to("/dev/zero"))
    cases = [
        (deep, "nests its JSON too deeply to read"),
        (fifo, "config.json is not a regular file"),
        (big, "is larger than 16,777,216 bytes"),
        (zero, "config.json is not a regular file"),
    ]
    for folder, words in cases:
        assert main(["eval", str(folder), "--out", str(tmp_path / "o")]) == 2, folder
        err = capsys.readouterr().err.strip()
        assert err.startswith("posenc eval:") and words in err and len(err.splitlines()) == 1, (folder, err)

    text = tmp_path / "t.txt"
    text.write_text("def f(x):\n    return x\n" * 200)
    argv = ["eval", str(random_export), "--lengths", "64", "--scalings", "none", "--windows", "2"]
    argv += ["--passkey-trials", "0", "--no-plots", "--text", str(text)]
    for name, make, words in [
        ("deep", lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nests its JSON too deeply to read"),
        ("fifo", os.mkfifo, "progress.json is not a regular file"),
        ("zero", lambda p: p.symlink_to("/dev/zero"), "progress.json is not a regular file"),
    ]:
        out = tmp_path / f"run-{name}"
        out.mkdir()
        make(out / "progress.json")
        assert main(argv + ["--out", str(out)]) == 2, name
        err = capsys.readouterr().err  # after the loading messages, one line
        last = err.strip().splitlines()[-1]
        assert last.startswith("posenc eval:") and words in last and "Traceback" not in err, (name, err)
    for name, make, words in [
        ("deep", lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nests its JSON too deeply to read"),
        ("fifo", os.mkfifo, "search.json is not a regular file"),
    ]:
        out = tmp_path / f"search-{name}"
        out.mkdir()
        make(out / "search.json")
        assert main(argv + ["--lengths", "64,128", "--search", "linear", "--out", str(out)]) == 2, name
        err = capsys.readouterr().err
        last = err.strip().splitlines()[-1]
        assert last.startswith("posenc eval:") and words in last and "Traceback" not in err, (name, err)


def test_wilson_interval():
    assert measure.wilson_interval(0, 10)[0] == 0.0 and measure.wilson_interval(10, 10)[1] == 1.0
    lo, hi = measure.wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    assert math.isclose(lo + hi, 1.0)
    with pytest.raises(ValueError):
        measure.wilson_interval(3, 2)


# -- a Llama checkpoint: each scaling as eval applies it equals transformers running that config ----------
@pytest.mark.parametrize("spec", ["linear", "linear:4", "yarn:4", "llama3:4", "dynamic:2", "ntk:4", "none"])
def test_applied_scaling_equals_transformers_running_the_written_config(tmp_path, spec):
    from posenc.measuring.eval.scalings import applied, written_config
    from posenc.measuring.lab.export import byte_tokenizer
    from posenc.testing import tiny_model

    model = tiny_model("codellama-7b", vocab_size=256, max_position_embeddings=32, rope_theta=10000.0)
    model.save_pretrained(tmp_path)
    byte_tokenizer().save_pretrained(tmp_path)
    source = json.loads((tmp_path / "config.json").read_text())
    parsed = parse_spec(spec)
    ids = torch.randint(0, 256, (1, 128))  # 4x the trained context
    with torch.no_grad(), applied(model, parsed, 128, 32) as scaled:
        ours = scaled(ids).logits
    assert not hasattr(model, "_posenc_patch") or model.__dict__.get("_posenc_patch") is None
    assert json.loads(model.config.to_json_string()) == json.loads(
        transformers.AutoConfig.from_pretrained(tmp_path).to_json_string()
    )  # the config is restored
    if parsed.fit:  # written with the factor the fit chose at this length
        parsed = parse_spec(f"{spec}:4")
    config, _ = written_config(source, parsed, 32)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "config.json").write_text(json.dumps(config))
    oracle_config = transformers.AutoConfig.from_pretrained(tmp_path / "w", local_files_only=True)
    oracle = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, config=oracle_config).eval()
    with torch.no_grad():
        theirs = oracle(ids).logits
    torch.testing.assert_close(ours, theirs, atol=2e-4, rtol=1e-4)
    if spec != "none":
        with torch.no_grad():
            plain = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()(ids).logits
        assert (plain - ours).abs().max() > 1e-3  # the scaling changed the model


def test_a_family_patch_reads_from_its_own_code_is_not_refused_by_the_model_type_check(tmp_path):
    # patch finds cohere's interleaved rotation from cohere's own code, so eval's model-type check must
    # let it through (it once refused every type outside a hand-written list)
    from posenc import testing as tiny
    from posenc.integrations.transformers import patch
    from posenc.measuring.eval.files import EvalError
    from posenc.measuring.eval.settings import check_model_type, read_checkpoint_config

    model = tiny.tiny_model_of_type("cohere")
    model.config.save_pretrained(tmp_path)
    check_model_type(tmp_path, read_checkpoint_config(tmp_path)["model_type"])
    patch(model).undo()  # what the check lets through, patch takes
    with pytest.raises(EvalError, match="'bert' model; posenc's patch supports"):
        check_model_type(tmp_path, "bert")  # no rotary module: still refused
