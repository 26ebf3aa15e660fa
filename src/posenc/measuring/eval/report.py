"""``results.json``, ``results.md`` and the plots of ``posenc eval``, from the finished cells.

``results.json`` (``"schema": "posenc.eval/results"``, ``"schema_version": 2``)::

    perplexity[scaling][length]: bpb, bpb_ci, ppl, ppl_ci, final_bpb, final_bpb_ci, final_ppl,
                                 final_ppl_ci, windows          (intervals: bootstrap over windows)
    passkey[scaling][length][depth]: accuracy, accuracy_ci (Wilson), logp_bits, logp_bits_ci
                                 (bootstrap over trials), trials, offsets, keys, plant_starts
    skipped: {length or scaling@length: why}
    settings: model_sha256, text_sha256, window_ends, span, seed, ... (what the numbers depend on)

``bpb`` is bits per byte of every scored token (the same tokens at every length): the total bits of
all windows over their total UTF-8 bytes, the standard definition (lm-evaluation-harness's
``bits_per_byte``); ``ppl`` the per-token perplexity ``exp(total nats / total tokens)``; ``final_*``
the last ``final_tokens`` of each window, read at the very end of the longest context each length
gives. A depth's key is its exact shortest decimal (``0.25``), and each passkey cell lists each
trial's filler offset in the token stream, its key and where its plant starts, so a run can be
rebuilt from its results file and the text.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from ... import runs
from .files import depth_key
from .measure import LN2, bootstrap_interval, ratio_interval, wilson_interval
from .scalings import ScalingSpec, spec_summary


def build(
    stamp: Dict[str, Any],
    settings: Dict[str, Any],
    cells: Dict[str, Any],
    *,
    specs: List[ScalingSpec],
    lengths: List[int],
    trained: int,
    depths: List[float],
    window_bytes: np.ndarray,
    final_bytes: np.ndarray,
    final_tokens: int,
    bootstrap_samples: int,
    skipped: Dict[str, str],
    complete: bool,
    model_type: str,
    search: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """The results document from the raw cells (see the module docstring)."""
    perplexity: Dict[str, Dict[str, Any]] = {}
    passkey: Dict[str, Dict[str, Any]] = {}
    for spec in specs:
        for n in lengths:
            cell = cells.get(f"ppl|{spec.label}|{n}")
            if cell is not None:
                perplexity.setdefault(spec.label, {})[str(n)] = _ppl_summary(
                    cell, window_bytes, final_bytes, final_tokens, bootstrap_samples, settings["seed"]
                )
            for depth in depths:
                cell = cells.get(f"passkey|{spec.label}|{n}|{depth_key(depth)}")
                if cell is not None:
                    passkey.setdefault(spec.label, {}).setdefault(str(n), {})[depth_key(depth)] = _passkey_summary(
                        cell, bootstrap_samples, settings["seed"]
                    )
    return {
        **stamp,
        "complete": complete,
        "model": settings["model"],
        "model_sha256": settings.get("model_sha256"),
        "model_type": model_type,
        "trained_context": trained,
        "lengths": lengths,
        "multiples": [n / trained for n in lengths],
        "depths": depths,
        "scalings": [{**s.to_dict(), "how": spec_summary(s, trained, lengths)} for s in specs],
        "settings": settings,
        "perplexity": perplexity,
        "passkey": passkey,
        "skipped": dict(skipped),
        **(
            {"search": _search_summary(search, cells, window_bytes, bootstrap_samples, settings["seed"])}
            if search
            else {}
        ),
    }


def _search_summary(search, cells, window_bytes, samples, seed) -> Dict[str, Any]:
    """The search beside its default: bits per byte on the search windows (what was minimised) and on
    the report's windows at the target length (held out), and the paired difference on those."""
    target = search["target_length"]
    out: Dict[str, Any] = {
        "type": search["type"],
        "target_length": target,
        "search_windows": len(search["window_bytes"]),
        "budget": search["budget"],
        "evaluations": search["evaluations"],
        "parameters": search["parameters"],
        "history": search["history"],
    }
    held: Dict[str, np.ndarray] = {}
    search_bytes = np.asarray(search["window_bytes"], dtype=np.float64)
    for role in ("default", "best"):
        bits = np.asarray(search[f"{role}_nats"], dtype=np.float64) / LN2  # (W,)
        entry: Dict[str, Any] = {
            "label": search[f"{role}_spec"].label,
            "params": search[role]["params"],
            "search_bpb": float(bits.sum() / search_bytes.sum()),
            "search_bpb_ci": list(ratio_interval(bits, search_bytes, samples=samples, seed=seed)),
        }
        cell = cells.get(f"ppl|{entry['label']}|{target}")
        if cell is not None:
            held[role] = np.asarray(cell["nats"], dtype=np.float64) / LN2
            entry["held_out_bpb"] = float(held[role].sum() / np.sum(window_bytes))
            entry["held_out_bpb_ci"] = list(ratio_interval(held[role], window_bytes, samples=samples, seed=seed))
        out[role] = entry
    if len(held) == 2:  # a difference of two ratios over the same bytes: the ratio of the bits' difference
        diff = held["best"] - held["default"]
        out["held_out_difference"] = {
            "bpb": float(diff.sum() / np.sum(window_bytes)),
            "bpb_ci": list(ratio_interval(diff, window_bytes, samples=samples, seed=seed)),
        }
    return out


