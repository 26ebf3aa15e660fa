"""The report: ``results.json`` (typed in :mod:`posenc.measuring.lab.schema`, which the explorer also reads),
``results.md`` and the plots, with the verdicts of :mod:`posenc.measuring.lab.verdicts`.

``results.json`` (beside the schema stamp)::

    {"config": {...}, "corpus": {...}, "complete": bool, "machinery_check": bool,
     "distributed": {"world_size": int, "backend": "gloo" | "nccl" | null},
     "train_len": int, "eval_lengths": [int, ...],
     "schemes": {name: {"train": {"steps", "final_bpb", "parameters", "train_seconds", "lr"},
                        "eval": {"<length>": {"bpb": float, "bpb_ci": [lo, hi], ...,
                                              "retrieval": {"near" | "mid" | "far": {
                                                  "accuracy", "accuracy_ci", "logp_bits",
                                                  "logp_bits_ci", "trials", "distance"}}}},
                        "loss_by_position": {"<length>": [bits per byte at each position, ...]}}},
     "extension": {method: {"<length>": {"bpb": float, ..., "retrieval": {...}, "finetuned": {...}}}},
     "lr_sweep": {scheme: {"rates": {"<rate>": bpb | null}, "chosen": float}},
     "verdicts": [{"claim", "verdict", "evidence", "group", "scheme", "expected", "a", "b"}, ...]}

All losses are bits per byte; intervals are 95% bootstrap intervals over validation windows
(bits per byte, log2 p(key)) or exact Clopper–Pearson intervals (exact-match accuracy). Per-window
and per-trial values (``*_windows``, ``correct``, ``logp``) are kept so that comparisons are paired.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from .passkey import BIN_NAMES, CHANCE_LOGP_BITS
from .schema import MACHINERY_CHECK, stamp
from .store import save_figure, write_json
from .verdicts import ALPHA, LABELS, machinery_check_reason, quote, verdicts


def build_results(
    cfg: dict, corpus: dict, train_info: dict, progress: dict, complete: bool, distributed: Optional[dict] = None
) -> dict:
    """Assemble the content of ``results.json`` from the finished-work record (``Progress.to_dict()``);
    ``distributed`` is what the run's processes were (``{"world_size", "backend"}``)."""
    train_len = cfg["train_len"]
    lengths = [m * train_len for m in cfg["eval_multipliers"]]
    schemes = {}
    for name in cfg["schemes"]:
        done = progress["eval"].get(name, {})
        evals, curves = {}, {}
        for key, res in done.items():
            evals[key] = {k: v for k, v in res.items() if k != "loss_by_position"}
            if "loss_by_position" in res:
                curves[key] = res["loss_by_position"]
        schemes[name] = {"train": train_info.get(name, {}), "eval": evals, "loss_by_position": curves}
    extension: Dict[str, Dict[str, dict]] = {}
    for method, per_len in progress["extension"].items():
        extension[method] = {}
        for key, res in per_len.items():
            entry = {k: v for k, v in res.items() if k not in ("loss_by_position", "finetuned")}
            if "finetuned" in res:
                entry["finetuned"] = {k: v for k, v in res["finetuned"].items() if k != "loss_by_position"}
            extension[method][key] = entry
    sweep = {}
    for name, scores in progress.get("lr_sweep", {}).items():
        finite = {r: v for r, v in scores.items() if v is not None}
        sweep[name] = {"rates": dict(scores), "chosen": float(min(finite, key=finite.__getitem__)) if finite else None}
    reason = machinery_check_reason(cfg)
    results = {
        "config": cfg,
        "corpus": corpus,
        "complete": complete,
        "machinery_check": reason is not None,
        "machinery_check_reason": reason,
        "train_len": train_len,
        "eval_lengths": lengths,
        "schemes": schemes,
        "extension": extension,
        "lr_sweep": sweep,
        "cpu_seconds": progress.get("cpu_seconds"),
        "distributed": distributed if distributed is not None else {"world_size": 1, "backend": None},
    }
    results["verdicts"] = verdicts(results)
    return results


# -- Markdown ----------------------------------------------------------------------------------
def _cell(entry: Optional[dict], key: str, ci: bool = True) -> str:
    if entry is None:
        return "—"
    if entry.get("cannot"):
        return "cannot"
    value = entry.get(key)
    if value is None:
        return "—"
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "not measured"
    text = f"{value:.3f}"
    pair = entry.get(key + "_ci")
    if ci and isinstance(pair, (list, tuple)) and len(pair) == 2:
        if all(isinstance(v, (int, float)) and math.isfinite(v) for v in pair):
            text += f" [{pair[0]:.3f}, {pair[1]:.3f}]"
    if entry.get("note") and "interpolated" in entry["note"]:
        text += " †"
    return text


