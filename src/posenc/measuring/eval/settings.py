"""The settings of one ``posenc eval`` command (:class:`EvalRun`), checked once from the parsed
arguments and the checkpoint's ``config.json``, then passed down whole.

Values are parsed here rather than by argparse, so a mistake is one :class:`EvalError` (or
:class:`~posenc.measuring.eval.scalings.SpecError` for a scaling spec) naming the flag, the value given and
what is allowed; the command prints it as one line and exits with status 2.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .files import EvalError, read_json
from .scalings import MODEL, ScalingSpec, check_spec, default_specs, parse_specs, rope_of, trained_context

DTYPES = ("float32", "bfloat16", "float16")
#: bootstrap resamples per interval: intervals settle long before this, and memory grows with it
MAX_BOOTSTRAP_SAMPLES = 100_000
#: the most bytes read from a checkpoint's config.json (published ones are a few kilobytes)
MAX_CONFIG_BYTES = 1 << 24


#: the largest count a flag takes (a number of windows, tokens, trials, ...): float64 holds it exactly
MAX_COUNT = 2**53
#: passkey trials per cell, and configurations a search may evaluate: each is a forward pass, and both
#: plan their draws up front
MAX_PASSKEY_TRIALS = 100_000
MAX_SEARCH_BUDGET = 100_000
#: what ``--device`` takes: the devices the command loads a model on
DEVICE = re.compile(r"\A(cpu|cuda(:[0-9]{1,4})?)\Z")


def shown(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters with its length said (a 400-digit
    number is named, not printed)."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def positive_ints(flag: str, text: str) -> List[int]:
    """Comma-separated integers >= 1 (and at most :data:`MAX_COUNT`), sorted and unique, or :class:`EvalError`."""
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        values = []
    if not values or any(not 1 <= v <= MAX_COUNT for v in values):
        raise EvalError(f"{flag} must be comma-separated positive integers (at most 2**53), got {shown(text)}")
    return sorted(set(values))


def depths(text: str) -> List[float]:
    """Comma-separated needle depths in [0, 1], or :class:`EvalError`."""
    try:
        values = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        values = []
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise EvalError(f"--depths must be comma-separated numbers from 0 to 1, got {text!r}")
    return sorted(set(values))


def positive(flag: str, text: str, kind=int, maximum: float = MAX_COUNT):
    """One number > 0 and <= ``maximum`` of ``kind``, or :class:`EvalError`."""
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not value > 0 or value != value:
        raise EvalError(f"{flag} must be a positive {kind.__name__}, got {shown(str(text))}")
    if not value <= maximum:  # infinity, or more than float64 counts exactly (a huge int compares exactly)
        top = "2**53" if maximum == MAX_COUNT else f"{maximum:,}"
        raise EvalError(f"{flag} must be at most {top}, got {shown(str(text))}")
    return value


def check_device(text: Any) -> str:
    """``--device``: ``cpu``, ``cuda`` or ``cuda:N``, or :class:`EvalError` (torch knows more device
    types, ``xla`` or ``meta``, that a checkpoint is not loaded on here)."""
    if not isinstance(text, str) or not DEVICE.match(text):
        raise EvalError(f"--device must be cpu, cuda or cuda:N, got {shown(str(text))}")
    return text


def seed_of(text: str) -> int:
    """A seed: an integer >= 0 (numpy's generators take no other), or :class:`EvalError`."""
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if seed < 0:
        raise EvalError(f"--seed must be an integer >= 0, got {shown(str(text))}")
    if seed > MAX_COUNT:
        raise EvalError(f"--seed must be at most 2**53, got {shown(str(text))}")
    return seed


def read_checkpoint_config(folder: Path) -> Dict[str, Any]:
    """The ``config.json`` of a checkpoint folder, or :class:`EvalError` naming what is wrong."""
    if not folder.exists():
        raise EvalError(f"MODEL {str(folder)!r}: no such folder; give a local transformers checkpoint folder")
    if not folder.is_dir():
        raise EvalError(f"MODEL {str(folder)!r} is a file; give the checkpoint's folder")
    path = folder / "config.json"
    if not path.exists():
        raise EvalError(f"MODEL {str(folder)!r} has no config.json, so it is not a transformers checkpoint")
    config = read_json(path, "give the checkpoint's own config.json", max_bytes=MAX_CONFIG_BYTES)
    if not isinstance(config, dict) or "model_type" not in config:
        raise EvalError(f"{path} has no model_type, so it is not a transformers model config")
    return config


def check_model_type(folder: Path, model_type: str) -> None:
    """Refuse a model type :func:`posenc.integrations.transformers.patch` cannot take: one that is not a
    rotary causal-LM type of the installed ``transformers`` (whose rotary functions patch reads from
    the family's own code, refusing with its reason those it cannot match)."""
    from ...integrations.discovery import rotary_causal_lm_module

    if isinstance(model_type, str) and rotary_causal_lm_module(model_type) is not None:
        return
    raise EvalError(
        f"MODEL {str(folder)!r} is a {model_type!r} model; posenc's patch supports "
        "the rotary causal-LM types of the installed transformers (docs/transformers.md lists them)"
    )


@dataclass(frozen=True)
class EvalRun:
    """The settings of one ``posenc eval`` command, resolved once by :meth:`from_args` and passed
    down whole. Flags keep their names (``--final-tokens`` is ``final_tokens``); what the checkpoint
    decides is resolved here too: its ``config.json``, its trained context and rotary width, the
    specs (the defaults when ``--scalings`` is not given), the lengths (``1, 2, 4, 8 x`` the trained
    context by default), the search's target length and the output folder."""

    model: Path  # the checkpoint folder (MODEL)
    config: Dict[str, Any]  # its config.json, as read
    trained: int  # its trained context L0, in tokens
    rotary_dim: int  # the rotated width of each head
    specs: Tuple[ScalingSpec, ...]  # the scalings compared, in the order given
    lengths: Tuple[int, ...]  # evaluation lengths, ascending; the last is the span every window reads
    text: Optional[str]  # --text (None: the lab corpus's validation split)
    out: Path  # --out, or runs/eval-<model>-<time>
    fresh: bool
    force: bool
    write_config: Optional[Path]  # --write-config's file (a folder given becomes <folder>/config.json)
    windows: int  # >= 2: intervals are over windows
    final_tokens: int  # <= the shortest length (checked unless writing a config)
    passkey_trials: int  # 0: no passkey
    depths: Tuple[float, ...]  # in [0, 1], ascending
    passkey_format: str  # a key of posenc.measuring.eval.measure.FORMATS
    tasks: Tuple[str, ...]  # --tasks: names of posenc.measuring.eval.tasks.TASKS (empty: none)
    task_trials: int  # trials per task cell (0: no tasks)
    chat: bool  # frame task prompts with the checkpoint's chat template
    threshold: float  # the score the effective length asks for, in [0, 1]
    dtype: Optional[str]  # one of DTYPES, or None (float32 on CPU, else bfloat16)
    device: str
    device_map: Optional[str]  # None or "auto"
    batch_size: int
    memory_limit: Optional[float]  # GB to plan for instead of what the device reports free
    search: Optional[str]  # the registered type --search tunes
    search_length: Optional[int]  # the search's target: one of the lengths, past the trained context (None
    # without --search)
    search_windows: int
    search_budget: int
    seed: int  # >= 0
    bootstrap_samples: int  # 1 .. MAX_BOOTSTRAP_SAMPLES
    plots: bool

    @property
    def span(self) -> int:
        """Tokens every perplexity window scores: the longest length."""
        return self.lengths[-1]

    @classmethod
    def from_args(cls, args) -> "EvalRun":
        """The settings ``args`` (from :func:`posenc.measuring.eval.cli.add_arguments`) asks for, or the first
        mistake as :class:`EvalError` or :class:`~posenc.measuring.eval.scalings.SpecError`: the flags' values
        first, then the checkpoint's config, the specs and lengths, the search and the lengths' fit."""
        numbers = _numbers(args)
        folder = Path(args.model).expanduser()
        config = read_checkpoint_config(folder)
        check_model_type(folder, config["model_type"])
        try:
            rope = rope_of(config)
            trained = trained_context(config)
        except ValueError as err:
            raise EvalError(f"MODEL {str(folder)!r}: its rope config cannot be read: {err}") from None
        specs, lengths = _specs_and_lengths(args.scalings, numbers["lengths"], folder, rope, trained)
        write_config = None
        if args.write_config is not None:
            target = Path(args.write_config).expanduser()
            write_config = target / "config.json" if target.suffix != ".json" else target
        if numbers["search"] is not None:
            if write_config is not None:
                raise EvalError("--search and --write-config: run the search first, then write the spec it reports")
            numbers["search_length"] = _search_length(numbers["search_length"], lengths, trained)
        else:
            numbers["search_length"] = None
            if write_config is not None and len(specs) != 1:
                raise EvalError(f"--write-config writes one scaling; --scalings names {len(specs)}")
        if write_config is None:
            _check_fit(lengths, numbers["final_tokens"])
        out = Path(args.out) if args.out else Path("runs") / f"eval-{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        return cls(
            model=folder,
            config=config,
            trained=trained,
            rotary_dim=rope["rotary_dim"],
            specs=tuple(specs),
            out=out,
            write_config=write_config,
            text=args.text,
            fresh=bool(args.fresh),
            force=bool(args.force),
            device=args.device,
            plots=bool(args.plots),
            **{**numbers, "lengths": tuple(lengths)},
        )


