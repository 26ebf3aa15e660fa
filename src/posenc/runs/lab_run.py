"""A lab run folder as every app reads it: its layout, its checkpoints, and the trained model of a scheme.

Layout of a run folder::

    config.json            the resolved LabConfig (what --resume continues)
    corpus.json            where the text came from and the split's fingerprint
    checkpoints/<scheme>.pt  model + optimizer + step (+ loss log), rewritten during training
    progress.json          finished evaluation/extension steps, rewritten after each one
    results.json           the agreed results shape, rewritten after each step
    results.md, *.png      the report

The lab writes these files (``posenc.measuring.lab``); its export and the lesson's attention map read
a trained model back from them (:func:`read_run_model`), so the reader lives here, below both apps.
Every file is written to a temporary name in the same folder and moved into place with
``os.replace`` (:mod:`posenc.runs.files`): a crash leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import torch

from .._checks import check_int
from ..model import ModelConfig, TinyLM
from .files import CORRUPT_FILE_ERRORS, atomic_write_bytes, write_json
from .lab_schema import SCHEMA_VERSION, Progress, RunFileError, load_json_file, stamp


def write_run_file(path: Path, kind: str, content: dict) -> None:
    """Write a run file of ``kind`` with its schema stamp (:func:`posenc.runs.lab_schema.stamp`)."""
    write_json(path, stamp(kind, content))


def read_run_file(path: Path, kind: str) -> Optional[dict]:
    """The checked content of a run file (stamp removed), ``None`` if absent; a broken file raises
    :class:`~posenc.runs.lab_schema.RunFileError` with one line naming it and what to do."""
    return load_json_file(path, kind)


#: Keys of a lab checkpoint; every value is a tensor, a container of tensors or plain data, so it
#: loads with ``torch.load(weights_only=True)``.
CHECKPOINT_KEYS = {
    "schema_version",
    "model",
    "optimizer",
    "step",
    "losses",
    "model_config",
    "seconds",
    "cpu_seconds",
    "lr",
}


def save_checkpoint(path: Path, state: dict) -> None:
    """``torch.save`` into memory, then written atomically (:func:`posenc.runs.atomic_write_bytes`).

    ``state`` may hold only :data:`CHECKPOINT_KEYS`, and its values only tensors and plain data
    (checked by loading nothing but those back); the schema version is added."""
    unknown = set(state) - CHECKPOINT_KEYS
    if unknown:
        raise ValueError(f"checkpoint state has keys {sorted(unknown)}; allowed: {sorted(CHECKPOINT_KEYS)}")
    buffer = io.BytesIO()
    torch.save({"schema_version": SCHEMA_VERSION, **state}, buffer)
    atomic_write_bytes(Path(path), buffer.getvalue())


def load_checkpoint(path: Path) -> Optional[dict]:
    """A checkpoint written by :func:`save_checkpoint`, ``None`` if absent.

    Loads with ``torch.load(weights_only=True)``: PyTorch's restricted unpickler builds tensors and
    plain containers only, so a crafted file cannot run code; it is refused with a
    :class:`~posenc.runs.lab_schema.RunFileError`, as is a truncated or corrupt file or one of another
    version.
    """
    path = Path(path)
    if not path.exists():
        return None
    advice = "delete it to retrain that scheme (`posenc lab --resume RUN` then does only that)"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        if found:
            raise RunFileError(
                path,
                f"is not a plain-data checkpoint and was not loaded (nothing in "
                f"it ran): it refers to the Python object {found.group(1)}, "
                f"which a checkpoint of tensors never does",
                advice,
            ) from None
        detail = re.search(r"WeightsUnpickler error:\s*(.+)", text)
        raise RunFileError(
            path,
            f"is truncated or corrupt (not a readable torch checkpoint: "
            f"{_first_sentence(detail.group(1) if detail else text)})",
            advice,
        ) from None
    except CORRUPT_FILE_ERRORS as err:
        raise RunFileError(
            path, f"is truncated or corrupt ({type(err).__name__}: {_first_sentence(str(err))})", advice
        ) from None
    if not isinstance(state, dict):
        raise RunFileError(path, f"holds a {type(state).__name__}, not a lab checkpoint", advice)
    version = state.get("schema_version", 1)
    if version != SCHEMA_VERSION:
        raise RunFileError(
            path, f"is a run-file version {version!r} checkpoint; this posenc reads version {SCHEMA_VERSION}", advice
        )
    missing = {"model", "optimizer", "step", "losses", "model_config"} - set(state)
    if missing or not isinstance(state.get("step"), int) or not isinstance(state.get("model"), dict):
        raise RunFileError(
            path, f"is not a complete lab checkpoint (missing {sorted(missing)} or a malformed step/model)", advice
        )
    return state


def _first_sentence(text: str, limit: int = 120) -> str:
    """The first line and sentence of an error message, for a one-line report."""
    text = text.strip().splitlines()[0] if text.strip() else "no detail"
    return text.split(". ")[0][:limit]


class RunDir:
    """Paths and the finished-work record of one run folder."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.config_path = self.root / "config.json"
        self.results_path = self.root / "results.json"
        self.progress_path = self.root / "progress.json"
        self.corpus_path = self.root / "corpus.json"

    def checkpoint_path(self, scheme: str) -> Path:
        return self.root / "checkpoints" / f"{scheme}.pt"

    def progress(self) -> Progress:
        stored = read_run_file(self.progress_path, "progress")
        return Progress() if stored is None else Progress.from_dict(stored, self.progress_path)

    def save_progress(self, progress: Progress) -> None:
        write_run_file(self.progress_path, "progress", progress.to_dict())