def markdown(results: dict, command: str = "") -> str:
    """The report of one run (``results.md``) from its ``results.json`` content."""
    lines = ["# posenc lab results", ""]
    lines += _header_lines(results, command)
    lines += _quality_lines(results)
    lines += _sweep_lines(results)
    lines += _bpb_tables(results)
    lines += _extension_lines(results)
    lines += _retrieval_tables(results)
    lines += _verdict_lines(results)
    lines += _time_lines(results)
    return "\n".join(lines) + "\n"


def _header_lines(results: dict, command: str) -> List[str]:
    """The stamp of a machinery check, the command, the setup in words, an unfinished run's note."""
    cfg, lengths, train_len = results["config"], results["eval_lengths"], results["train_len"]
    lines = []
    if results.get("machinery_check"):
        why = results.get("machinery_check_reason") or "a run too small to mean anything"
        lines += [f"**{MACHINERY_CHECK}.** This run is too small ({why}); it only checks that every step runs.", ""]
    if command:
        lines += ["Command: `" + command + "`", ""]
    corpus = results.get("corpus", {})
    lines += [
        f"Preset `{cfg['preset']}`, seed {cfg['seed']}: {cfg['n_layers']} layers, d_model "
        f"{cfg['d_model']}, {cfg['n_heads']} heads, training length {train_len} bytes, "
        f"{cfg['steps']} steps of {cfg['batch_size']} sequences, AdamW lr {cfg['lr']:g} "
        f"(warmup {cfg['warmup_steps']}, cosine to {cfg['min_lr_ratio']:g}x). Corpus: "
        f"{corpus.get('train_files', '?')} training / {corpus.get('val_files', '?')} "
        f"validation files ({corpus.get('train_bytes', 0) / 1e6:.1f} MB / "
        f"{corpus.get('val_bytes', 0) / 1e6:.1f} MB); {cfg['eval_windows']} fixed validation "
        f"windows of {lengths[-1]} bytes, read in pieces of the evaluation length, so every "
        f"length scores the same bytes. Bits per byte (lower is better), 95% bootstrap "
        f"intervals over windows.",
        "",
    ]
    if cfg.get("retrieval_share", 0) or cfg.get("retrieval_trials", 0):
        lines += [
            f"Passkey retrieval: {cfg.get('retrieval_share', 0):.0%} of training steps read "
            f"passkey sequences at the training length (answer term weighted "
            f"{cfg.get('retrieval_answer_weight', 1.0):g}); evaluation asks "
            f"{cfg.get('retrieval_trials', 0)} keys per length and distance bin (filler from "
            f"the validation text). Accuracy is greedy exact match of the 5-digit key with an "
            f"exact (Clopper–Pearson) 95% interval; log2 p(key) is in bits (knowing only "
            f'"five digits" scores {CHANCE_LOGP_BITS:.1f}).',
            "",
        ]
    if not results.get("complete"):
        lines += ["**Incomplete run**: resume it with `posenc lab --resume RUN_DIR`.", ""]
    return lines


def _quality_lines(results: dict) -> List[str]:
    """Each scheme's learning rate, final training loss and validation at the training length."""
    cfg, lengths = results["config"], results["eval_lengths"]
    lines = [
        "## In-distribution quality",
        "",
        f"| scheme | peak lr | train loss, last 10% of steps | validation at {lengths[0]} "
        f"({lengths[0] // results['train_len']}x) |",
        "|---|---|---|---|",
    ]
    for name, s in results["schemes"].items():
        tr = s.get("train", {}).get("final_bpb")
        lr = s.get("train", {}).get("lr", cfg.get("lr"))
        lines.append(
            f"| {name} | {lr:g} | {'—' if tr is None else f'{tr:.3f}'} | "
            f"{_cell(s['eval'].get(str(lengths[0])), 'bpb')} |"
        )
    return lines