def _numbers(args) -> Dict[str, Any]:
    """The flags that are values, parsed and checked, by field name (``lengths`` None when not given)."""
    from .measure import FORMATS

    if args.passkey_format not in FORMATS:
        raise EvalError(f"--passkey-format must be one of {', '.join(sorted(FORMATS))}, got {args.passkey_format!r}")
    if args.dtype is not None and args.dtype not in DTYPES:
        raise EvalError(f"--dtype must be one of {', '.join(DTYPES)}, got {args.dtype!r}")
    check_device(args.device)
    if args.device_map is not None and args.device_map != "auto":
        raise EvalError(f"--device-map takes only 'auto' (accelerate's convention), got {args.device_map!r}")
    v: Dict[str, Any] = {"passkey_format": args.passkey_format, "dtype": args.dtype, "device_map": args.device_map}
    v["lengths"] = positive_ints("--lengths", args.lengths) if args.lengths is not None else None
    v["windows"] = positive("--windows", args.windows)
    if v["windows"] < 2:  # an interval over windows needs two of them
        raise EvalError(f"--windows must be at least 2 (intervals are over windows), got {v['windows']}")
    v["final_tokens"] = positive("--final-tokens", args.final_tokens)
    trials = args.passkey_trials
    v["passkey_trials"] = (
        0 if str(trials).strip() == "0" else positive("--passkey-trials", trials, maximum=MAX_PASSKEY_TRIALS)
    )
    v["depths"] = tuple(depths(args.depths))
    v["batch_size"] = positive("--batch-size", args.batch_size)
    # one (samples, windows) index array per interval
    v["bootstrap_samples"] = positive("--bootstrap-samples", args.bootstrap_samples, maximum=MAX_BOOTSTRAP_SAMPLES)
    memory = args.memory_limit
    v["memory_limit"] = positive("--memory-limit", memory, float) if memory is not None else None
    v["seed"] = seed_of(args.seed)
    v["search_length"] = positive("--search-length", args.search_length) if args.search_length else None
    v["search_windows"] = positive("--search-windows", args.search_windows)
    v["search_budget"] = positive("--search-budget", args.search_budget, maximum=MAX_SEARCH_BUDGET)
    from .taskrun import parse_flags

    v.update(parse_flags(args))
    v["search"] = None
    if args.search is not None:
        from .search import search_type

        v["search"] = search_type(args.search)
    return v


