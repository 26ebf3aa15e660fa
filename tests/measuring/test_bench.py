"""``posenc bench`` runs end to end in a tiny mode and writes well-formed JSON (no timing asserts)."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest
import torch

from posenc import cli
from posenc.measuring import bench
from posenc.measuring.bench import kernel_rows, model_rows, settings

ROOT = Path(__file__).resolve().parents[2]
TINY_ARGS = ["--shapes", "tiny", "--repeats", "2", "--warmup", "0", "--dtypes", "float32", "bfloat16"]


def check_report(report: dict, dtypes) -> None:
    assert set(report) >= {"config", "environment", "cases", "elapsed_s"}
    env = report["environment"]
    assert env["device"] == "cpu" and env["threads"] >= 1
    assert env["dispatched_kernel"] in ("fused C kernel", "reference")
    cases = report["cases"]
    assert {(c["dtype"], c["mode"]) for c in cases} == {(d, m) for d in dtypes for m in bench.MODES}
    for case in cases:
        assert case["shape"] == "tiny" and case["seq"] == 8 and case["bytes_q_k"] > 0
        expected = set(bench.IMPLEMENTATIONS) - {"Liger"}  # Liger's row: CUDA only
        if case["mode"] == "forward+backward":
            expected.discard("posenc in-place")
        assert set(case["results"]) == expected
        for r in case["results"].values():
            assert len(r["samples_ms"]) == 2 and all(t > 0 for t in r["samples_ms"])
            assert r["median_ms"] > 0 and r["x_ceiling"] > 0 and r["speedup_vs_eager"] > 0
            assert r["calls_per_sample"] >= 1
        assert case["results"]["memory pass"]["x_ceiling"] == pytest.approx(1.0)
        assert case["results"]["eager"]["speedup_vs_eager"] == pytest.approx(1.0)
        assert "first_call_s" in case["results"]["compiled eager"]


def test_cli_tiny_run_writes_json(tmp_path, capsys):
    out = tmp_path / "sub" / "bench.json"
    assert cli.main(["bench", *TINY_ARGS, "--json", str(out)]) == 0
    check_report(json.loads(out.read_text()), ["float32", "bfloat16"])
    printed = capsys.readouterr().out
    assert "| case | dtype | pass | implementation |" in printed and "compiled eager" in printed


def test_benchmarks_script_uses_the_same_code(tmp_path, monkeypatch):
    out = tmp_path / "bench.json"
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "bench_rope.py",
            "--shapes",
            "tiny",
            "--repeats",
            "2",
            "--warmup",
            "0",
            "--modes",
            "forward",
            "--dtypes",
            "float32",
            "--no-compile",
            "--json",
            str(out),
        ],
    )
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(ROOT / "benchmarks" / "bench_rope.py"), run_name="__main__")
    assert exit_info.value.code == 0
    report = json.loads(out.read_text())
    assert [c["mode"] for c in report["cases"]] == ["forward"]
    assert "compiled eager" not in report["cases"][0]["results"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--repeats", "0"], "--repeats must be >= 1"),
        (["--warmup", "-1"], "--warmup must be >= 0"),
        (["--device", "tpu"], "--device must be cpu, cuda or auto"),
    ],
)
def test_bad_arguments_are_refused(tmp_path, capsys, argv, message):
    assert cli.main(["bench", "--shapes", "tiny", *argv, "--json", str(tmp_path / "x.json")]) == 2
    assert message in capsys.readouterr().out
    assert not (tmp_path / "x.json").exists()


def test_quick_defaults():
    import argparse

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    config = bench.config_from_args(parser.parse_args(["--quick", "--device", "cpu"]))
    assert config.shapes == bench.QUICK_SHAPES and config.dtypes == ("float32",)
    assert config.repeats == 9 and config.modes == bench.MODES
    full = bench.config_from_args(parser.parse_args(["--device", "cpu"]))
    assert full.shapes == bench.FULL_SHAPES and "bfloat16" in full.dtypes


# -- command-line hygiene: output path and numbers checked before any work --------------------------------
BAD_NUMBERS = [
    ("--repeats", "x", "--repeats must be a whole number, got 'x'"),
    ("--repeats", "1.5", "--repeats must be a whole number, got '1.5'"),
    ("--warmup", "nan", "--warmup must be a whole number, got 'nan'"),
    ("--repeats", "99999999", "--repeats must be >= 1 and <= 1000, got 99999999"),
    ("--repeats", "-3", "--repeats must be >= 1 and <= 1000, got -3"),
    ("--repeats", "0x10", "--repeats must be a whole number, got '0x10'"),
    ("--warmup", "", "--warmup must be a whole number, got ''"),
    ("--warmup", "1001", "--warmup must be >= 0 and <= 1000, got 1001"),
    (
        "--warmup",
        "9" * 5000,
        "--warmup must be a whole number >= 0 and <= 1000, got 5000 characters starting '999999999999'",
    ),
    ("--device", "tpu", "--device must be cpu, cuda or auto, got 'tpu'"),
    ("--device", "cuda:0", "--device must be cpu, cuda or auto, got 'cuda:0'"),
]


@pytest.mark.parametrize(
    "model, flag, value, message",
    [
        *[(False, *case) for case in BAD_NUMBERS],
        *[(True, *case) for case in BAD_NUMBERS],
        (True, "--decode-tokens", "0", "--decode-tokens must be >= 1 and <= 1000, got 0"),
        (True, "--decode-tokens", "-1", "--decode-tokens must be >= 1 and <= 1000, got -1"),
        (True, "--decode-tokens", "2.0", "--decode-tokens must be a whole number, got '2.0'"),
        (True, "--decode-tokens", "1000000", "--decode-tokens must be >= 1 and <= 1000, got 1000000"),
    ],
)
def test_bad_numbers_give_one_line(tmp_path, capsys, monkeypatch, flag, value, message, model):
    monkeypatch.setattr(kernel_rows, "run_benchmark", _must_not_run)
    monkeypatch.setattr(model_rows, "run_model_benchmark", _must_not_run)
    argv = ["bench", *(["--model"] if model else []), flag, value, "--json", str(tmp_path / "x.json")]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out.strip() == f"posenc bench: {message}" and captured.err == ""
    assert not (tmp_path / "x.json").exists()


def _must_not_run(*args, **kwargs):
    raise AssertionError("the benchmark ran although its output path or flags were bad")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("model", [False, True])
def test_cuda_asked_for_without_cuda_is_refused(tmp_path, capsys, monkeypatch, model):
    monkeypatch.setattr(kernel_rows, "run_benchmark", _must_not_run)
    monkeypatch.setattr(model_rows, "run_model_benchmark", _must_not_run)
    mode = ["--model"] if model else []
    assert cli.main(["bench", *mode, "--device", "cuda", "--json", str(tmp_path / "x.json")]) == 2
    out = capsys.readouterr().out
    assert out.strip() == "posenc bench: --device cuda was asked for but torch.cuda.is_available() is False"


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--shapes", "huge"),
        ("--dtypes", "int8"),
        ("--modes", "sideways"),
        ("--qk-layout", "rows"),
        ("--model-size", "0"),
    ],
)
def test_a_name_flag_refuses_what_it_does_not_offer(tmp_path, capsys, monkeypatch, flag, value):
    """Flags that take names are argparse choices: usage error, status 2, the flag, the value and the
    choices named, nothing run."""
    monkeypatch.setattr(kernel_rows, "run_benchmark", _must_not_run)
    monkeypatch.setattr(model_rows, "run_model_benchmark", _must_not_run)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", flag, value, "--json", str(tmp_path / "x.json")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: invalid choice: '{value}' (choose from" in err


def _parsed(*argv: str):
    import argparse

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_command_resolves_one_settings_object(tmp_path):
    """BenchRun holds the kernel or the model settings and the JSON path, with each mode's defaults;
    it is frozen, so what the command resolved is what every step reads."""
    import dataclasses

    kernel = bench.BenchRun.from_args(_parsed("--device", "cpu", "--json", str(tmp_path / "k.json")))
    assert isinstance(kernel.config, bench.BenchConfig) and kernel.out == tmp_path / "k.json"
    assert (kernel.config.repeats, kernel.config.warmup, kernel.config.qk_layout) == (9, 2, "contiguous")
    model = bench.BenchRun.from_args(_parsed("--model", "--device", "cpu", "--model-size", "tiny"))
    assert model.out == Path("bench-model.json")
    assert model.config == bench.ModelBenchConfig(
        size="tiny", dtypes=("float32", "bfloat16"), repeats=3, decode_tokens=8, warmup=1, device="cpu"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.config.repeats = 1000  # type: ignore[misc]
    assert bench.BenchRun.from_args(_parsed("--device", "cpu")).out == Path("bench-rope.json")


@pytest.mark.parametrize(
    "make, field, value, error, message",
    [
        (bench.BenchConfig, "repeats", "9", TypeError, "repeats must be an integer, got '9' (str)"),
        (bench.BenchConfig, "repeats", True, TypeError, "repeats must be an integer, got True (bool)"),
        (bench.BenchConfig, "repeats", 0, ValueError, "repeats must be >= 1, got 0"),
        (bench.BenchConfig, "repeats", 10**9, ValueError, "repeats must be <= 1000, got 1000000000"),
        (bench.BenchConfig, "warmup", -1, ValueError, "warmup must be >= 0, got -1"),
        (bench.BenchConfig, "min_sample_s", 0.0, ValueError, "min_sample_s must be > 0.0, got 0.0"),
        (bench.BenchConfig, "min_sample_s", -1e-3, ValueError, "min_sample_s must be > 0.0"),
        (bench.BenchConfig, "min_sample_s", float("nan"), ValueError, "min_sample_s must be finite, got nan"),
        (bench.BenchConfig, "min_sample_s", 1e9, ValueError, "min_sample_s must be <= 60.0"),
        (bench.BenchConfig, "shapes", (), ValueError, "shapes must be a non-empty list of names"),
        (bench.BenchConfig, "shapes", "decode", ValueError, "shapes must be a non-empty list of names"),
        (bench.BenchConfig, "shapes", ("decode", "huge"), ValueError, "shapes entry must be one of"),
        (bench.BenchConfig, "dtypes", ("int8",), ValueError, "dtypes entry must be one of"),
        (bench.BenchConfig, "modes", ("sideways",), ValueError, "modes entry must be one of"),
        (bench.BenchConfig, "device", "tpu", ValueError, "device must be one of ['cpu', 'cuda'], got 'tpu'"),
        (bench.BenchConfig, "qk_layout", "auto", ValueError, "qk_layout must be one of"),
        (bench.BenchConfig, "compile", "yes", TypeError, "compile must be True or False, got 'yes' (str)"),
        (bench.ModelBenchConfig, "size", "huge", ValueError, "size must be one of ['tiny', 'wide'], got 'huge'"),
        (bench.ModelBenchConfig, "decode_tokens", 0, ValueError, "decode_tokens must be >= 1, got 0"),
        (bench.ModelBenchConfig, "decode_tokens", 10**6, ValueError, "decode_tokens must be <= 1000"),
        (bench.ModelBenchConfig, "repeats", 2.5, TypeError, "repeats must be an integer, got 2.5 (float)"),
        (bench.ModelBenchConfig, "warmup", -1, ValueError, "warmup must be >= 0, got -1"),
        (bench.ModelBenchConfig, "dtypes", [], ValueError, "dtypes must be a non-empty list of names"),
        (bench.ModelBenchConfig, "device", "cuda:0", ValueError, "device must be one of ['cpu', 'cuda'], got 'cuda:0'"),
    ],
)
def test_settings_built_in_code_refuse_bad_fields(make, field, value, error, message):
    with pytest.raises(error) as info:
        make(**{field: value})
    assert message in str(info.value)


def test_settings_keep_good_fields_as_given():
    config = bench.BenchConfig(shapes=["tiny"], dtypes=["float16"], modes=["forward"], repeats=1000, warmup=0)
    assert (config.shapes, config.dtypes, config.modes) == (("tiny",), ("float16",), ("forward",))
    assert hash(config) == hash(
        bench.BenchConfig(shapes=("tiny",), dtypes=("float16",), modes=("forward",), repeats=1000, warmup=0)
    )


@pytest.mark.parametrize("model", [False, True])
def test_unwritable_json_fails_before_the_benchmark(tmp_path, capsys, monkeypatch, model):
    monkeypatch.setattr(kernel_rows, "run_benchmark", _must_not_run)
    monkeypatch.setattr(model_rows, "run_model_benchmark", _must_not_run)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    mode = ["--model"] if model else []
    assert cli.main(["bench", *mode, "--json", str(blocker / "out.json")]) == 2
    assert "cannot be written" in capsys.readouterr().out
    assert cli.main(["bench", *mode, "--json", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().out
    assert cli.main(["bench", *mode, "--json", ""]) == 2  # the empty name is this folder
    assert "is a folder" in capsys.readouterr().out
    too_long = tmp_path / ("x" * 300 + ".json")
    assert cli.main(["bench", *mode, "--json", str(too_long)]) == 2
    assert capsys.readouterr().out.strip() == f"posenc bench: --json {too_long} cannot be written: File name too long"


def test_writable_check_leaves_no_file(tmp_path):
    target = tmp_path / "new" / "out.json"
    bench.check_writable(target)
    assert not target.exists()
    existing = tmp_path / "kept.json"
    existing.write_text("{}")
    bench.check_writable(existing)
    assert existing.read_text() == "{}"


@pytest.mark.slow
def test_model_table_tiny(tmp_path, capsys):
    pytest.importorskip("transformers")
    out = tmp_path / "model.json"
    assert (
        cli.main(
            [
                "bench",
                "--model",
                "--model-size",
                "tiny",
                "--dtypes",
                "float32",
                "--repeats",
                "1",
                "--decode-tokens",
                "2",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    rows = {(r["dtype"], r["variant"]): r for r in report["rows"]}
    assert set(rows) == {("float32", "unpatched"), ("float32", "posenc")}
    for r in rows.values():
        assert r["pe_ms"] > 0 and r["forward_ms"] > 0 and r["decode_ms_per_token"] > 0
        assert r["pe_ms"] < r["profiled_forward_ms"]  # a part of the forward
    ours = rows[("float32", "posenc")]
    assert ours["speedup_forward_ms"] == pytest.approx(
        rows[("float32", "unpatched")]["forward_ms"] / ours["forward_ms"]
    )
    assert "| float32 | posenc |" in capsys.readouterr().out


def test_the_profiler_labels_the_rotation_the_attention_calls_patched_or_not():
    """``posenc bench --model`` wraps whatever rotation function an attention layer calls (the
    module's, or the patch's override), found by the integration's ``global_seen_by``."""
    pytest.importorskip("transformers")
    import sys

    from posenc.integrations.transformers import global_seen_by, patch, unpatch
    from posenc.measuring.bench.model_rows import _instrument
    from posenc.testing import tiny_model

    model = tiny_model("llama-3.2-1b")
    attention = next(m for m in model.modules() if type(m).__name__.endswith("Attention"))
    module_fn = sys.modules[type(attention).__module__].apply_rotary_pos_emb
    assert global_seen_by(type(attention).forward, "apply_rotary_pos_emb") is module_fn
    patch(model)
    try:
        patched = attention.__dict__["forward"].func  # the patch installs functools.partial(function, layer)
        ours = global_seen_by(patched, "apply_rotary_pos_emb")
        assert ours is not module_fn and ours.__module__ == "posenc.integrations.transformers"
        restore = _instrument(model)
        labelled = global_seen_by(attention.forward.__func__, "apply_rotary_pos_emb")
        assert labelled.__wrapped__ is ours  # the patch's function, wrapped for the profiler
        restore()
        assert attention.__dict__["forward"].func is patched
    finally:
        unpatch(model)