def _sweep_lines(results: dict) -> List[str]:
    """The learning-rate sweep's score per scheme and rate, and the rate chosen."""
    cfg, sweep = results["config"], results.get("lr_sweep") or {}
    if not sweep:
        return []
    rates = sorted({float(r) for v in sweep.values() for r in v["rates"]})
    lines = [
        "",
        f"Learning rate chosen per scheme: {cfg.get('sweep_steps') or max(1, cfg['steps'] // 5)} "
        f"steps at each rate, scored by bits per byte on fixed windows of the "
        f"*training* text at {results['eval_lengths'][0]} (lower is better; the validation text is not "
        f"used for the choice).",
        "",
        "| scheme | " + " | ".join(f"lr {r:g}" for r in rates) + " | chosen |",
        "|---" * (len(rates) + 2) + "|",
    ]
    for name, v in sweep.items():
        cells = []
        for r in rates:
            score = v["rates"].get(repr(r))
            cells.append(
                "diverged" if score is None and repr(r) in v["rates"] else "—" if score is None else f"{score:.3f}"
            )
        chosen = v.get("chosen")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'—' if chosen is None else f'{chosen:g}'} |")
    return lines


def _bpb_tables(results: dict) -> List[str]:
    """Bits per byte per scheme and length: over all positions, the last quarter, the final bytes."""
    cfg, lengths, train_len = results["config"], results["eval_lengths"], results["train_len"]
    head = [f"{n} ({n // train_len}x)" for n in lengths]
    lines: List[str] = []
    for key, title in (
        ("bpb", "All positions"),
        ("bpb_last_quarter", "Last quarter of each window"),
        ("bpb_final32", f"The same final {cfg['final_bytes']} bytes at every length"),
    ):
        lines += ["", f"## {title}", "", "| scheme | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
        for name, s in results["schemes"].items():
            cells = [_cell(s["eval"].get(str(n)), key) for n in lengths]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if any("interpolated" in (e.get("note") or "") for s in results["schemes"].values() for e in s["eval"].values()):
        lines += [
            "",
            "† learned table stretched by linear interpolation (`LearnedPositionalEmbedding.extend`), no retraining.",
        ]
    return lines


def _extension_lines(results: dict) -> List[str]:
    """RoPE context extension per method and longer length, before and after the fine-tune, and
    the control (plain RoPE fine-tuned at the training length)."""
    if not results["extension"]:
        return []
    cfg, lengths = results["config"], results["eval_lengths"]
    longer = lengths[1:]
    lines = [
        "",
        "## RoPE context extension (all positions)",
        "",
        "Without retraining, and after a short fine-tune at the new length "
        f"({cfg['finetune_steps']} steps of {cfg['finetune_batch']}, lr {cfg['finetune_lr']:g}; "
        + (
            f"{cfg['finetune_retrieval_share']:.0%} of them on passkey sequences at the new length"
            if cfg.get("finetune_retrieval_share")
            else "plain text"
        )
        + ") where run.",
        "",
        "| method | "
        + " | ".join(f"{n}" for n in longer)
        + " | "
        + " | ".join(f"{n} fine-tuned" for n in longer)
        + " |",
        "|---" * (2 * len(longer) + 1) + "|",
    ]
    for method, per_len in results["extension"].items():
        cells = [_cell(per_len.get(str(n)), "bpb", ci=False) for n in longer]
        ft = [_cell(per_len.get(str(n), {}).get("finetuned"), "bpb", ci=False) for n in longer]
        lines.append(f"| {method} | " + " | ".join(cells + ft) + " |")
    control = results["extension"].get("none", {}).get(str(lengths[0]), {}).get("finetuned")
    if control and "bpb" in control:
        before = results["extension"]["none"][str(lengths[0])]["bpb"]
        lines += [
            "",
            f"Control: plain RoPE fine-tuned the same way at the training length "
            f"scores {control['bpb']:.3f} at {lengths[0]} (before: {before:.3f}), so "
            f"extra training alone changes bits per byte by "
            f"{control['bpb'] - before:+.3f}.",
        ]
    return lines


def _seconds_sum(entries) -> Optional[float]:
    """The sum of the finite ``cpu_seconds`` of ``entries`` (dicts), None when none has one."""
    values = [e.get("cpu_seconds") for e in entries if isinstance(e, dict)]
    finite = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(finite) if finite else None


def cpu_by_scheme(results: dict) -> Dict[str, Dict[str, Optional[float]]]:
    """``{scheme: {"train": s, "eval": s}}`` CPU seconds (None where the run did not record them),
    plus ``"rope extension"`` (``eval`` only: extending, fine-tuning and evaluating every method)."""
    out: Dict[str, Dict[str, Optional[float]]] = {}
    for name, s in results["schemes"].items():
        train = (s.get("train") or {}).get("train_cpu_seconds")
        out[name] = {
            "train": float(train) if isinstance(train, (int, float)) and math.isfinite(train) else None,
            "eval": _seconds_sum((s.get("eval") or {}).values()),
        }
    ext = [e for per in results["extension"].values() for e in per.values()]
    ext += [e.get("finetuned") for e in ext if isinstance(e, dict)]
    if ext:
        out["rope extension"] = {"train": None, "eval": _seconds_sum(ext)}
    return out


def _time_lines(results: dict) -> List[str]:
    """CPU time the run recorded: per scheme (training, evaluation) and for the whole run."""
    total = results.get("cpu_seconds")
    if not isinstance(total, (int, float)) or not math.isfinite(total) or total <= 0:
        return []

    def fmt(v: Optional[float]) -> str:
        return "—" if v is None else f"{v:,.1f}"

    lines = [
        "",
        "## CPU time",
        "",
        "| scheme | training | evaluation, all lengths | training wall time |",
        "|---|---|---|---|",
    ]
    for name, per in cpu_by_scheme(results).items():
        wall = ((results["schemes"].get(name) or {}).get("train") or {}).get("train_seconds")
        lines.append(
            f"| {name} | {fmt(per['train'])} | {fmt(per['eval'])} | "
            f"{fmt(wall if isinstance(wall, (int, float)) else None)} |"
        )
    lines += [
        "",
        f"Seconds of CPU (user + system, every thread of the process, `time.process_time`), summed over "
        f"every session that resumed the run; the whole run so far: {total:,.1f} s (from reading the "
        f"corpus to writing the results, learning-rate sweep included; not the start of Python and "
        f"torch, nor drawing the plots). Under torchrun these are the main process's; each rank spends "
        f"about as much.",
    ]
    return lines


def _acc(cell: Optional[dict]) -> str:
    if not cell:
        return "—"
    acc, ci, logp = cell.get("accuracy"), cell.get("accuracy_ci"), cell.get("logp_bits")
    if not isinstance(acc, (int, float)) or not math.isfinite(acc):
        return "not measured"
    text = f"{acc:.0%}"
    if (
        isinstance(ci, (list, tuple))
        and len(ci) == 2
        and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ci)
    ):
        text += f" [{ci[0]:.0%}, {ci[1]:.0%}]"
    if isinstance(logp, (int, float)) and math.isfinite(logp):
        text += f" · {logp:.1f}"
    return text


