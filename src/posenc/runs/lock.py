"""An exclusive lock on a run folder, held by the one process that writes in it."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Optional

#: what a lock file holds: the holder, written by the process that holds it
_RECORD = re.compile(rb"\Aprocess \d{1,20}\n?\Z")
#: the most bytes of a lock file read (a record is a short line)
_RECORD_BYTES = 64


class FolderBusy(Exception):
    """Another process holds the run folder's lock; the message says which (``process 1234``)."""


class LockRefused(Exception):
    """The lock path is not a lock file posenc may use (a link, a folder, a FIFO, a file with other
    content or other names); the message names the path, what it is, and what to do."""


class RunLock:
    """An exclusive ``fcntl.flock`` lock on the file ``root / name``, held while one process runs in
    the folder.

    ``flock`` locks belong to the open file: the kernel drops them when the process ends, however it
    ends (Ctrl-C, SIGKILL, a crash), so a stale lock file never blocks a later run. Where ``fcntl``
    does not exist (Windows) no lock is taken.

    The file is opened in one step that follows no symbolic link (``O_NOFOLLOW``), blocks on nothing
    (``O_NONBLOCK``: a FIFO cannot hang it) and creates the file if missing; what was opened is then
    checked on the descriptor itself (``fstat``): anything but a regular file with one name is refused
    with :class:`LockRefused`, so a hard link to another file is never written. The holder's line
    (``process 1234``) is written only into a file this process created or one that holds nothing but
    such a line; a file with other content is refused, never truncated.
    """

    def __init__(self, root: Path, name: str):
        self.path = Path(root) / name
        self._fd: Optional[int] = None

    def _refuse(self, what: str) -> LockRefused:
        return LockRefused(
            f"the lock file {str(self.path)!r} {what}; posenc locks only a plain file of its own there. "
            "Remove it or choose another folder"
        )

    def _open(self) -> "tuple[int, bool]":
        """``(descriptor, created)`` of the lock file, opened without following a link or blocking."""
        flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            return os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o666), True
        except FileExistsError:
            pass
        except OSError as err:
            raise self._refuse(f"cannot be created ({err.strerror or err})") from None
        try:
            return os.open(self.path, flags), False
        except OSError as err:
            if err.errno == errno.ELOOP or self.path.is_symlink():
                raise self._refuse("is a symbolic link") from None
            if err.errno == errno.EISDIR:
                raise self._refuse("is a folder") from None
            raise self._refuse(f"cannot be opened ({err.strerror or err})") from None

    def _check(self, fd: int, created: bool) -> None:
        """Refuse what ``fd`` opened unless it is a regular file with one link holding at most a record."""
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise self._refuse("is a folder")
        if not stat.S_ISREG(info.st_mode):
            raise self._refuse("is not a regular file (a FIFO, a socket or a device)")
        if info.st_nlink != 1:
            raise self._refuse(f"has {info.st_nlink} names (a hard link to another file)")
        if not created:
            held = os.pread(fd, _RECORD_BYTES + 1, 0)
            if held and not _RECORD.match(held):
                raise self._refuse("holds something other than a posenc lock record")

    def acquire(self) -> "RunLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self
        fd, created = self._open()
        try:
            self._check(fd, created)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                raise FolderBusy(holder) from None
            os.ftruncate(fd, 0)  # a file this process created, or one holding only an earlier holder's line
            os.pwrite(fd, f"process {os.getpid()}\n".encode("ascii"), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
