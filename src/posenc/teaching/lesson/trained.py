"""The lesson's trained models: one small byte-level TinyLM per position scheme, shipped with posenc.

``posenc lab --preset lesson`` trains them on the Python standard library's sources (the lab's real
corpus), and ``python benchmarks/lesson_models.py`` runs that and packages the result in
``posenc/teaching/lesson/models/``:

====================  ==============================================================================
``<scheme>.pt``       one model: its :class:`~posenc.model.ModelConfig`, its weights (float32) and
                      its training length; tensors and plain data only, read with
                      ``torch.load(weights_only=True)``
``windows.pt``        the validation windows the summary was measured on: (windows, span + 1) bytes
``summary.json``      what each model reaches (bits per byte at 1, 2 and 4 times its training
                      length), how it was trained, and the SHA-256 of every file above
====================  ==============================================================================

Reading them needs no network and draws no random numbers: a model is built on the meta device and
its weights are assigned from the file, so the global random state is never touched (the lesson's
figures are served from many threads at once). Every file is checked before it is used: its hash
against the summary, then its content (keys, types, shapes, finite values); a file that fails gets a
:class:`TrainedModelError` naming the file and what is wrong with it.

:func:`bits_per_byte` is the lab's validation metric (``posenc.measuring.lab.evaluate``: each window cut into
pieces of the evaluation length, each piece read from position 0, the mean over windows of the mean
loss in bits), so a test can recompute the summary's numbers from the shipped files.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import pickle
import re
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, cast

import torch
import torch.nn.functional as F

from ...factory import SCHEMES, make_scheme
from ...model import Block, ModelConfig, TinyLM
from ...runs import CORRUPT_FILE_ERRORS
from .attention import attention_weights, by_word

#: The folder the models ship in (package data).
MODELS_DIR = Path(__file__).resolve().parent / "models"
#: The command that trains and packages them (from the repository's root).
REGENERATE = "python benchmarks/lesson_models.py"
MODEL_FORMAT = "posenc-lesson-model"
SUMMARY_FORMAT = "posenc-lesson-models"
WINDOWS_FORMAT = "posenc-lesson-windows"
FORMAT_VERSION = 1
SUMMARY_NAME = "summary.json"
WINDOWS_NAME = "windows.pt"
#: Largest file this module reads (the models are well under 1 MB each).
MAX_FILE_BYTES = 8 << 20


class TrainedModelError(ValueError):
    """A packaged trained-model file that is missing, corrupt, crafted or of another format."""

    def __init__(self, path: Path, problem: str):
        self.path, self.problem = Path(path), problem
        super().__init__(f"{path}: {problem}; regenerate the lesson's models with `{REGENERATE}`")


def model_file_name(scheme: str) -> str:
    return f"{scheme}.pt"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# -- writing (the packaging command) -------------------------------------------------------------------
def model_payload(model: TinyLM, train_len: int) -> dict:
    """The content of a ``<scheme>.pt`` file for ``model`` (float32 copies of its weights)."""
    state = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in model.state_dict().items()}
    return {
        "format": MODEL_FORMAT,
        "version": FORMAT_VERSION,
        "scheme": model.config.scheme,
        "model_config": model.config.to_dict(),
        "train_len": int(train_len),
        "state": state,
    }


def windows_payload(windows: torch.Tensor) -> dict:
    """The content of ``windows.pt``: ``windows`` (windows, span + 1) uint8 bytes."""
    if windows.dtype != torch.uint8 or windows.ndim != 2:
        raise ValueError(f"windows must be a 2-D uint8 tensor, got {windows.dtype} of shape {tuple(windows.shape)}")
    return {"format": WINDOWS_FORMAT, "version": FORMAT_VERSION, "windows": windows.contiguous().clone()}


# -- reading -------------------------------------------------------------------------------------------
def _read_bytes(path: Path) -> bytes:
    if not path.is_file() or path.is_symlink():
        raise TrainedModelError(path, "no such file (or not a plain file)")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise TrainedModelError(path, f"is {size:,} bytes, more than the {MAX_FILE_BYTES:,} a lesson file may have")
    return path.read_bytes()


def _load_tensors(path: Path, data: bytes) -> Any:
    """``torch.load(weights_only=True)`` of ``data`` read from ``path``, with a clear error."""
    import io

    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        what = f"it refers to the Python object {found.group(1)}" if found else "it holds more than tensors"
        raise TrainedModelError(
            path, f"is not a plain-data file and was not loaded (nothing in it ran): {what}"
        ) from None
    except CORRUPT_FILE_ERRORS as err:
        first = str(err).strip().splitlines()[0][:120] if str(err).strip() else "no detail"
        raise TrainedModelError(path, f"is truncated or corrupt ({type(err).__name__}: {first})") from None


def _expect(path: Path, condition: bool, problem: str) -> None:
    if not condition:
        raise TrainedModelError(path, problem)


def _check_header(path: Path, content: Any, fmt: str) -> dict:
    _expect(path, isinstance(content, dict), f"holds a {type(content).__name__}, not a {fmt} file")
    _expect(path, content.get("format") == fmt, f"has format {content.get('format')!r}, expected {fmt!r}")
    _expect(
        path,
        content.get("version") == FORMAT_VERSION,
        f"is version {content.get('version')!r}; this posenc reads version {FORMAT_VERSION}",
    )
    return content


def _verified(path: Path, expected_sha: str) -> bytes:
    data = _read_bytes(path)
    found = hashlib.sha256(data).hexdigest()
    _expect(path, found == expected_sha, f"has SHA-256 {found[:16]}…, but {SUMMARY_NAME} lists {expected_sha[:16]}…")
    return data


def read_summary(folder: Path = MODELS_DIR) -> dict:
    """The checked content of ``summary.json`` in ``folder``."""
    path = Path(folder) / SUMMARY_NAME
    try:
        content = json.loads(_read_bytes(path).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TrainedModelError(path, f"is not valid JSON ({err})") from None
    except RecursionError:  # brackets nested past the parser's stack
        raise TrainedModelError(path, "nests its JSON too deeply to read") from None
    _check_header(path, content, SUMMARY_FORMAT)
    models = content.get("models")
    _expect(path, isinstance(models, dict) and bool(models), "has no models")
    for scheme, entry in models.items():
        _expect(path, scheme in SCHEMES, f"names scheme {scheme!r}; allowed: {list(SCHEMES)}")
        _expect(
            path,
            isinstance(entry, dict) and entry.get("file") == model_file_name(scheme),
            f"must list model {scheme!r} as file {model_file_name(scheme)!r}",
        )
        _expect(path, isinstance(entry.get("sha256"), str) and len(entry["sha256"]) == 64, f"{scheme}: no sha256")
        bpb = entry.get("bpb")
        _expect(path, isinstance(bpb, dict), f"{scheme}: no bpb table")
        for value in bpb.values():
            _expect(
                path, value is None or (isinstance(value, float) and math.isfinite(value)), f"{scheme}: bpb {value!r}"
            )
    windows = content.get("windows")
    _expect(path, isinstance(windows, dict) and windows.get("file") == WINDOWS_NAME, f"must list {WINDOWS_NAME}")
    _expect(path, isinstance(windows.get("sha256"), str) and len(windows["sha256"]) == 64, "windows: no sha256")
    lengths = content.get("eval_lengths")
    _expect(
        path,
        isinstance(lengths, list)
        and bool(lengths)
        and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in lengths),
        f"eval_lengths must be positive integers, got {lengths!r}",
    )
    return content


def read_windows(folder: Path = MODELS_DIR) -> torch.Tensor:
    """The summary's validation windows: (windows, span + 1) uint8, span the longest evaluation length."""
    summary = read_summary(folder)
    path = Path(folder) / WINDOWS_NAME
    content = _check_header(path, _load_tensors(path, _verified(path, summary["windows"]["sha256"])), WINDOWS_FORMAT)
    windows = content.get("windows")
    span = max(summary["eval_lengths"])
    if not (isinstance(windows, torch.Tensor) and windows.dtype == torch.uint8 and windows.ndim == 2):
        raise TrainedModelError(path, "windows must be a 2-D uint8 tensor")
    _expect(path, windows.shape[1] == span + 1, f"windows have {windows.shape[1]} bytes, expected {span + 1}")
    return windows


