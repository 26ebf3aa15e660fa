"""The lab's side of its run folder: the lock a running process holds on it, and whether a folder is
a lab run at all.

The folder's layout, its run files and checkpoints, and the reader of a trained model live in the
run-file layer (:mod:`posenc.runs.lab_run`), since the lesson reads a run's model too; they are
re-exported here, where the lab's modules and tests import them.
"""

from __future__ import annotations

from pathlib import Path

from ...runs import FolderBusy as FolderBusy  # re-exported: the lab cli and its tests catch it here
from ...runs import LockRefused as LockRefused
from ...runs import RunLock as _FolderLock
from ...runs import atomic_write_bytes as atomic_write_bytes
from ...runs import atomic_write_text as atomic_write_text
from ...runs import remove_temporaries as remove_temporaries
from ...runs import save_figure as save_figure
from ...runs import write_json as write_json
from ...runs.lab_run import CHECKPOINT_KEYS as CHECKPOINT_KEYS
from ...runs.lab_run import RunDir as RunDir
from ...runs.lab_run import load_checkpoint as load_checkpoint
from ...runs.lab_run import read_run_file as read_run_file
from ...runs.lab_run import save_checkpoint as save_checkpoint
from ...runs.lab_run import write_run_file as write_run_file
from .schema import RunFileError

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
