"""The settings of one ``posenc bench`` command, checked once from its flags and passed down whole.

:class:`BenchConfig` holds the kernel rows' settings, :class:`ModelBenchConfig` those of ``--model``,
and :class:`BenchRun` is what the command resolves from its arguments: one of the two and the path of
the JSON it writes. Numbers are parsed here rather than by argparse, so a mistake is one line naming
the flag, the value and what is allowed, printed before any work starts. The two configurations check
their own fields as well, so one built in code is refused the same way (``TypeError`` for a value of
the wrong type, ``ValueError`` for one out of range).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Tuple, Union

import torch

from ..._checks import check_choice, check_float, check_int

#: name -> (batch, seq); heads and head_dim are in :data:`LLAMA3_8B` (:data:`TINY` for ``tiny``)
SHAPES = {
    "decode": (1, 1),
    "prefill-4k": (1, 4096),
    "prefill-16k": (1, 16384),
    "tiny": (2, 8),
}
LLAMA3_8B = {"q_heads": 32, "kv_heads": 8, "head_dim": 128}
TINY = {"q_heads": 4, "kv_heads": 2, "head_dim": 16}
QUICK_SHAPES = ("decode", "prefill-4k")
FULL_SHAPES = ("decode", "prefill-4k", "prefill-16k")
MODES = ("forward", "forward+backward")
DTYPES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda")
QK_LAYOUTS = ("auto", "contiguous", "transformers")
#: --model sizes: the Llama attention shape of the issue, and a smoke-test shape
MODEL_SIZES = {
    "wide": {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 4096,
        "num_hidden_layers": 2,
        "vocab_size": 1024,
        "seq": 2048,
    },
    "tiny": {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "vocab_size": 128,
        "seq": 32,
    },
}
#: most repeats / warm-up calls / decode tokens a flag may ask for (a typo must not mean a week)
MAX_COUNT = 1000
#: longest a kernel row's repeat may loop a short call for, in seconds
MAX_SAMPLE_S = 60.0


def _names(field: str, value: object, allowed: Sequence[str]) -> Tuple[str, ...]:
    """``value``, a non-empty sequence of names each in ``allowed``, as a tuple; else ``ValueError``."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{field} must be a non-empty list of names from {list(allowed)}, got {value!r}")
    for name in value:
        check_choice(f"{field} entry", name, allowed)
    return tuple(value)


