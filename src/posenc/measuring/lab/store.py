"""The run folder: atomic writes, checkpoints and the record of finished work.

Layout of a run folder::

    config.json            the resolved LabConfig (what --resume continues)
    corpus.json            where the text came from and the split's fingerprint
    checkpoints/<scheme>.pt  model + optimizer + step (+ loss log), rewritten during training
    progress.json          finished evaluation/extension steps, rewritten after each one
    results.json           the agreed results shape, rewritten after each step
    results.md, *.png      the report

Every file is written to a temporary name in the same folder and moved into place with
``os.replace``, which is atomic on POSIX and Windows: a crash leaves the old file or the new one,
never half of one.
"""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import Optional

import torch

from ...runs import CORRUPT_FILE_ERRORS
from ...runs import FolderBusy as FolderBusy  # re-exported: the lab cli and its tests catch it here
from ...runs import RunLock as _FolderLock
from ...runs import atomic_write_bytes as atomic_write_bytes
from ...runs import write_json as write_json
from .schema import SCHEMA_VERSION, Progress, RunFileError, load_json_file, stamp


def write_run_file(path: Path, kind: str, content: dict) -> None:
    """Write a run file of ``kind`` with its schema stamp (:func:`posenc.measuring.lab.schema.stamp`)."""
    write_json(path, stamp(kind, content))


def read_run_file(path: Path, kind: str) -> Optional[dict]:
    """The checked content of a run file (stamp removed), ``None`` if absent; a broken file raises
    :class:`~posenc.measuring.lab.schema.RunFileError` with one line naming it and what to do."""
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
    :class:`~posenc.measuring.lab.schema.RunFileError`, as is a truncated or corrupt file or one of another
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


#: The lock file of a run folder: held (``fcntl.flock``) by the process that runs in it.
LOCK_NAME = ".posenc-lab.lock"


class RunLock(_FolderLock):
    """The lab's lock on a run folder (:class:`posenc.runs.RunLock` on :data:`LOCK_NAME`), held while
    one process runs in it; a second raises :class:`~posenc.runs.FolderBusy` naming the holder."""

    def __init__(self, root: Path):
        super().__init__(root, LOCK_NAME)


def is_lab_run(root: Path) -> bool:
    """Whether ``root`` holds a run of this lab: a ``config.json`` that carries the lab's schema
    stamp (``kind`` "config", this schema version) and is a real file, not a link."""
    path = Path(root) / "config.json"
    if path.is_symlink() or not path.is_file():
        return False
    try:
        return read_run_file(path, "config") is not None
    except RunFileError:
        return False


class RunDir:
    """Paths and the finished-work record of one run folder."""

    def __init__(self, root: Path):
        self.root = Path(root)

    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    @property
    def results_path(self) -> Path:
        return self.root / "results.json"

    def checkpoint_path(self, scheme: str) -> Path:
        return self.root / "checkpoints" / f"{scheme}.pt"

    @property
    def progress_path(self) -> Path:
        return self.root / "progress.json"

    @property
    def corpus_path(self) -> Path:
        return self.root / "corpus.json"

    def progress(self) -> Progress:
        stored = read_run_file(self.progress_path, "progress")
        return Progress() if stored is None else Progress.from_dict(stored, self.progress_path)

    def save_progress(self, progress: Progress) -> None:
        write_run_file(self.progress_path, "progress", progress.to_dict())
