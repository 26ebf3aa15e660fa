"""An exclusive lock on a run folder, held by the one process that writes in it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Optional


class FolderBusy(Exception):
    """Another process holds the run folder's lock; the message says which (``process 1234``)."""


class RunLock:
    """An exclusive ``fcntl.flock`` lock on the file ``root / name``, held while one process runs in
    the folder.

    ``flock`` locks belong to the open file: the kernel drops them when the process ends, however it
    ends (Ctrl-C, SIGKILL, a crash), so a stale lock file never blocks a later run. Where ``fcntl``
    does not exist (Windows) no lock is taken.
    """

    def __init__(self, root: Path, name: str):
        self.path = Path(root) / name
        self._fh: Optional[IO[str]] = None

    def acquire(self) -> "RunLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self
        if self.path.is_symlink():
            raise FolderBusy(f"{self.path} is a symbolic link; posenc locks only a file of its own")
        fh = open(self.path, "a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read(200).strip() or "another process"
            fh.close()
            raise FolderBusy(holder) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"process {os.getpid()}\n")
        fh.flush()
        self._fh = fh
        return self

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing drops the lock
            self._fh = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