def _ppl_summary(cell, window_bytes, final_bytes, final_tokens, samples, seed) -> Dict[str, Any]:
    nats = np.asarray(cell["nats"], dtype=np.float64)  # per window, summed over its tokens
    final = np.asarray(cell["final_nats"], dtype=np.float64)
    out: Dict[str, Any] = {"windows": int(nats.size)}
    for prefix, total, count, nbytes in (
        ("", nats, cell["tokens"], window_bytes),
        ("final_", final, final_tokens, final_bytes),
    ):
        bits = total / LN2  # (W,)
        per_token = total / count  # (W,): every window scores count tokens, so the mean is total / tokens
        out[prefix + "bpb"] = float(bits.sum() / np.sum(nbytes))
        out[prefix + "bpb_ci"] = list(ratio_interval(bits, nbytes, samples=samples, seed=seed))
        out[prefix + "ppl"] = float(math.exp(per_token.mean()))
        lo, hi = bootstrap_interval(per_token, samples=samples, seed=seed)
        out[prefix + "ppl_ci"] = [math.exp(lo), math.exp(hi)]
    return out


def _passkey_summary(cell, samples, seed) -> Dict[str, Any]:
    correct = np.asarray(cell["correct"], dtype=np.float64)
    logp = np.asarray(cell["logp_bits"], dtype=np.float64)
    hits = int(correct.sum())
    return {
        "accuracy": hits / correct.size,
        "accuracy_ci": list(wilson_interval(hits, int(correct.size))),
        "logp_bits": float(logp.mean()),
        "logp_bits_ci": list(bootstrap_interval(logp, samples=samples, seed=seed)),
        "trials": int(correct.size),
        **{k: list(cell[k]) for k in ("offsets", "keys", "plant_starts") if k in cell},
    }


def _num(v: float) -> str:
    return f"{v:.3f}" if abs(v) < 1000 else f"{v:.4g}"


def markdown(results: Dict[str, Any]) -> str:
    """The report as Markdown tables: perplexity side by side, then passkey accuracy per scaling."""
    lengths = results["lengths"]
    trained = results["trained_context"]
    head = [
        f"# posenc eval: {Path(results['model']).name}",
        "",
        f"{results['model_type']}, trained context {trained} tokens; lengths "
        + ", ".join(f"{n} ({n / trained:g}x)" for n in lengths)
        + ("" if results["complete"] else ". **Incomplete**: rerun the same command to finish."),
        "",
        "## Perplexity",
        "",
        "Bits per byte over the same tokens at every length (95% bootstrap interval over windows); lower is better.",
        "",
        "| scaling | how | " + " | ".join(f"{n} ({n / trained:g}x)" for n in lengths) + " |",
        "|---|---|" + "---|" * len(lengths),
    ]
    how = {s["label"]: s["how"] for s in results["scalings"]}
    for s in results["scalings"]:
        row = results["perplexity"].get(s["label"], {})
        cells = []
        for n in lengths:
            e = row.get(str(n))
            if e is None:
                cells.append(results["skipped"].get(str(n)) and "skipped" or "-")
            else:
                lo, hi = e["bpb_ci"]
                cells.append(f"{e['bpb']:.3f} [{lo:.3f}, {hi:.3f}] (ppl {_num(e['ppl'])})")
        head.append(f"| {s['label']} | {how[s['label']]} | " + " | ".join(cells) + " |")
    if results["passkey"]:
        head += [
            "",
            "## Passkey retrieval",
            "",
            "Exact matches of the greedily decoded key per depth "
            "(0 = start, 1 = end), 95% Wilson interval, and mean log2 p(key).",
            "",
        ]
        for s in results["scalings"]:
            grid = results["passkey"].get(s["label"], {})
            if not grid:
                continue
            head += [
                f"### {s['label']}",
                "",
                "| length | " + " | ".join(depth_key(d) for d in results["depths"]) + " |",
                "|---|" + "---|" * len(results["depths"]),
            ]
            for n in lengths:
                row = grid.get(str(n), {})
                cells = []
                for d in results["depths"]:
                    c = depth_cell(row, d)
                    if c is None:
                        cells.append("-")
                    else:
                        lo, hi = c["accuracy_ci"]
                        cells.append(f"{c['accuracy']:.0%} [{lo:.0%}, {hi:.0%}] {c['logp_bits']:.1f} bits")
                head.append(f"| {n} | " + " | ".join(cells) + " |")
            head.append("")
    if results.get("search"):
        head += _search_markdown(results["search"])
    if results["skipped"]:
        head += ["", "## Skipped", ""] + [f"- {k}: {v}" for k, v in results["skipped"].items()]
    return "\n".join(head).rstrip() + "\n"


