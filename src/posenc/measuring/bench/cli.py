"""The ``posenc bench`` command: its settings resolved once (:class:`~.settings.BenchRun`), then the
kernel rows or the model rows run, their markdown table printed and their JSON written."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from ...runs import atomic_write_text
from . import kernel_rows, model_rows
from .settings import BenchConfig, BenchRun, ModelBenchConfig


def run(args: argparse.Namespace) -> int:
    """Run ``posenc bench`` as ``args`` asks; a mistake in them is one line and status 2, before any work."""
    try:
        settings = BenchRun.from_args(args)
    except (ValueError, TypeError) as exc:
        print(f"posenc bench: {exc}")
        return 2
    if isinstance(settings.config, ModelBenchConfig):
        return _model_run(settings.config, settings.out)
    return _kernel_run(settings.config, settings.out)


def _progress(what: str) -> None:
    print(f"  timing {what} ...", flush=True)


def _kernel_run(config: BenchConfig, path: Path) -> int:
    env_line = f"torch {torch.__version__}, {config.device}, {torch.get_num_threads()} threads"
    print(
        f"posenc bench: {' '.join(config.shapes)} × {' '.join(config.dtypes)} × {' / '.join(config.modes)}; "
        f"{config.repeats} repeats after {config.warmup} warm-up calls; {env_line}",
        flush=True,
    )
    report = kernel_rows.run_benchmark(config, progress=_progress)
    env = report["environment"]
    load = env.get("load_average_at_start")
    note = (
        f"ceiling = same-bytes in-place pass (q.mul_(1.0); k.mul_(1.0)); dispatched kernel: "
        f"{env['dispatched_kernel']}" + (f"; load average at start {load[0]:.2f}" if load else "")
    )
    return _finish(report, format_table(report), note, path)


def _model_run(config: ModelBenchConfig, path: Path) -> int:
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("posenc bench --model: needs transformers (pip install transformers)")
        return 2
    print(
        f"posenc bench --model ({config.size}): {' '.join(config.dtypes)}; {config.repeats} forwards, "
        f"{config.decode_tokens} decode steps; torch {torch.__version__}, {torch.get_num_threads()} threads",
        flush=True,
    )
    report = model_rows.run_model_benchmark(config, progress=_progress)
    return _finish(report, format_model_table(report), "(×: unpatched time / posenc time, measured in this run)", path)


def _finish(report: dict, table: str, note: str, path: Path) -> int:
    """Print the table and the note under it, write the JSON, say where."""
    print()
    print(table)
    print()
    print(note)
    atomic_write_text(path, json.dumps(report, indent=2))
    print(f"wrote {path} ({report['elapsed_s']:.0f} s)")
    return 0


def format_ms(ms: float) -> str:
    """Milliseconds as the tables show them: microseconds below one."""
    return f"{ms * 1e3:.1f} µs" if ms < 1 else f"{ms:.2f} ms"


def format_table(report: dict) -> str:
    """A markdown table: one row per case and implementation."""
    lines = [
        "| case | dtype | pass | implementation | median | × ceiling | vs eager | host per call |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for case in report["cases"]:
        label = (
            f"{case['shape']} ({case['batch']}×{case['seq']}, "
            f"{case['q_heads']}q/{case['kv_heads']}kv×{case['head_dim']})"
        )
        for name, r in case["results"].items():
            lines.append(
                f"| {label} | {case['dtype']} | {case['mode']} | {name} | {format_ms(r['median_ms'])} | "
                f"{r['x_ceiling']:.2f} | {r['speedup_vs_eager']:.1f}× | "
                + (format_ms(r["host_ms"]) if "host_ms" in r else "–")
                + " |"
            )
    return "\n".join(lines)


def format_model_table(report: dict) -> str:
    """A markdown table: one row per dtype and variant, speed-ups of posenc over unpatched."""
    m = report["model"]
    lines = [
        f"Llama, hidden {m['hidden_size']}, {m['num_attention_heads']} heads / {m['num_key_value_heads']} kv "
        f"× {m['head_dim']}, {m['num_hidden_layers']} layers, {m['seq']} tokens; {m['rope']}",
        "",
        "| dtype | model | position encoding (profiler) | whole forward | decode / token | decode position encoding |",
        "|---|---|---:|---:|---:|---:|",
    ]

    def cell(row, key):
        speedup = row.get(f"speedup_{key}")
        return format_ms(row[key]) + (f" ({speedup:.1f}×)" if speedup is not None else "")

    for r in report["rows"]:
        lines.append(
            f"| {r['dtype']} | {r['variant']} | {cell(r, 'pe_ms')} | {cell(r, 'forward_ms')} | "
            f"{cell(r, 'decode_ms_per_token')} | {cell(r, 'decode_pe_ms')} |"
        )
    return "\n".join(lines)