def read_model(scheme: str, folder: Path = MODELS_DIR) -> TinyLM:
    """The trained ``scheme`` model in ``folder`` (float32, eval mode), every file checked first."""
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {list(SCHEMES)}, got {scheme!r}")
    summary = read_summary(folder)
    entry = summary["models"].get(scheme)
    if entry is None:
        raise ValueError(f"scheme {scheme!r} has no trained model; trained: {sorted(summary['models'])}")
    path = Path(folder) / entry["file"]
    content = _check_header(path, _load_tensors(path, _verified(path, entry["sha256"])), MODEL_FORMAT)
    _expect(path, content.get("scheme") == scheme, f"holds scheme {content.get('scheme')!r}, not {scheme!r}")
    _expect(path, isinstance(content.get("train_len"), int) and content["train_len"] > 0, "has no train_len")
    fields = content.get("model_config")
    if not isinstance(fields, dict):
        raise TrainedModelError(path, "has no model_config")
    try:
        config = ModelConfig(**fields).validate()
    except (TypeError, ValueError) as err:
        raise TrainedModelError(path, f"has an invalid model_config ({err})") from None
    _expect(path, config.scheme == scheme, f"model_config is for scheme {config.scheme!r}, not {scheme!r}")
    state = content.get("state")
    if not isinstance(state, dict) or not state:
        raise TrainedModelError(path, "has no weights")
    for key, value in state.items():
        _expect(path, isinstance(value, torch.Tensor), f"weight {key!r} is not a tensor")
        _expect(path, value.dtype == torch.float32, f"weight {key!r} is {value.dtype}, not float32")
        _expect(path, bool(torch.isfinite(value).all()), f"weight {key!r} holds non-finite values")
    return _assemble(path, config, state)