def _flag(field: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{field} must be True or False, got {value!r} ({type(value).__name__})")


@dataclass(frozen=True)
class BenchConfig:
    """The kernel rows' settings (``posenc bench``); written to the JSON as ``config``."""

    shapes: Sequence[str] = QUICK_SHAPES  # names of SHAPES
    dtypes: Sequence[str] = ("float32",)  # names of DTYPES
    modes: Sequence[str] = MODES
    device: str = "cpu"  # "cpu" or "cuda"
    repeats: int = 9  # timed repeats per implementation and case
    warmup: int = 2  # untimed calls before timing
    min_sample_s: float = 1e-2  # a repeat loops a short call until it lasts at least this long
    compile: bool = True  # include "compiled eager" (costs compile time per case)
    quick: bool = False
    qk_layout: str = "contiguous"  # "transformers": q/k transposes of (B, S, H, D) buffers

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", _names("shapes", self.shapes, list(SHAPES)))
        object.__setattr__(self, "dtypes", _names("dtypes", self.dtypes, DTYPES))
        object.__setattr__(self, "modes", _names("modes", self.modes, MODES))
        check_choice("device", self.device, DEVICES)
        check_int("repeats", self.repeats, minimum=1, maximum=MAX_COUNT)
        check_int("warmup", self.warmup, minimum=0, maximum=MAX_COUNT)
        check_float("min_sample_s", self.min_sample_s, greater_than=0.0, maximum=MAX_SAMPLE_S)
        _flag("compile", self.compile)
        _flag("quick", self.quick)
        check_choice("qk_layout", self.qk_layout, QK_LAYOUTS[1:])  # "auto" is resolved before


@dataclass(frozen=True)
class ModelBenchConfig:
    """The model rows' settings (``posenc bench --model``)."""

    size: str = "wide"  # a key of MODEL_SIZES
    dtypes: Sequence[str] = ("float32", "bfloat16")  # names of DTYPES
    repeats: int = 3  # alternating forwards per variant
    decode_tokens: int = 8  # alternating decode steps per variant
    warmup: int = 1  # untimed forwards per variant before timing
    device: str = "cpu"  # "cpu" or "cuda"

    def __post_init__(self) -> None:
        check_choice("size", self.size, list(MODEL_SIZES))
        object.__setattr__(self, "dtypes", _names("dtypes", self.dtypes, DTYPES))
        check_int("repeats", self.repeats, minimum=1, maximum=MAX_COUNT)
        check_int("decode_tokens", self.decode_tokens, minimum=1, maximum=MAX_COUNT)
        check_int("warmup", self.warmup, minimum=0, maximum=MAX_COUNT)
        check_choice("device", self.device, DEVICES)


@dataclass(frozen=True)
class BenchRun:
    """What one ``posenc bench`` command does: the kernel rows or the model rows, and where their
    JSON goes. Resolved once by :meth:`from_args` and passed down whole."""

    config: Union[BenchConfig, ModelBenchConfig]
    out: Path  # --json, checked writable (default bench-rope.json; --model: bench-model.json)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "BenchRun":
        """The settings ``args`` (from :func:`add_arguments`) asks for, or the first mistake as a
        one-line ``ValueError``: the device, the numbers, then the output path (which must be writable
        before any long work starts)."""
        if args.model:
            device = resolve_device(args.device)
            config: Union[BenchConfig, ModelBenchConfig] = ModelBenchConfig(
                size=args.model_size,
                dtypes=tuple(args.dtypes or ("float32", "bfloat16")),
                repeats=3 if args.repeats is None else parse_count("--repeats", args.repeats, 1),
                warmup=1 if args.warmup is None else parse_count("--warmup", args.warmup, 0),
                decode_tokens=parse_count("--decode-tokens", args.decode_tokens, 1),
                device=device,
            )
            out = args.json or Path("bench-model.json")
        else:
            config = config_from_args(args)
            out = args.json or Path("bench-rope.json")
        check_writable(out)
        return cls(config=config, out=out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="decode and prefill-4k, float32: under two minutes on 2 CPU cores"
    )
    parser.add_argument(
        "--shapes",
        nargs="+",
        choices=list(SHAPES),
        default=None,
        help=f"cases to run (default {' '.join(FULL_SHAPES)}; --quick: {' '.join(QUICK_SHAPES)}; "
        "'tiny' is a small smoke-test shape)",
    )
    parser.add_argument(
        "--dtypes",
        nargs="+",
        choices=list(DTYPES),
        default=None,
        help="element types (default float32 bfloat16; --quick: float32)",
    )
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--device", default="auto", help="cpu, cuda, or auto (cuda when available)")
    parser.add_argument("--repeats", default=None, help="timed repeats (default 9; --model: 3)")
    parser.add_argument("--warmup", default=None, help="untimed calls before timing (default 2; --model: 1)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile row")
    parser.add_argument(
        "--qk-layout",
        choices=list(QK_LAYOUTS),
        default="auto",
        help="q/k memory: 'transformers' (transposes of (B, S, H, D) buffers), 'contiguous'; "
        "auto: transformers on CUDA, contiguous on CPU",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="where to write the results (default: bench-rope.json; --model: bench-model.json)",
    )
    parser.add_argument(
        "--model",
        action="store_true",
        help="instead of kernels: a wide tiny Llama (hidden 4096, 32 heads, 8 kv heads, 2 layers, "
        "2048 tokens), unpatched vs patched by posenc.integrations.transformers",
    )
    parser.add_argument(
        "--model-size",
        choices=list(MODEL_SIZES),
        default="wide",
        help="'wide' (default) or 'tiny' (a seconds-long smoke test)",
    )
    parser.add_argument("--decode-tokens", default="8", help="--model: tokens generated for the decode row (default 8)")


def parse_count(flag: str, text: object, minimum: int) -> int:
    """An integer flag value in [minimum, MAX_COUNT], or ValueError with a one-line message."""
    text = str(text)
    if len(text) > 40:  # the message stays one line, and int() is never asked for thousands of digits
        raise ValueError(
            f"{flag} must be a whole number >= {minimum} and <= {MAX_COUNT}, got {len(text)} characters "
            f"starting {text[:12]!r}"
        )
    try:
        value = int(text, 10)
    except ValueError:
        raise ValueError(f"{flag} must be a whole number, got {text!r}") from None
    if not minimum <= value <= MAX_COUNT:
        raise ValueError(f"{flag} must be >= {minimum} and <= {MAX_COUNT}, got {value}")
    return value


def check_writable(path: Path) -> None:
    """Raise ValueError (one line) unless ``path`` can be written, before any long work starts."""
    try:
        if path.is_dir():
            raise ValueError(f"--json {path} is a folder; give a file name")
        existed = path.exists()  # both raise OSError for a name too long, not only False
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a"):
            pass
    except OSError as exc:
        raise ValueError(f"--json {path} cannot be written: {exc.strerror or exc}") from None
    if not existed:
        path.unlink()


def resolve_device(text: str) -> str:
    """``--device``: cpu, cuda (when torch sees one), or auto (cuda when available); else ValueError."""
    device = text
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in DEVICES:
        raise ValueError(f"--device must be cpu, cuda or auto, got {text!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch.cuda.is_available() is False")
    return device


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """The kernel rows' settings from ``args``; ``--quick`` changes the defaults of the shapes, the
    dtypes and the sample length."""
    device = resolve_device(args.device)
    repeats = 9 if args.repeats is None else parse_count("--repeats", args.repeats, 1)
    warmup = 2 if args.warmup is None else parse_count("--warmup", args.warmup, 0)
    return BenchConfig(
        shapes=tuple(args.shapes or (QUICK_SHAPES if args.quick else FULL_SHAPES)),
        dtypes=tuple(args.dtypes or (("float32",) if args.quick else ("float32", "bfloat16"))),
        modes=tuple(args.modes),
        device=device,
        repeats=repeats,
        warmup=warmup,
        min_sample_s=5e-3 if args.quick else 1e-2,
        compile=not args.no_compile,
        quick=args.quick,
        qk_layout=resolve_layout(getattr(args, "qk_layout", "auto"), device),
    )


def resolve_layout(layout: str, device: str) -> str:
    """``--qk-layout``: auto is transformers' layout on CUDA and contiguous on CPU."""
    if layout not in QK_LAYOUTS:
        raise ValueError(f"--qk-layout must be one of {list(QK_LAYOUTS)}, got {layout!r}")
    if layout == "auto":
        return "transformers" if device == "cuda" else "contiguous"
    return layout