#: The fields of a run's config that its models take by the same name (:class:`~posenc.model.ModelConfig`).
SHARED_MODEL_FIELDS = ("d_model", "n_layers", "n_heads", "mlp_ratio", "rope_base")
#: The fields of a run's ``config.json`` that say what model each scheme trained, and how long.
MODEL_FIELDS = (*SHARED_MODEL_FIELDS, "train_len", "steps")


def lab_model_config(config: Mapping[str, Any], scheme: str) -> ModelConfig:
    """The :class:`~posenc.model.ModelConfig` of ``scheme``'s model in a run of ``config`` (the
    fields of ``config.json``, or a ``LabConfig``'s); a learned table has ``train_len`` rows."""
    shared = {name: config[name] for name in SHARED_MODEL_FIELDS}
    return ModelConfig(scheme=scheme, max_len=config["train_len"], **shared)


class RunModelError(ValueError):
    """A run folder whose trained model of a scheme cannot be read: the message names the folder or
    file and what is wrong."""


@dataclass(frozen=True)
class TrainedRun:
    """One scheme's model of a run folder (in eval mode), the run's training length, and the step its
    checkpoint reached of the ``steps`` the run asked for (fewer when training was interrupted)."""

    model: TinyLM
    train_len: int
    step: int
    steps: int


def read_run_model(
    run: Path, scheme: str, *, check_config: Optional[Callable[[dict], Mapping[str, Any]]] = None
) -> TrainedRun:
    """The trained ``scheme`` model of the lab run folder ``run``.

    ``check_config`` (the lab's ``LabConfig.from_dict``, as a dict) may check the whole ``config.json``
    first and return its fields with the defaults of those the file leaves out; the model is then built
    from what it returns, and its ``TypeError`` or ``ValueError`` is reported with the file. Without it
    the fields that describe the model (:data:`MODEL_FIELDS`) are read from the file as they stand and
    checked.

    Raises:
        RunModelError: no such folder, no readable ``config.json``, no checkpoint of ``scheme``, a
            checkpoint of another model than the config describes, or a broken file.
    """
    rd = RunDir(Path(run))
    if not rd.root.is_dir():
        raise RunModelError(f"RUN {str(run)!r}: no such folder; give a folder made by `posenc lab`")
    try:
        stored = read_run_file(rd.config_path, "config")
    except RunFileError as err:
        raise RunModelError(str(err)) from None
    if stored is None:
        raise RunModelError(f"RUN {str(run)!r}: no config.json there; give a folder made by `posenc lab`")
    try:
        fields = stored if check_config is None else check_config(stored)
        missing = [name for name in MODEL_FIELDS if name not in fields]
        if missing:
            raise ValueError(f"config has no field {', '.join(missing)}")
        check_int("train_len", fields["train_len"], minimum=1)
        check_int("steps", fields["steps"], minimum=1)
        ckpt = load_checkpoint(rd.checkpoint_path(scheme))
    except RunFileError as err:
        raise RunModelError(str(err)) from None
    except (TypeError, ValueError) as err:
        raise RunModelError(f"{rd.config_path}: {err}") from None
    if ckpt is None:
        trained = sorted(p.stem for p in (rd.root / "checkpoints").glob("*.pt"))
        raise RunModelError(
            f"RUN {str(run)!r} has no checkpoint of scheme {scheme!r} (it has: {', '.join(trained) or 'none'})"
        )
    try:
        with torch.random.fork_rng(devices=[]):  # the weights come from the file: leave the caller's RNG be
            model = TinyLM(lab_model_config(fields, scheme))
    except (TypeError, ValueError) as err:
        raise RunModelError(f"{rd.config_path}: {err}") from None
    if ckpt.get("model_config") != model.config.to_dict():
        raise RunModelError(
            f"{rd.checkpoint_path(scheme)} was made with model config {ckpt.get('model_config')}, "
            f"this posenc builds {model.config.to_dict()}"
        )
    model.load_state_dict(ckpt["model"])
    return TrainedRun(model.eval(), fields["train_len"], ckpt["step"], fields["steps"])