def _assemble(path: Path, config: ModelConfig, state: Dict[str, torch.Tensor]) -> TinyLM:
    """A TinyLM with ``state``, built without drawing a random number.

    The position scheme is made on the CPU (only a learned table would draw random rows, so it is made
    on the meta device like the rest); every other weight starts on the meta device and is assigned
    from ``state``, so no initialiser ever runs on real memory.
    """
    kwargs: Dict[str, Any] = dict(d_model=config.d_model, n_heads=config.n_heads, max_len=config.max_len)
    kwargs.update(rope_base=config.rope_base, rotary_dim=config.rotary_dim, rope_layout=config.rope_layout)
    if config.scheme == "learned":
        with torch.device("meta"):
            scheme = make_scheme(config.scheme, **kwargs)
    else:
        scheme = make_scheme(config.scheme, **kwargs)
    with torch.device("meta"):
        model = TinyLM(config, scheme=scheme)
    expected = model.state_dict()
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    _expect(
        path,
        not missing and not unexpected,
        f"weights do not fit the model: missing {missing}, unexpected {unexpected}",
    )
    for key, value in state.items():
        want = tuple(expected[key].shape)
        _expect(path, tuple(value.shape) == want, f"weight {key!r} has shape {tuple(value.shape)}, expected {want}")
    model.load_state_dict(state, strict=True, assign=True)
    model.head.weight = model.tok.weight  # the tie, as TinyLM makes it
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    _expect(path, not left, f"leaves tensors without values: {left}")
    return model.eval()


@functools.lru_cache(maxsize=None)
def _cached_summary() -> dict:
    return read_summary(MODELS_DIR)


def summary() -> dict:
    """The packaged summary (read and checked once)."""
    return _cached_summary()


def trained_schemes() -> Tuple[str, ...]:
    """The schemes with a packaged model, in the library's order."""
    return tuple(s for s in SCHEMES if s in summary()["models"])


@functools.lru_cache(maxsize=None)
def _cached_model(scheme: str) -> TinyLM:
    return read_model(scheme, MODELS_DIR).double()


def model(scheme: str) -> TinyLM:
    """The packaged trained ``scheme`` model in float64 (read and checked once; share it read-only)."""
    return _cached_model(scheme)


