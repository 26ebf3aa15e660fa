"""Verdicts: did the pattern the literature reports appear in this run, as far as its intervals tell?

Every claim compares two measured quantities ``a`` and ``b``, each a mean with a 95% bootstrap
interval, in a stated direction (``a > b`` or ``a < b``). The rule (:func:`interval_verdict`):

* **seen**: the intervals do not overlap, and ``a`` lies on the claimed side;
* **not seen**: the intervals do not overlap, and ``a`` lies on the other side;
* **within noise**: the intervals overlap (touching counts as overlapping);
* **not measured**: the run lacks one of the two numbers.

Non-overlap of two 95% intervals is a conservative test (two means can differ significantly while
their intervals still overlap a little), so "within noise" means "this run cannot tell", never "equal".
Every verdict quotes both numbers and their intervals.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from .schema import VERDICTS

SEEN, WITHIN_NOISE, NOT_SEEN, NOT_MEASURED = VERDICTS

#: Display names of the schemes and extension methods.
LABELS = {
    "nope": "NoPE",
    "sinusoidal": "Sinusoidal",
    "learned": "Learned",
    "rope": "RoPE",
    "alibi": "ALiBi",
    "none": "plain RoPE",
    "linear": "PI (linear)",
    "ntk": "NTK-aware",
    "dynamic_ntk": "dynamic NTK",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN",
    "llama3": "Llama 3",
}
#: What the literature reports, per scheme: perplexity past the training length, retrieval past it.
EXPECTED = {
    "sinusoidal": ("seen: loses quality (Press et al. 2022)", None),
    "rope": (
        "seen: loses quality (Press et al. 2022; Chen et al. 2023)",
        "seen: retrieval collapses past the training length (Chen et al. 2023)",
    ),
    "alibi": (
        "not seen: flat (Press et al. 2022)",
        "seen: ALiBi retrieves near keys, not far ones (its bias hides far tokens)",
    ),
}


def interval_verdict(a: Tuple[float, float], b: Tuple[float, float], relation: str) -> str:
    """The verdict on the claim ``a <relation> b`` from the two intervals ``(lo, hi)``."""
    if relation not in (">", "<"):
        raise ValueError(f"relation must be '>' or '<', got {relation!r}")
    (a_lo, a_hi), (b_lo, b_hi) = a, b
    if a_lo > a_hi or b_lo > b_hi:
        raise ValueError(f"intervals must be (lo, hi) with lo <= hi, got {a} and {b}")
    if a_lo > b_hi:
        return SEEN if relation == ">" else NOT_SEEN
    if a_hi < b_lo:
        return SEEN if relation == "<" else NOT_SEEN
    return WITHIN_NOISE


def _side(label: str, entry: Optional[dict], key: str) -> Optional[dict]:
    if not isinstance(entry, dict) or entry.get("cannot"):
        return None
    value, ci = entry.get(key), entry.get(key + "_ci")
    if value is None or not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return None
    return {"label": label, "value": float(value), "ci": [float(ci[0]), float(ci[1])]}


def quote(side: dict, percent: bool = False, bits: bool = False) -> str:
    """``"2.031 [1.953, 2.115]"``; for accuracies ``"45% [30%, 60%]"``; for log-probabilities
    ``"-12.7 [-13.4, -12.0] bits"``."""
    if percent:
        return f"{side['value']:.0%} [{side['ci'][0]:.0%}, {side['ci'][1]:.0%}]"
    if bits:
        return f"{side['value']:.1f} [{side['ci'][0]:.1f}, {side['ci'][1]:.1f}] bits"
    return f"{side['value']:.3f} [{side['ci'][0]:.3f}, {side['ci'][1]:.3f}]"


def judge(
    claim: str,
    a: Optional[dict],
    b: Optional[dict],
    relation: str,
    *,
    group: str,
    scheme: Optional[str] = None,
    expected: Optional[str] = None,
    percent: bool = False,
    bits: bool = False,
) -> dict:
    """One verdict record (the ``verdicts`` entries of ``results.json``)."""
    record = {"claim": claim, "group": group, "scheme": scheme, "expected": expected, "a": a, "b": b}
    if a is None or b is None:
        missing = [s for s, v in (("first", a), ("second", b)) if v is None]
        record.update(
            verdict=NOT_MEASURED, evidence=f"not measured in this run ({' and '.join(missing)} number missing)"
        )
        return record
    record["verdict"] = interval_verdict(tuple(a["ci"]), tuple(b["ci"]), relation)
    record["evidence"] = f"{a['label']} {quote(a, percent, bits)} vs {b['label']} {quote(b, percent, bits)}"
    return record


def _retrieval(entry: Optional[dict], bin_name: str) -> Optional[dict]:
    if not isinstance(entry, dict):
        return None
    cell = (entry.get("retrieval") or {}).get(bin_name)
    return cell if isinstance(cell, dict) else None


def verdicts(results: dict) -> List[dict]:
    """Every verdict this run can give, from its ``results.json`` content (before the verdicts)."""
    lengths = results["eval_lengths"]
    train_len = results["train_len"]
    base, top = str(lengths[0]), str(lengths[-1])
    mult = f"{lengths[-1] // train_len}x"
    schemes, ext = results["schemes"], results["extension"]
    out: List[dict] = []
    if top == base:
        return out

    for name, s in schemes.items():
        label = LABELS.get(name, name)
        ppl, ret = EXPECTED.get(name, (None, None))
        ev = s.get("eval", {})
        out.append(
            judge(
                f"{label} reads text at {top} bytes ({mult}) worse than at {base} (1x)",
                _side(f"bpb at {top}", ev.get(top), "bpb"),
                _side(f"bpb at {base}", ev.get(base), "bpb"),
                ">",
                group="perplexity",
                scheme=name,
                expected=ppl,
            )
        )
        out.append(
            judge(
                f"{label} retrieves keys beyond the training length (far, at {top}) less "
                f"often than near keys at {base}",
                _side(f"far keys at {top}", _retrieval(ev.get(top), "far"), "accuracy"),
                _side(f"near keys at {base}", _retrieval(ev.get(base), "near"), "accuracy"),
                "<",
                group="retrieval",
                scheme=name,
                expected=ret,
                percent=True,
            )
        )
        out.append(
            judge(
                f"{label} gives keys beyond the training length (far, at {top}) less probability "
                f"than near keys at {base}",
                _side(f"log2 p(key), far keys at {top}", _retrieval(ev.get(top), "far"), "logp_bits"),
                _side(f"near keys at {base}", _retrieval(ev.get(base), "near"), "logp_bits"),
                "<",
                group="retrieval-logp",
                scheme=name,
                expected=ret,
                bits=True,
            )
        )

    rope_eval = schemes.get("rope", {}).get("eval", {})
    far_keys = [str(n) for n in lengths if n >= 4 * lengths[0]]
    for method in ("ntk", "yarn"):
        for k in far_keys:
            out.append(
                judge(
                    f"{LABELS[method]} reads {k} bytes better than plain RoPE without retraining",
                    _side(f"{method} at {k}", ext.get(method, {}).get(k), "bpb"),
                    _side(f"plain RoPE at {k}", rope_eval.get(k), "bpb"),
                    "<",
                    group="extension",
                    scheme=method,
                    expected="seen (bloc97 2023; Peng et al. 2023)",
                )
            )
    linear, none = ext.get("linear", {}), ext.get("none", {})
    out.append(
        judge(
            f"PI without fine-tuning reads {top} bytes worse than plain RoPE",
            _side(f"PI at {top}", linear.get(top), "bpb"),
            _side(f"plain RoPE at {top}", rope_eval.get(top), "bpb"),
            ">",
            group="extension",
            scheme="linear",
            expected="seen (Chen et al. 2023)",
        )
    )
    out.append(
        judge(
            f"A short fine-tune improves PI at {top}",
            _side(f"PI fine-tuned at {top}", (linear.get(top) or {}).get("finetuned"), "bpb"),
            _side(f"PI at {top}", linear.get(top), "bpb"),
            "<",
            group="extension",
            scheme="linear",
            expected="seen (Chen et al. 2023)",
        )
    )
    out.append(
        judge(
            f"After the same fine-tune, PI reads {top} bytes better than plain RoPE",
            _side(f"PI fine-tuned at {top}", (linear.get(top) or {}).get("finetuned"), "bpb"),
            _side(f"plain RoPE fine-tuned at {top}", (none.get(top) or {}).get("finetuned"), "bpb"),
            "<",
            group="extension",
            scheme="linear",
            expected="seen (Chen et al. 2023, against fine-tuned extrapolation)",
        )
    )
    tuned = any("finetuned" in e for per_len in ext.values() for e in per_len.values())
    expected = "seen for interpolation with a fine-tune (Chen et al. 2023; Peng et al. 2023)"
    for method in [m for m in ext if m != "none"]:
        label = LABELS.get(method, method)
        if tuned:
            claim = f"{label} with a short fine-tune {{}} at {top}{{}} than plain RoPE fine-tuned the same way"
            cell_a = _retrieval((ext[method].get(top) or {}).get("finetuned"), "far")
            cell_b = _retrieval((none.get(top) or {}).get("finetuned"), "far")
            label_a, label_b = f"{method} fine-tuned, far keys", "plain RoPE fine-tuned, far keys"
        else:
            claim = f"{label} {{}} at {top}{{}} than plain RoPE, no retraining"
            cell_a = _retrieval(ext[method].get(top), "far")
            cell_b = _retrieval(rope_eval.get(top), "far")
            label_a, label_b = f"{method}, far keys", "plain RoPE, far keys"
        # The claim in exact matches, then in log2 p(key), which moves long before exact matches do.
        for verb, more, key, group, unit in (
            ("retrieves far keys", " more often", "accuracy", "extension-retrieval", dict(percent=True)),
            ("gives far keys more probability", "", "logp_bits", "extension-retrieval-logp", dict(bits=True)),
        ):
            prefix = "log2 p(key), " if key == "logp_bits" else ""
            out.append(
                judge(
                    claim.format(verb, more),
                    _side(prefix + label_a, cell_a, key),
                    _side(label_b, cell_b, key),
                    ">",
                    group=group,
                    scheme=method,
                    expected=expected,
                    **unit,
                )
            )
    return out