def _retrieval_tables(results: dict) -> List[str]:
    lengths, train_len = results["eval_lengths"], results["train_len"]
    have = any((e.get("retrieval") or {}) for s in results["schemes"].values() for e in s["eval"].values())
    if not have:
        return []
    head = " | ".join(f"{n} ({n // train_len}x)" for n in lengths)
    lines = [
        "",
        "## Passkey retrieval",
        "",
        "Exact-match accuracy [95% interval] · mean log2 p(key) in bits, by key distance: near "
        f"(under {train_len // 2} bytes), mid (up to the training length {train_len}), far (the "
        "training length or more, only past it). Heatmaps: `retrieval.png`.",
        "",
        "![retrieval accuracy by distance and length](retrieval.png)",
        "",
        f"| scheme | distance | {head} |",
        "|---" * (len(lengths) + 2) + "|",
    ]
    for name, s in results["schemes"].items():
        for b in BIN_NAMES:
            cells = []
            for n in lengths:
                e = s["eval"].get(str(n)) or {}
                cells.append("cannot" if e.get("cannot") else _acc((e.get("retrieval") or {}).get(b)))
            if any(c != "—" for c in cells):
                lines.append(f"| {name} | {b} | " + " | ".join(cells) + " |")
    at_train = [
        c["accuracy"]
        for s in results["schemes"].values()
        for c in ((s["eval"].get(str(lengths[0])) or {}).get("retrieval") or {}).values()
    ]
    if at_train and max(at_train) == 0.0 and not results.get("machinery_check"):
        # What this run measured, and nothing about other runs: a claim about a preset needs the
        # seeds of a committed summary (docs/lab.md), not one report's footnote.
        lines += [
            "",
            f"**No model retrieved a single key at the training length ({lengths[0]} bytes).** This "
            "run's comparisons of exact matches past the training length therefore cannot show a "
            "difference; log2 p(key) can.",
        ]
    if results["extension"]:
        longer = lengths[1:]
        lines += [
            "",
            "RoPE context extension, retrieval (fine-tuned rows where run):",
            "",
            "| method | distance | " + " | ".join(str(n) for n in longer) + " |",
            "|---" * (len(longer) + 2) + "|",
        ]
        for method, per_len in results["extension"].items():
            for ft in (False, True):
                for b in BIN_NAMES:
                    cells = []
                    for n in longer:
                        e = per_len.get(str(n)) or {}
                        e = e.get("finetuned") or {} if ft else e
                        cells.append(_acc((e.get("retrieval") or {}).get(b)))
                    if any(c != "—" for c in cells):
                        lines.append(f"| {method}{' fine-tuned' if ft else ''} | {b} | " + " | ".join(cells) + " |")
    return lines