def test_gpu_check_dry_run_on_cpu(tmp_path):
    """benchmarks/gpu_check.py, the one script a GPU run uses, runs its sections on CPU (the Triton
    kernel in its interpreter, tiny sizes): every check passes, the JSON and the markdown table are
    written, and a section that fails (opcheck, with torch.library.opcheck hidden) is
    recorded without stopping the next one."""
    pytest.importorskip("triton", reason="triton is a test dependency: pip install triton")
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TRITON_INTERPRET": "1"}
    sections = ["environment", "parity", "refusals", "compile", "cudagraph", "table"]
    proc = subprocess.run(
        [sys.executable, "-u", str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--dry-run"]
        + ["--out", str(tmp_path), "--sections", *sections],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert set(report["results"]) == set(sections)
    assert report["checks"] and all(c["ok"] for c in report["checks"]), report["checks"]
    assert {c["section"] for c in report["checks"]} >= {"parity", "refusals", "compile"}
    assert report["results"]["cudagraph"] == {"skipped": "needs CUDA"}
    cases = report["results"]["table"]["cases"]
    for entry in cases.values():
        assert set(entry["median_us"]) >= {"posenc", "transformers eager", "pass"}
        assert all(v > 0 for v in entry["median_us"].values())
    md = (tmp_path / "gpu_check.md").read_text()
    assert "| case | posenc | transformers eager |" in md and "Host time per call" in md

    # a failing section is reported and the next one still runs
    broken = tmp_path / "broken"
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import torch.library\ntorch.library.opcheck = None\n")
    env["PYTHONPATH"] = os.pathsep.join([str(hide), env["PYTHONPATH"]])
    proc = subprocess.run(
        [sys.executable, "-u", str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--dry-run"]
        + ["--out", str(broken), "--sections", "opcheck", "compile"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    report = json.loads((broken / "gpu_check.json").read_text())
    assert proc.returncode == 1 and "Traceback" in proc.stdout + proc.stderr
    assert [c["ok"] for c in report["checks"] if c["section"] == "opcheck"] == [False]
    assert all(v.startswith("TypeError") for v in report["results"]["opcheck"].values())
    assert report["results"]["compile"]["op_in_graph"] is True
    assert [c["ok"] for c in report["checks"] if c["section"] == "compile"] == [True, True]


def test_decode_rows_report_host_time_in_transformers_layout():
    """--qk-layout transformers gives q/k as transposes of (B, S, H, D) buffers; decode rows carry
    their host time per call; the rotation is still right in that layout."""
    config = bench.BenchConfig(
        shapes=("decode",),
        dtypes=("float32",),
        modes=("forward",),
        repeats=1,
        warmup=0,
        compile=False,
        qk_layout="transformers",
        min_sample_s=1e-4,
    )
    report = bench.run_benchmark(config)
    [case] = report["cases"]
    assert case["qk_layout"] == "transformers"
    assert all(r["host_ms"] > 0 for r in case["results"].values())
    assert "Liger" not in case["results"]  # a CUDA-only row
    q, k, cos, sin, cos_full, sin_full, info = kernel_rows._make_case("decode", torch.float32, "cpu", "transformers")
    assert q.transpose(1, 2).is_contiguous() and q.stride(2) == 32 * 128  # a token row holds every head
    from posenc.rope.apply import apply_reference, apply_rotary

    got = apply_rotary(q, k, cos, sin)
    want = bench.eager_rotary(q, k, cos_full, sin_full)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], apply_reference(q, k, cos, sin, "half", 128, False)[1], rtol=0, atol=0)
    assert "| host per call |" in bench.format_table(report)
    with pytest.raises(ValueError, match="qk-layout"):
        settings.resolve_layout("rows", "cpu")


def test_gpu_check_parity_bound_accepts_float32_exact_and_refuses_a_wrong_angle():
    """The GPU check's parity bound: the rotation computed exactly as the kernel does (float32
    arithmetic and tables, one rounding to bfloat16) is within it on every element, including the
    near-cancellations that a bare one-last-place bound refuses; a rotation one position off is not."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check_module", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    from posenc.rope.apply import rotate_reference

    gen = torch.Generator().manual_seed(0)
    worst_bare, worst_bound = 0.0, 0.0
    for _ in range(40):
        x = gpu_check.memory_layout("permuted", (2, 4, 33, 64), torch.bfloat16, "cpu", gen)
        cos64, sin64 = gpu_check.exact_tables((torch.arange(33) + 97)[None], 64)
        want = gpu_check.exact_rotation(x, cos64, sin64, "half", 64)
        got = rotate_reference(x, cos64.float().unsqueeze(1), sin64.float().unsqueeze(1), layout="half")
        worst_bare = max(worst_bare, gpu_check.ulp_error(got, want))
        worst_bound = max(worst_bound, gpu_check.ulp_error(got, want, x))
    assert worst_bare > 1.0  # the bare bound would call the exact float32 rotation wrong
    assert worst_bound <= 1.0
    cos_off, sin_off = gpu_check.exact_tables((torch.arange(33) + 98)[None], 64)
    wrong = rotate_reference(x, cos_off.float().unsqueeze(1), sin_off.float().unsqueeze(1), layout="half")
    assert gpu_check.ulp_error(wrong, want, x) > 1.0


def test_the_model_rows_model_carries_llama_3_1_8b_rope_fields():
    """The benchmark's Llama takes its rope fields from the committed Llama-3.1-8B config: its rotary
    frequencies are posenc's llama3 scaling of Meta's published numbers (factor 8, bands 1 and 4, 8192
    trained, rope_theta 5e5), with no attention scaling, and its context is 128k."""
    pytest.importorskip("transformers")
    from posenc.rope.scaling import Llama3Scaling, rope_frequencies

    model = model_rows._model("tiny", torch.float32)
    assert model.config.max_position_embeddings == 131072
    llama3 = Llama3Scaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192)
    want, attention_factor = rope_frequencies(llama3, 16, 500000.0)
    torch.testing.assert_close(model.model.rotary_emb.inv_freq.double(), want.double(), rtol=1e-6, atol=0)
    assert attention_factor == 1.0 and model.model.rotary_emb.attention_scaling == 1.0