@functools.lru_cache(maxsize=None)
def _cached_initial(scheme: str) -> TinyLM:
    lm = model(scheme)
    generator = torch.Generator().manual_seed(int(summary()["config"].get("seed", 0)))
    params = dict(lm.named_parameters())
    state = {}
    for key, value in lm.state_dict().items():
        if key not in params:  # a buffer: not trained, so as the trained model has it
            state[key] = value.to(torch.float32).clone()
        elif key.endswith(".bias"):
            state[key] = torch.zeros_like(value, dtype=torch.float32)
        elif value.ndim == 1:  # LayerNorm gains start at 1
            state[key] = torch.ones_like(value, dtype=torch.float32)
        else:  # every matrix, the token table and a learned position table: N(0, 0.02), as TinyLM draws them
            state[key] = torch.randn(value.shape, generator=generator, dtype=torch.float32) * 0.02
    return _assemble(MODELS_DIR / model_file_name(scheme), lm.config, state).double()


def initial_model(scheme: str) -> TinyLM:
    """The trained ``scheme`` model's architecture with weights as :class:`TinyLM` starts them (normal,
    std 0.02; LayerNorm gains 1), drawn from a generator of its own seeded with the lab's seed, in
    float64: the model before training, for comparison (not the exact draw the lab started from)."""
    return _cached_initial(scheme)


#: what the models read, by the file the lab was given (``None``: the standard library's sources)
ENGLISH_FILE = "english.txt"


def corpus() -> dict:
    """What the packaged models were trained on, in words: ``english`` (True for the English prose of
    ``pydoc_data.topics`` that ``benchmarks/lesson_models.py`` writes, False for Python sources),
    ``text`` (what it is), ``held_out`` (what the summary's windows are)."""
    data = summary()["config"].get("data")
    if data is not None and Path(data).name == ENGLISH_FILE:
        return {
            "english": True,
            "text": "English prose that ships with Python (the language reference of `pydoc_data.topics`, "
            "which `help()` shows)",
            "held_out": "held-out English",
        }
    return {"english": False, "text": "the Python standard library's sources", "held_out": "held-out Python"}


def train_len() -> int:
    """The length the packaged models were trained on (bytes)."""
    return int(summary()["train_len"])