def _specs_and_lengths(
    scalings: Optional[str], lengths: Optional[List[int]], folder: Path, rope: Dict[str, Any], trained: int
) -> Tuple[List[ScalingSpec], List[int]]:
    """The specs ``--scalings`` names (or the defaults) and the lengths, each spec checked at each length."""
    has_scaling = rope["scaling"] is not None
    specs = parse_specs(scalings) if scalings else parse_specs(",".join(default_specs(has_scaling)))
    if any(s.name == MODEL for s in specs) and not has_scaling:
        raise EvalError(f"scaling 'model': MODEL {str(folder)!r} has no rope scaling of its own; drop it")
    lengths = lengths or [trained * m for m in (1, 2, 4, 8)]
    for spec in specs:
        check_spec(spec, lengths, trained, rope["rotary_dim"])
    return specs, lengths


def _search_length(given: Optional[int], lengths: List[int], trained: int) -> int:
    """The search's target length: ``--search-length`` or the longest, one of the lengths, past ``trained``."""
    target = given or lengths[-1]
    if target not in lengths:
        raise EvalError(f"--search-length {target} must be one of the lengths {lengths}")
    if target <= trained:
        raise EvalError(f"--search-length {target} must exceed the trained context {trained}")
    return target


def _check_fit(lengths: List[int], final_tokens: int) -> None:
    """Every length divides the longest (each window is read whole at every length), and the final
    tail fits the shortest."""
    span = lengths[-1]
    bad = [n for n in lengths if span % n]
    if bad:
        raise EvalError(f"--lengths: every length must divide the longest ({span}); {bad} do not")
    if final_tokens > lengths[0]:
        raise EvalError(f"--final-tokens {final_tokens} must be at most the shortest length {lengths[0]}")
