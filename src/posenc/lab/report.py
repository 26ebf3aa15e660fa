"""The report: ``results.json`` (the agreed shape the explorer reads), ``results.md`` and plots,
and plain verdicts on the effects the literature reports.

``results.json``::

    {"config": {...}, "corpus": {...}, "complete": bool, "train_len": int, "eval_lengths": [int, ...],
     "schemes": {name: {"train": {...},
                        "eval": {"<length>": {"bpb": float, "bpb_ci": [lo, hi],
                                              "bpb_last_quarter": float, "bpb_final32": float, ...}},
                        "loss_by_position": {"<length>": [bits per byte at each position, ...]}}},
     "extension": {method: {"<length>": {"bpb": float, ..., "finetuned": {...}}}},
     "verdicts": [{"claim": str, "seen": bool | null, "evidence": str}, ...]}

All losses are bits per byte; intervals are 95% bootstrap intervals over validation windows.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np

from .store import write_json

#: Relative change that counts as "losing quality" / the band that counts as "flat".
DEGRADE = 0.05
FLAT = 0.05


def build_results(cfg: dict, corpus: dict, train_info: dict, progress: dict, complete: bool) -> dict:
    """Assemble ``results.json`` from the finished-work record."""
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
    extension = {}
    for method, per_len in progress["extension"].items():
        extension[method] = {}
        for key, res in per_len.items():
            entry = {k: v for k, v in res.items() if k not in ("loss_by_position", "finetuned")}
            if "finetuned" in res:
                entry["finetuned"] = {k: v for k, v in res["finetuned"].items()
                                      if k != "loss_by_position"}
            extension[method][key] = entry
    results = {"config": cfg, "corpus": corpus, "complete": complete, "train_len": train_len,
               "eval_lengths": lengths, "schemes": schemes, "extension": extension}
    results["verdicts"] = verdicts(results)
    return results


def _bpb(entry: Optional[dict], key: str = "bpb") -> Optional[float]:
    if not entry or entry.get("cannot") or key not in entry:
        return None
    return float(entry[key])


def verdicts(results: dict) -> List[dict]:
    """Did the published pattern appear? One entry per claim; ``seen`` is ``None`` when the run
    lacks what the claim needs (a scheme, a length, the extension or the fine-tune)."""
    lengths = results["eval_lengths"]
    base, top = str(lengths[0]), str(lengths[-1])
    long_keys = [str(n) for n in lengths[1:]]
    far_keys = [str(n) for n in lengths if n >= 4 * lengths[0]]
    schemes, ext = results["schemes"], results["extension"]
    out = []

    def scheme_ratio(name):
        ev = schemes.get(name, {}).get("eval", {})
        a, b = _bpb(ev.get(base)), _bpb(ev.get(top))
        return (a, b) if a is not None and b is not None and top != base else None

    for name, label in (("sinusoidal", "Sinusoidal"), ("rope", "Plain RoPE")):
        pair = scheme_ratio(name)
        claim = f"{label} loses quality beyond the training length"
        if pair is None:
            out.append({"claim": claim, "seen": None, "evidence": "not measured in this run"})
            continue
        change = pair[1] / pair[0] - 1.0
        out.append({"claim": claim, "seen": bool(change > DEGRADE),
                    "evidence": f"bpb {pair[0]:.3f} at {base} -> {pair[1]:.3f} at {top} "
                                f"({change:+.1%}; threshold +{DEGRADE:.0%})"})
    pair = scheme_ratio("alibi")
    claim = f"ALiBi stays within {FLAT:.0%} of its in-distribution bpb at the longest length"
    if pair is None:
        out.append({"claim": claim, "seen": None, "evidence": "not measured in this run"})
    else:
        change = pair[1] / pair[0] - 1.0
        out.append({"claim": claim, "seen": bool(abs(change) <= FLAT),
                    "evidence": f"bpb {pair[0]:.3f} at {base} -> {pair[1]:.3f} at {top} ({change:+.1%})"})

    rope_eval = schemes.get("rope", {}).get("eval", {})
    for method, label in (("ntk", "NTK-aware"), ("yarn", "YaRN")):
        claim = f"{label} beats plain RoPE at 4x and 8x without retraining"
        pairs = [(k, _bpb(ext.get(method, {}).get(k)), _bpb(rope_eval.get(k))) for k in far_keys]
        pairs = [p for p in pairs if p[1] is not None and p[2] is not None]
        if not pairs:
            out.append({"claim": claim, "seen": None, "evidence": "not measured in this run"})
            continue
        out.append({"claim": claim, "seen": all(a < b for _, a, b in pairs),
                    "evidence": "; ".join(f"{k}: {a:.3f} vs {b:.3f}" for k, a, b in pairs)})
    claim = "Linear interpolation (PI) is worse than plain RoPE without fine-tuning"
    pairs = [(k, _bpb(ext.get("linear", {}).get(k)), _bpb(rope_eval.get(k))) for k in long_keys]
    pairs = [p for p in pairs if p[1] is not None and p[2] is not None]
    if not pairs:
        out.append({"claim": claim, "seen": None, "evidence": "not measured in this run"})
    else:
        out.append({"claim": claim, "seen": all(a > b for _, a, b in pairs),
                    "evidence": "; ".join(f"{k}: {a:.3f} vs {b:.3f}" for k, a, b in pairs)})

    control = _bpb(ext.get("none", {}).get(base, {}).get("finetuned"))
    claim = ("A short fine-tune closes most (>= half) of the remaining gap to the 1x bpb"
             + (" of the control (plain RoPE fine-tuned the same way at 1x)" if control else ""))
    ref = control if control is not None else _bpb(rope_eval.get(base))
    rows, closed = [], []
    for method, per_len in ext.items():
        for k, entry in per_len.items():
            if k == base:
                continue
            before, after = _bpb(entry), _bpb(entry.get("finetuned"))
            if ref is None or before is None or after is None:
                continue
            gap = before - ref
            if gap <= 0:
                rows.append(f"{method}@{k}: no gap ({before:.3f} <= {ref:.3f})")
                continue
            share = (before - after) / gap
            closed.append(share >= 0.5)
            rows.append(f"{method}@{k}: {before:.3f} -> {after:.3f} ({share:.0%} of the gap)")
    if not rows:
        out.append({"claim": claim, "seen": None, "evidence": "no fine-tune in this run (--finetune)"})
    else:
        out.append({"claim": claim, "seen": bool(closed) and all(closed), "evidence": "; ".join(rows)})

    claim = "After the same fine-tune, linear interpolation beats plain RoPE (extrapolation)"
    pairs = [(k, _bpb(ext.get("linear", {}).get(k, {}).get("finetuned")),
              _bpb(ext.get("none", {}).get(k, {}).get("finetuned"))) for k in long_keys]
    pairs = [p for p in pairs if p[1] is not None and p[2] is not None]
    if not pairs:
        out.append({"claim": claim, "seen": None, "evidence": "no fine-tune in this run (--finetune)"})
    else:
        out.append({"claim": claim, "seen": all(a < b for _, a, b in pairs),
                    "evidence": "; ".join(f"{k}: {a:.3f} vs {b:.3f}" for k, a, b in pairs)})
    return out


# -- Markdown ----------------------------------------------------------------------------------
def _cell(entry: Optional[dict], key: str, ci: bool = True) -> str:
    if entry is None:
        return "—"
    if entry.get("cannot"):
        return "cannot"
    value = entry.get(key)
    if value is None:
        return "—"
    text = f"{value:.3f}"
    if ci and key + "_ci" in entry:
        lo, hi = entry[key + "_ci"]
        text += f" [{lo:.3f}, {hi:.3f}]"
    if entry.get("note") and "interpolated" in entry["note"]:
        text += " †"
    return text


def markdown(results: dict, command: str = "") -> str:
    cfg, lengths = results["config"], results["eval_lengths"]
    train_len = results["train_len"]
    head = [f"{n} ({n // train_len}x)" for n in lengths]
    lines = ["# posenc lab results", ""]
    if command:
        lines += ["Command: `" + command + "`", ""]
    corpus = results.get("corpus", {})
    lines += [f"Preset `{cfg['preset']}`, seed {cfg['seed']}: {cfg['n_layers']} layers, d_model "
              f"{cfg['d_model']}, {cfg['n_heads']} heads, training length {train_len} bytes, "
              f"{cfg['steps']} steps of {cfg['batch_size']} sequences, AdamW lr {cfg['lr']:g} "
              f"(warmup {cfg['warmup_steps']}, cosine to {cfg['min_lr_ratio']:g}x). Corpus: "
              f"{corpus.get('train_files', '?')} training / {corpus.get('val_files', '?')} "
              f"validation files ({corpus.get('train_bytes', 0) / 1e6:.1f} MB / "
              f"{corpus.get('val_bytes', 0) / 1e6:.1f} MB); {cfg['eval_windows']} fixed validation "
              f"windows of {lengths[-1]} bytes, read in pieces of the evaluation length, so every "
              f"length scores the same bytes. Bits per byte (lower is better), 95% bootstrap "
              f"intervals over windows.", ""]
    if not results.get("complete"):
        lines += ["**Incomplete run**: resume it with `posenc lab --resume RUN_DIR`.", ""]
    lines += ["## In-distribution quality", "",
              "| scheme | train loss, last 10% of steps | validation at " + head[0] + " |",
              "|---|---|---|"]
    for name, s in results["schemes"].items():
        tr = s.get("train", {}).get("final_bpb")
        lines.append(f"| {name} | {'—' if tr is None else f'{tr:.3f}'} | "
                     f"{_cell(s['eval'].get(str(lengths[0])), 'bpb')} |")
    for key, title in (("bpb", "All positions"), ("bpb_last_quarter", "Last quarter of each window"),
                       ("bpb_final32", f"The same final {cfg['final_bytes']} bytes at every length")):
        lines += ["", f"## {title}", "", "| scheme | " + " | ".join(head) + " |",
                  "|---" * (len(head) + 1) + "|"]
        for name, s in results["schemes"].items():
            cells = [_cell(s["eval"].get(str(n)), key) for n in lengths]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if any("interpolated" in (e.get("note") or "") for s in results["schemes"].values()
           for e in s["eval"].values()):
        lines += ["", "† learned table stretched by linear interpolation "
                      "(`LearnedPositionalEmbedding.extend`), no retraining."]
    if results["extension"]:
        longer = lengths[1:]
        lines += ["", "## RoPE context extension (all positions)", "",
                  "Without retraining, and after a short fine-tune at the new length "
                  f"({cfg['finetune_steps']} steps of {cfg['finetune_batch']}, lr {cfg['finetune_lr']:g}) "
                  "where run.", "",
                  "| method | " + " | ".join(f"{n}" for n in longer) + " | " +
                  " | ".join(f"{n} fine-tuned" for n in longer) + " |",
                  "|---" * (2 * len(longer) + 1) + "|"]
        for method, per_len in results["extension"].items():
            cells = [_cell(per_len.get(str(n)), "bpb", ci=False) for n in longer]
            ft = [_cell(per_len.get(str(n), {}).get("finetuned"), "bpb", ci=False) for n in longer]
            lines.append(f"| {method} | " + " | ".join(cells + ft) + " |")
        control = results["extension"].get("none", {}).get(str(lengths[0]), {}).get("finetuned")
        if control and "bpb" in control:
            before = results["extension"]["none"][str(lengths[0])]["bpb"]
            lines += ["", f"Control: plain RoPE fine-tuned the same way at the training length "
                          f"scores {control['bpb']:.3f} at {lengths[0]} (before: {before:.3f}), so "
                          f"extra training alone changes bits per byte by "
                          f"{control['bpb'] - before:+.3f}."]
    lines += ["", "## Did the published pattern appear?", ""]
    for v in results.get("verdicts", []):
        mark = {True: "yes", False: "**no**", None: "not measured"}[v["seen"]]
        lines.append(f"- {v['claim']}: {mark}. {v['evidence']}")
    return "\n".join(lines) + "\n"


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
                xs.append(n), ys.append(e["bpb"])
                lo.append(e["bpb"] - e["bpb_ci"][0]), hi.append(e["bpb_ci"][1] - e["bpb"])
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=name)
    for method, per_len in results["extension"].items():
        if method == "none":
            continue
        xs = [n for n in lengths if str(n) in per_len]
        if xs:
            ax.plot(xs, [per_len[str(n)]["bpb"] for n in xs], linestyle="--", marker=".",
                    alpha=0.7, label=f"rope+{method}")
    ax.axvline(results["train_len"], color="grey", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel("evaluation length (bytes); grey line = training length")
    ax.set_ylabel("bits per byte (all positions)")
    ax.set_title("Length extrapolation by position scheme")
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    path = folder / "bpb_vs_length.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
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
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
    return written


def write_report(results: dict, folder: Path, command: str = "", plots: bool = True) -> None:
    """Write results.json and results.md atomically, and (optionally) the plots."""
    from .store import atomic_write_bytes

    folder = Path(folder)
    write_json(folder / "results.json", results)
    atomic_write_bytes(folder / "results.md", markdown(results, command).encode("utf-8"))
    if plots:
        plot(results, folder)