# -- what the figures and tests compute ----------------------------------------------------------------
@torch.no_grad()
def bits_per_byte(model: TinyLM, windows: torch.Tensor, length: int) -> float:
    """The lab's validation bits per byte of ``model`` at evaluation length ``length``.

    Args:
        windows: (windows, span + 1) bytes; ``span`` is a multiple of ``length``. Each window is cut
            into ``span / length`` pieces; a piece's ``length`` targets are read with the byte before
            them as the first input, from position 0.

    Returns the mean over windows of each window's mean loss in bits, as ``posenc lab`` reports it.
    """
    span = windows.shape[1] - 1
    if not isinstance(length, int) or length < 1 or span % length:
        raise ValueError(f"length must be a positive divisor of the windows' span {span}, got {length!r}")
    if length > model.config.max_len and model.config.scheme == "learned":
        raise ValueError(f"length {length} is past the learned table's {model.config.max_len} rows")
    rows = windows.to(torch.int64)  # (W, span + 1)
    pieces = torch.stack([rows[:, c * length : c * length + length + 1] for c in range(span // length)], 1)
    flat = pieces.reshape(-1, length + 1)  # (W * P, L + 1): window by window, its pieces in order
    logits = model(flat[:, :-1])  # (W * P, L, 256)
    nats = F.cross_entropy(logits.float().transpose(1, 2), flat[:, 1:], reduction="none")  # (W * P, L), as the lab
    per_window = nats.to(torch.float64).reshape(rows.shape[0], -1).mean(1)  # (W,)
    return float(per_window.mean() / math.log(2.0))


def sentence_bytes(words: Sequence[str]) -> Tuple[torch.Tensor, List[Tuple[int, int]]]:
    """The bytes of ``words`` joined by single spaces (1, n) int64, and each word's span of bytes; the
    space before a word belongs to that word."""
    data, spans = b"", []
    for i, word in enumerate(words):
        start = len(data)
        data += (b" " if i else b"") + word.encode("utf-8")
        spans.append((start, len(data)))
    return torch.tensor([list(data)], dtype=torch.int64), spans


def check_fits(words: Sequence[str], name: str = "text") -> None:
    """Refuse a sentence longer, in bytes, than the models were trained on (a learned table has no
    row past it; the others would be read where they never were)."""
    n = sentence_bytes(words)[0].shape[1]
    if n > train_len():
        raise ValueError(
            f"{name} must be at most {train_len()} bytes for the trained models (their training length), "
            f"got {n}; shorten it or show the untrained block"
        )


@torch.no_grad()
def word_attention(lm: TinyLM, words: Sequence[str], layer: int = 0, causal: bool = True) -> torch.Tensor:
    """Word-by-word attention weights (W, W) of ``lm``'s layer ``layer`` reading ``words`` as bytes
    (heads averaged; folded per byte by :func:`~posenc.teaching.lesson.attention.by_word`, so a word's
    length alone does not raise its column)."""
    idx, spans = sentence_bytes(words)
    weights = layer_attention(lm, idx, layer, causal)  # (1, H, S, S)
    return by_word(weights[0].mean(0), spans, causal)


@torch.no_grad()
def layer_attention(lm: TinyLM, idx: torch.Tensor, layer: int = 0, causal: bool = True) -> torch.Tensor:
    """Attention weights (B, H, S, S) of ``lm``'s layer ``layer`` on byte ids ``idx`` (B, S), as the
    layer computes them inside the model's forward."""
    if not isinstance(layer, int) or not 0 <= layer < len(lm.blocks):
        raise ValueError(f"layer must be in [0, {len(lm.blocks)}), got {layer!r}")
    dtype = next(lm.parameters()).dtype
    pos = torch.arange(idx.shape[1]).unsqueeze(0)  # (1, S)
    x = lm.scheme.embed(lm.tok(idx).to(dtype) * lm.embed_scale, pos)  # (B, S, d)
    for block in list(lm.blocks)[:layer]:
        x = block(x, lm.scheme, pos, causal)
    block = cast(Block, lm.blocks[layer])
    return attention_weights(block.attn, block.norm1(x), lm.scheme, pos, causal=causal)


@torch.no_grad()
def word_outputs(lm: TinyLM, words: Sequence[str], causal: bool = False) -> torch.Tensor:
    """The model's final hidden state of each word (W, d_model), its bytes averaged."""
    idx, spans = sentence_bytes(words)
    hidden = lm.hidden_states(idx, causal=causal)[0]  # (S, d)
    return torch.stack([hidden[a:b].mean(0) for a, b in spans])


@torch.no_grad()
def attention_by_distance(lm: TinyLM, windows: torch.Tensor, length: int, layer: int = 0) -> torch.Tensor:
    """How much attention a query gives the key ``k`` bytes back, for ``k = 0 .. length - 1``, as a
    multiple of an even spread (a query at position ``q`` sees ``q + 1`` keys, so an even spread gives
    each ``1 / (q + 1)``; 1 means even): the causal weights of layer ``layer`` (heads averaged) on the
    first ``length`` bytes of every window, averaged over every query that has a key that far back.

    Returns shape (length,).
    """
    idx = windows[:, :length].to(torch.int64)  # (N, L)
    weights = layer_attention(lm, idx, layer, causal=True).mean(1)  # (N, L, L)
    q = torch.arange(length, dtype=weights.dtype).unsqueeze(1)  # (L, 1)
    ratio = weights * (q + 1)  # (N, L, L): each weight over an even spread's
    distance = torch.arange(length).unsqueeze(1) - torch.arange(length).unsqueeze(0)  # (L, L)
    return torch.stack([ratio[:, distance == d].mean() for d in range(length)])


__all__ = [
    "MODELS_DIR",
    "REGENERATE",
    "TrainedModelError",
    "attention_by_distance",
    "bits_per_byte",
    "check_fits",
    "corpus",
    "layer_attention",
    "initial_model",
    "model",
    "model_payload",
    "read_model",
    "read_summary",
    "read_windows",
    "sentence_bytes",
    "summary",
    "train_len",
    "trained_schemes",
    "windows_payload",
    "word_attention",
    "word_outputs",
]