def _verdict_lines(results: dict) -> List[str]:
    if results.get("machinery_check"):
        return ["", "## Verdicts", "", f"None: {MACHINERY_CHECK}."]
    vs = results.get("verdicts", [])
    tests = sum(v["verdict"] != "not measured" for v in vs)
    lines = [
        "",
        "## Perplexity and retrieval side by side",
        "",
        rule_text(tests),
        "",
    ]
    by_scheme: Dict[str, Dict[str, dict]] = {}
    for v in vs:
        if v["group"] in ("perplexity", "retrieval", "retrieval-logp"):
            by_scheme.setdefault(v["scheme"], {})[v["group"]] = v
    top = results["eval_lengths"][-1]
    for name, pair in by_scheme.items():
        label = LABELS.get(name, name)
        ppl, ret = pair.get("perplexity"), pair.get("retrieval")
        parts = []
        if ppl and ppl["verdict"] != "not measured":
            shape = {"seen": "loses quality", "within noise": "flat within noise", "not seen": "improves"}[
                ppl["verdict"]
            ]
            parts.append(
                f"perplexity {shape} ({ppl['a']['label']} {quote(ppl['a'])} vs {ppl['b']['label']} {quote(ppl['b'])})"
            )
        if ret and ret["verdict"] != "not measured":
            parts.append(
                f"at {top} bytes, far keys {quote(ret['a'], True)} vs near keys {quote(ret['b'], True)}: "
                f"{ret['verdict']}"
            )
        grip = pair.get("retrieval-logp")
        if grip and grip["verdict"] != "not measured":
            parts.append(
                f"log2 p(key) at {top} bytes, far keys {quote(grip['a'], bits=True)} vs near keys "
                f"{quote(grip['b'], bits=True)}: {grip['verdict']}"
            )
        if parts:
            lines.append(f"- **{label}**: " + "; ".join(parts) + ".")
    lines += ["", "## Did the published pattern appear?", ""]
    for v in vs:
        expected = f" (literature: {v['expected']})" if v.get("expected") else ""
        lines.append(f"- {v['claim']}: **{v['verdict']}**{expected}. {v['evidence']}")
    return lines


def rule_text(tests: int) -> str:
    """What the verdicts of a run that made ``tests`` comparisons mean."""
    return (
        f"This run makes {tests} comparisons. Each is tested the way it was measured (paired over "
        f"the same windows or trials where both sides share them; exact tests for exact matches), "
        f"and a claim is **seen** (or **not seen**, the other way) only when its test passes Holm's "
        f"rule at a family-wise {ALPHA:.0%}: the chance that any seen or not seen below is a false "
        f"alarm of window or trial sampling is at most {ALPHA:.0%} (testing each at 5% alone would "
        f"expect {0.05 * tests:.1f} false alarms when nothing differs). Each 95% interval printed beside "
        f"a number is 95% on its own: of the {2 * tests} printed for these comparisons, about "
        f"{0.05 * 2 * tests:.1f} would miss their true value by chance, which is why the verdicts come "
        f"from the corrected tests and not from whether two intervals overlap. **Within noise** means this "
        f"run cannot tell, never equal. One training seed: the spread between training runs is not "
        f"covered (`posenc lab --seeds` covers it)."
    )


