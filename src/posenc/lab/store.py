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

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

import torch


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode("utf-8"))


def read_json(path: Path, default: Any = None) -> Any:
    path = Path(path)
    if not path.exists():
        return default
    return json.loads(path.read_text(encoding="utf-8"))


def save_checkpoint(path: Path, state: dict) -> None:
    """``torch.save`` to a temporary file, then ``os.replace`` into ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path: Path) -> Optional[dict]:
    path = Path(path)
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=False)


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

    def progress(self) -> dict:
        return read_json(self.root / "progress.json", default={"eval": {}, "extension": {}})

    def save_progress(self, progress: dict) -> None:
        write_json(self.root / "progress.json", progress)