def _search_markdown(search: Dict[str, Any]) -> List[str]:
    def ci(e, key):
        if key not in e:
            return "-"
        lo, hi = e[key + "_ci"]
        return f"{e[key]:.4f} [{lo:.4f}, {hi:.4f}]"

    def params(p):
        shown = []
        for k, v in p.items():
            if k in ("original_max_position_embeddings", "short_factor"):
                continue
            shown.append(f"{k} = [{', '.join(f'{x:.3g}' for x in v)}]" if isinstance(v, list) else f"{k} = {v:g}")
        return "; ".join(shown)

    lines = [
        "",
        f"## Search: {search['type']} at {search['target_length']} tokens",
        "",
        f"{search['evaluations']} configurations evaluated (budget {search['budget']}) on "
        f"{search['search_windows']} search windows apart from the report's; bits per byte with 95% bootstrap "
        "intervals over windows. The search minimised the first column; the second is held out.",
        "",
        "| | parameters | search windows | report windows (held out) |",
        "|---|---|---|---|",
    ]
    for role in ("default", "best"):
        e = search[role]
        lines.append(
            f"| {role} ({e['label']}) | {params(e['params'])} | {ci(e, 'search_bpb')} | {ci(e, 'held_out_bpb')} |"
        )
    d = search.get("held_out_difference")
    if d:
        lo, hi = d["bpb_ci"]
        lines += [
            "",
            f"Best minus default on the report windows: {d['bpb']:+.4f} bits per byte [{lo:+.4f}, {hi:+.4f}].",
        ]
    return lines


def plots(results: Dict[str, Any], out: Path) -> List[Path]:
    """``ppl_vs_length.png`` and ``passkey_<scaling>.png`` per scaling; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = [_saved(plt, _ppl_figure(plt, results), out / "ppl_vs_length.png")]
    for s in results["scalings"]:
        grid = results["passkey"].get(s["label"])
        if grid:
            figure = _passkey_figure(plt, results, s["label"], grid)
            written.append(_saved(plt, figure, out / f"passkey_{_file_label(s['label'])}.png"))
    return written


def _saved(plt, fig, path: Path) -> Path:
    """``fig`` laid out, written at ``path`` (120 dpi) and closed."""
    fig.tight_layout()
    try:
        runs.save_figure(fig, path, dpi=120)  # atomically: a link at path is replaced, never written through
    finally:
        plt.close(fig)
    return path


def _ppl_figure(plt, results: Dict[str, Any]):
    """Bits per byte against length (log scale), one line with its intervals per scaling."""
    lengths = results["lengths"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in results["scalings"]:
        row = results["perplexity"].get(s["label"], {})
        xs = [n for n in lengths if str(n) in row]
        if not xs:
            continue
        ys = [row[str(n)]["bpb"] for n in xs]
        lo = [row[str(n)]["bpb"] - row[str(n)]["bpb_ci"][0] for n in xs]
        hi = [row[str(n)]["bpb_ci"][1] - row[str(n)]["bpb"] for n in xs]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=s["label"])
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.axvline(results["trained_context"], color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("evaluation length (tokens, log scale); dotted: trained context")
    ax.set_ylabel("bits per byte")
    ax.legend(fontsize=8)
    return fig


def _passkey_figure(plt, results: Dict[str, Any], label: str, grid: Dict[str, Any]):
    """One scaling's passkey heatmap: needle depth x length, each cell's rate, interval and log2 p(key)."""
    lengths, depths = results["lengths"], results["depths"]
    acc = np.full((len(depths), len(lengths)), np.nan)
    labels: Dict[tuple, str] = {}
    for j, n in enumerate(lengths):
        for i, d in enumerate(depths):
            c = depth_cell(grid.get(str(n), {}), d)
            if c is not None:
                acc[i, j] = c["accuracy"]
                labels[i, j] = heat_label(c)
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(lengths), 1.0 + 0.8 * len(depths)))
    image = ax.imshow(acc, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
    for (i, j), text in labels.items():
        ax.text(j, i, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
    ax.set_yticks(range(len(depths)), [depth_key(d) for d in depths])
    ax.set_xlabel("length (tokens)")
    ax.set_ylabel("needle depth")
    ax.set_title(f"passkey exact match [95% Wilson interval], mean log2 p(key): {label}", fontsize=8, wrap=True)
    fig.colorbar(image, ax=ax, fraction=0.05)
    return fig


def depth_cell(row: Dict[str, Any], depth: float) -> Optional[Dict[str, Any]]:
    """The cell of ``depth`` in one length's row: under its exact key, or ``f"{depth:g}"`` as version 1
    files wrote it."""
    cell = row.get(depth_key(depth))
    return cell if cell is not None else row.get(f"{depth:g}")


def heat_label(cell: Dict[str, Any]) -> str:
    """A heatmap cell's text: exact-match rate, its Wilson interval and the mean log2 p(key)."""
    lo, hi = cell["accuracy_ci"]
    return f"{cell['accuracy']:.0%}\n[{lo:.0%}, {hi:.0%}]\n{cell['logp_bits']:.1f} bits"


def _file_label(label: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in label)