# -- plots -------------------------------------------------------------------------------------
def plot(results: dict, folder: Path) -> List[Path]:
    """Write ``bpb_vs_length.png`` and ``loss_by_position.png``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    lengths = results["eval_lengths"]
    written = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, s in results["schemes"].items():
        xs, ys, lo, hi = [], [], [], []
        for n in lengths:
            e = s["eval"].get(str(n))
            if e and not e.get("cannot"):
                xs.append(n)
                ys.append(e["bpb"])
                lo.append(e["bpb"] - e["bpb_ci"][0])
                hi.append(e["bpb_ci"][1] - e["bpb"])
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=name)
    for method, per_len in results["extension"].items():
        if method == "none":
            continue
        xs = [n for n in lengths if str(n) in per_len]
        if xs:
            ax.plot(
                xs, [per_len[str(n)]["bpb"] for n in xs], linestyle="--", marker=".", alpha=0.7, label=f"rope+{method}"
            )
    ax.axvline(results["train_len"], color="grey", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel("evaluation length (bytes); grey line = training length")
    ax.set_ylabel("bits per byte (all positions)")
    ax.set_title(
        "Length extrapolation by position scheme" + (f"\n({MACHINERY_CHECK})" if results.get("machinery_check") else "")
    )
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    path = folder / "bpb_vs_length.png"
    _save(plt, fig, path, 120)
    written.append(path)

    top = str(lengths[-1])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = max(1, results["train_len"] // 8)
    for name, s in results["schemes"].items():
        curve = s["loss_by_position"].get(top)
        if curve:
            smooth = np.convolve(curve, np.ones(width) / width, mode="valid")
            ax.plot(np.arange(len(smooth)) + width - 1, smooth, label=name)
    ax.axvline(results["train_len"], color="grey", linewidth=0.8)
    ax.set_xlabel(f"position in a {top}-byte window (moving average of {width})")
    ax.set_ylabel("bits per byte")
    ax.set_title("Loss by position")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = folder / "loss_by_position.png"
    _save(plt, fig, path, 120)
    written.append(path)
    heatmap = plot_retrieval(results, folder)
    if heatmap is not None:
        written.append(heatmap)
    return written


def _panels(results: dict) -> list:
    """(title, eval table) of every model with retrieval results: schemes, then extension methods."""
    panels = [(name, s["eval"]) for name, s in results["schemes"].items()]
    for method, per_len in results["extension"].items():
        panels.append((f"rope+{method}", per_len))
        if any("finetuned" in e for e in per_len.values()):
            panels.append((f"rope+{method} ft", {k: e["finetuned"] for k, e in per_len.items() if "finetuned" in e}))
    return [(t, ev) for t, ev in panels if any((e or {}).get("retrieval") for e in ev.values())]


def plot_retrieval(results: dict, folder: Path) -> Optional[Path]:
    """``retrieval.png``: accuracy heatmaps, distance bin x evaluation length, one panel per scheme
    and per extension method. Empty cells (far keys at 1x, or not run) are grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(results)
    if not panels:
        return None
    lengths = results["eval_lengths"]
    cols = min(5, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.3 * rows + 0.6), squeeze=False)
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#dddddd")
    for ax, (title, table) in zip(axes.flat, panels):
        grid = np.full((len(BIN_NAMES), len(lengths)), np.nan)
        for j, n in enumerate(lengths):
            cells = (table.get(str(n)) or {}).get("retrieval") or {}
            for i, b in enumerate(BIN_NAMES):
                if b in cells:
                    grid[i, j] = cells[b]["accuracy"]
        ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                if np.isfinite(grid[i, j]):
                    ax.text(
                        j,
                        i,
                        f"{grid[i, j]:.0%}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if grid[i, j] < 0.6 else "black",
                    )
        ax.set_xticks(range(len(lengths)), [f"{n // results['train_len']}x" for n in lengths], fontsize=7)
        ax.set_yticks(range(len(BIN_NAMES)), BIN_NAMES, fontsize=7)
        ax.set_title(title, fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(
        "Passkey retrieval accuracy: key distance x evaluation length"
        + (f" ({MACHINERY_CHECK})" if results.get("machinery_check") else ""),
        fontsize=9,
    )
    fig.tight_layout()
    path = Path(folder) / "retrieval.png"
    _save(plt, fig, path, 110)
    return path


def _save(plt, fig, path: Path, dpi: int) -> None:
    """``fig`` written at ``path`` atomically (a link there is replaced, never written through), then closed."""
    try:
        save_figure(fig, path, dpi=dpi)
    finally:
        plt.close(fig)


def write_report(results: dict, folder: Path, command: str = "", plots: bool = True) -> None:
    """Write results.json and results.md atomically, and (optionally) the plots."""
    from .store import atomic_write_bytes

    folder = Path(folder)
    write_json(folder / "results.json", stamp("results", results))
    atomic_write_bytes(folder / "results.md", markdown(results, command).encode("utf-8"))
    if plots:
        plot(results, folder)
