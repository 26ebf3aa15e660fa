"""Every knob of a lab run in one dataclass, and the named presets.

The presets were sized by measurement on a 2-core CPU (``docs/lab.md``, Time, states what each
costs): ``smoke`` is a machinery check for tests (its numbers carry no meaning), ``quick`` the small
table, ``standard`` the published one. Any field can be
overridden from the command line; the resolved config is saved as ``config.json`` in the run folder
and is what ``--resume`` continues.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional

from ..._checks import check_choice, check_float, check_int
from ...factory import SCHEMES
from ...rope.registry import extension_types
from .passkey import MIN_LENGTH

#: RoPE context-extension methods the lab knows, in report order ("none" is plain RoPE): the rope
#: types an extension ratio sets (see posenc.rope.registry), as registered at import.
EXTENSION_METHODS = extension_types()

#: The largest value of each kind of field: the lab trains small models on a CPU, and past these a run
#: would end in an allocation failure or an overflow deep in torch instead of one line here. A seed is
#: what ``torch.manual_seed`` and numpy take (32 bits, with room for the offsets the lab adds); a
#: width, a depth, a sequence length and a batch are far past any model the lab could train; a
#: number of steps or trials is what float64 counts exactly.
MAX_SEED = 2**32 - 1
MAX_WIDTH = 1 << 14  # d_model
MAX_LAYERS = 1 << 10  # n_layers, n_heads, mlp_ratio
MAX_SIZE = 1 << 20  # train_len, batches, windows
MAX_COUNT = 2**53  # steps, trials, samples
MAX_TRIALS = 100_000  # bootstrap_samples and retrieval_trials: each plans its draws up front


@dataclass
class LabConfig:
    """A complete description of one lab run (model, data, training, evaluation, extension)."""

    preset: str = "quick"
    seed: int = 0
    schemes: List[str] = field(default_factory=lambda: list(SCHEMES))
    # data
    data: Optional[str] = None  # None = the Python standard library
    pattern: Optional[str] = None  # glob inside a folder ("*.py" for the stdlib)
    val_fraction: float = 0.1  # share of files (by path hash) held out
    # model (identical for every scheme)
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    mlp_ratio: int = 4
    rope_base: float = 10000.0
    # training
    train_len: int = 64  # bytes per training sequence
    batch_size: int = 32  # global batch (split across torchrun processes)
    steps: int = 300
    lr: float = 3e-3  # peak learning rate
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio
    warmup_steps: int = 30
    weight_decay: float = 0.1  # on matrices only, not on LayerNorm gains
    grad_clip: float = 1.0
    checkpoint_every: int = 50  # steps between training checkpoints
    # evaluation
    eval_multipliers: List[int] = field(default_factory=lambda: [1, 2, 4, 8])
    eval_windows: int = 64  # fixed validation windows (bootstrap unit)
    eval_batch: int = 16
    final_bytes: int = 32  # the tail compared at every length
    bootstrap_samples: int = 2000
    learned_beyond: str = "interpolate"  # "interpolate" (LearnedPositionalEmbedding.extend) or "cannot"
    # context extension of the RoPE model
    extension: bool = True
    extension_methods: List[str] = field(default_factory=lambda: list(EXTENSION_METHODS))
    finetune: bool = False
    finetune_steps: int = 60
    finetune_batch: int = 8
    finetune_lr: float = 3e-4
    # passkey retrieval (posenc.measuring.lab.passkey)
    retrieval_share: float = 0.5  # share of training steps that train on passkey sequences
    retrieval_trials: int = 64  # evaluation trials per (length, distance bin); 0 = none
    retrieval_answer_weight: float = 5.0  # weight of the answer-byte loss added on passkey steps
    finetune_retrieval_share: float = 0.0  # share of fine-tune steps on passkey sequences (0 = plain text)
    # fair training: sweep the peak learning rate per scheme before training (empty = one shared lr)
    lr_sweep: List[float] = field(default_factory=list)
    sweep_steps: int = 0  # steps per sweep run (0 = a fifth of `steps`)

    def validate(self) -> "LabConfig":
        check_int("seed", self.seed, minimum=0, maximum=MAX_SEED)
        if not self.schemes:
            raise ValueError("schemes must name at least one scheme, got an empty list")
        for name in self.schemes:
            check_choice("schemes", name, set(SCHEMES))
        if len(set(self.schemes)) != len(self.schemes):
            raise ValueError(f"schemes must not repeat a name, got {self.schemes}")
        check_float("val_fraction", self.val_fraction, greater_than=0.0, maximum=0.5)
        for names, top in (
            (("d_model",), MAX_WIDTH),
            (("n_layers", "n_heads", "mlp_ratio"), MAX_LAYERS),
            (("train_len", "batch_size", "eval_windows", "eval_batch", "final_bytes", "finetune_batch"), MAX_SIZE),
            (("steps", "checkpoint_every", "finetune_steps"), MAX_COUNT),
            (("bootstrap_samples",), MAX_TRIALS),
        ):
            for name in names:
                check_int(name, getattr(self, name), minimum=1, maximum=top)
        check_float("retrieval_share", self.retrieval_share, minimum=0.0, maximum=0.5)
        check_float("finetune_retrieval_share", self.finetune_retrieval_share, minimum=0.0, maximum=0.5)
        check_int("retrieval_trials", self.retrieval_trials, minimum=0, maximum=MAX_TRIALS)
        check_float("retrieval_answer_weight", self.retrieval_answer_weight, minimum=0.0, maximum=100.0)
        if (self.retrieval_share > 0 or self.retrieval_trials > 0) and self.train_len < MIN_LENGTH:
            raise ValueError(
                f"train_len must be >= {MIN_LENGTH} for passkey retrieval (the plant and "
                f"the query take {MIN_LENGTH - 1} bytes), got {self.train_len}; set "
                f"retrieval_share and retrieval_trials to 0 for shorter sequences"
            )
        check_int("warmup_steps", self.warmup_steps, minimum=0, maximum=self.steps)
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"d_model={self.d_model} / n_heads={self.n_heads} must give an even head size (RoPE rotates pairs)"
            )
        for name in ("lr", "finetune_lr"):
            check_float(name, getattr(self, name), greater_than=0.0, maximum=1.0)
        check_float("min_lr_ratio", self.min_lr_ratio, minimum=0.0, maximum=1.0)
        check_float("weight_decay", self.weight_decay, minimum=0.0)
        check_float("grad_clip", self.grad_clip, greater_than=0.0)
        check_float("rope_base", self.rope_base, greater_than=1.0)
        if (
            not self.eval_multipliers
            or self.eval_multipliers[0] != 1
            or any(
                isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_SIZE for m in self.eval_multipliers
            )
            or sorted(set(self.eval_multipliers)) != list(self.eval_multipliers)
        ):
            raise ValueError(
                f"eval_multipliers must be increasing integers starting at 1 "
                f"(1 = the training length), got {self.eval_multipliers}"
            )
        check_int("final_bytes", self.final_bytes, maximum=self.train_len)
        check_choice("learned_beyond", self.learned_beyond, {"interpolate", "cannot"})
        if len(set(self.lr_sweep)) != len(self.lr_sweep):
            raise ValueError(f"lr_sweep must not repeat a rate, got {self.lr_sweep}")
        for rate in self.lr_sweep:
            check_float("lr_sweep", rate, greater_than=0.0, maximum=1.0)
        check_int("sweep_steps", self.sweep_steps, minimum=0, maximum=self.steps)
        for name in self.extension_methods:
            check_choice("extension_methods", name, set(extension_types()))
        return self

    @property
    def resolved_sweep_steps(self) -> int:
        return self.sweep_steps or max(1, self.steps // 5)

    @property
    def eval_lengths(self) -> List[int]:
        return [m * self.train_len for m in self.eval_multipliers]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "LabConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"config has unknown fields {unknown}; allowed: {sorted(known)}")
        values = dict(values)
        methods = values.get("extension_methods")
        if isinstance(methods, list):  # run folders written before the method took its rope type's name
            values["extension_methods"] = [LEGACY_METHODS.get(m, m) if isinstance(m, str) else m for m in methods]
        return cls(**values).validate()


#: Extension-method names stored by earlier versions, and the name each has now.
LEGACY_METHODS = {"dynamic_ntk": "dynamic"}

#: Each preset as the fields it sets apart from :class:`LabConfig`'s defaults (the model 128 wide, 4
#: layers of 4 heads, 64-byte sequences in batches of 32 for 300 steps at lr 3e-3, 64 windows).
PRESETS: Dict[str, Dict[str, Any]] = {
    # A machinery check: exercises every code path, numbers mean nothing.
    "smoke": dict(
        d_model=32,
        n_layers=2,
        n_heads=2,
        train_len=32,
        batch_size=8,
        steps=40,
        warmup_steps=5,
        checkpoint_every=10,
        eval_windows=16,
        bootstrap_samples=200,
        finetune_steps=8,
        finetune_batch=4,
        retrieval_trials=12,
    ),
    # The small table (its cost: docs/lab.md, Time): the defaults, except that 300 steps come before a
    # model learns to copy the key under any mix measured (docs/lab.md), so the quick preset keeps the
    # lighter passkey mix, which costs less in-distribution perplexity.
    "quick": dict(retrieval_share=0.2, retrieval_answer_weight=1.0),
    # The lesson's trained models (posenc.teaching.lesson.trained): one small model per scheme (about 0.5 MB of
    # float32 weights each), no extension and no passkey steps, evaluated at 1, 2 and 4 times the training
    # length, a learned table not past its rows; benchmarks/lesson_models.py trains and packages them (its
    # cost: docs/lab.md, "The lesson's models").
    "lesson": dict(
        schemes=["nope", "sinusoidal", "learned", "rope", "alibi"],  # the schemes the lesson's chapters teach
        d_model=64,
        n_layers=2,
        train_len=128,
        batch_size=16,
        steps=1200,
        warmup_steps=100,
        checkpoint_every=100,
        eval_multipliers=[1, 2, 4],
        eval_windows=32,
        eval_batch=8,
        bootstrap_samples=500,
        learned_beyond="cannot",
        extension=False,
        retrieval_share=0.0,
        retrieval_trials=0,
    ),
    # The published table (an hour or more on 2 CPU cores; see docs/lab.md).
    "standard": dict(
        train_len=128,
        steps=1000,
        warmup_steps=100,
        checkpoint_every=100,
        eval_windows=128,
        finetune_steps=150,
        retrieval_trials=100,
    ),
}


def preset_config(name: str, **overrides) -> LabConfig:
    """The preset ``name`` with ``overrides`` (field name -> value) applied, validated."""
    check_choice("preset", name, set(PRESETS))
    values: Dict[str, Any] = dict(PRESETS[name], preset=name)
    known = {f.name for f in fields(LabConfig)}
    for key, value in overrides.items():
        if key not in known:
            raise ValueError(f"unknown config field {key!r}; allowed: {sorted(known)}")
        values[key] = value
    return LabConfig(**values).validate()
