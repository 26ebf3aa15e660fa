"""Writing and reading one run file: atomically, stamped with its schema, and read with limits."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Dict, Iterable, List, Optional, Union

#: how the temporary file of an atomic write ends (``results.json.k3j2x9.tmp``)
TEMPORARY_SUFFIX = ".tmp"

#: the most bytes read from a run file an app wrote (they hold megabytes at most)
MAX_RUN_FILE_BYTES = 1 << 28

#: what ``torch.load(weights_only=True)`` raises on a truncated or corrupt file: its zip reader, unpickler
#: and tensor rebuilders each raise their own. A file that is not plain data raises
#: ``pickle.UnpicklingError`` instead, which a reader words apart (nothing in such a file ran).
CORRUPT_FILE_ERRORS = (
    RuntimeError,
    EOFError,
    OSError,
    ValueError,
    zipfile.BadZipFile,
    KeyError,
    AttributeError,
    TypeError,
    IndexError,
)


class ReadError(ValueError):
    """A run file that cannot be read: the message names the file, the problem and what to do;
    ``problem`` is the problem alone (``"is not a regular file"``), for an app that words the rest."""

    def __init__(self, message: str, problem: str = ""):
        super().__init__(message)
        self.problem = problem or message


def _umask() -> int:
    """The process's file-creation mask: read from ``/proc/self/status`` where Linux offers it (no
    change to the process at all), else set and put back at once under a lock."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


_UMASK_LOCK = threading.Lock()


def file_mode() -> int:
    """The permissions a new file gets under the process's umask (``0o644`` under the usual ``022``):
    what ``open(path, "w")`` would give, which :func:`tempfile.mkstemp` (``0o600``) does not."""
    return 0o666 & ~_umask()


def folder_mode() -> int:
    """The permissions a new folder gets under the process's umask (``0o755`` under ``022``), which
    :func:`tempfile.mkdtemp` (``0o700``) does not."""
    return 0o777 & ~_umask()


def atomic_write(path: Path, write: Callable[[BinaryIO], Any], make_parents: bool = True) -> None:
    """The bytes ``write(fh)`` puts into the binary file ``fh``, at ``path``: written to a temporary
    file in the same folder (``<name>.<random>.tmp``), flushed to disk, given the permissions the
    umask allows (:func:`file_mode`) and moved into place with ``os.replace`` (atomic on POSIX and
    Windows). A crash leaves the old file or the new one, never half of one; and a symbolic link (or a
    hard link) at ``path`` is replaced by the new file, so the file it pointed at is never written.
    Every file an app writes (run files, reports, figures) goes through here. ``make_parents``: create
    the folders above ``path`` that are missing (else a missing folder raises ``FileNotFoundError``)."""
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=TEMPORARY_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            if hasattr(os, "fchmod"):  # pragma: no branch - absent on Windows, where modes barely apply
                os.fchmod(fh.fileno(), file_mode())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """``data`` at ``path``, replaced atomically (:func:`atomic_write`)."""
    atomic_write(path, lambda fh: fh.write(data))


def save_figure(fig: Any, path: Path, **savefig: Any) -> Path:
    """The matplotlib figure ``fig`` saved at ``path`` (its format from the suffix, ``savefig``'s
    keywords passed on), replaced atomically (:func:`atomic_write`); returns ``path``. As ``savefig``
    does, a folder that does not exist is an error (``FileNotFoundError``), not created."""
    path = Path(path)
    write = lambda fh: fig.savefig(fh, format=path.suffix.lstrip(".") or "png", **savefig)  # noqa: E731
    atomic_write(path, write, make_parents=False)
    return path


def temporary_target(name: str) -> Optional[str]:
    """The file an atomic write's temporary ``name`` was to become (``results.json`` for
    ``results.json.k3j2x9.tmp``), or ``None`` when ``name`` is not such a temporary."""
    if not name.endswith(TEMPORARY_SUFFIX):
        return None
    parts = name[: -len(TEMPORARY_SUFFIX)].rsplit(".", 1)
    return parts[0] if len(parts) == 2 and parts[0] and parts[1] else None


def remove_temporaries(folder: Path, owns: Union[Iterable[str], Callable[[str], bool]]) -> List[str]:
    """Delete the temporary files an interrupted :func:`atomic_write` left in ``folder``: those whose
    target (:func:`temporary_target`) the app writes, ``owns`` being the names it writes or a test of a
    name. Regular files only (links and anything else are left alone); returns the names deleted.
    Call it while holding the folder's lock, so no writer of this run is between its write and its
    ``os.replace``."""
    test = owns if callable(owns) else set(owns).__contains__
    removed = []
    try:
        entries = list(os.scandir(Path(folder)))
    except OSError:
        return []
    for entry in entries:
        target = temporary_target(entry.name)
        if target is None or not test(target):
            continue
        if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
            continue
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        removed.append(entry.name)
    return sorted(removed)


def atomic_write_text(path: Path, text: str) -> None:
    """``text`` as UTF-8 at ``path``, replaced atomically (:func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any) -> None:
    """``obj`` as indented JSON at ``path``, replaced atomically (a reader never sees half a file)."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2) + "\n").encode("utf-8"))


def stamp(schema: str, version: int, content: Dict[str, Any]) -> Dict[str, Any]:
    """``content`` with the stamp every run file carries first: ``schema`` (``"posenc.eval/results"``)
    and ``schema_version``."""
    return {"schema": schema, "schema_version": version, **content}


def read_capped(path: Path, advice: str, max_bytes: int = MAX_RUN_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path``, read with a size cap, or :class:`ReadError` (one line
    naming the file, then ``advice``): anything but a regular file (a FIFO would block, a device such
    as ``/dev/zero`` never ends), a file that cannot be opened, or more than ``max_bytes``."""
    path = Path(path)

    def refuse(problem: str) -> ReadError:
        return ReadError(f"{path} {problem}; {advice}", problem)

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise refuse("is not a regular file")
        with path.open("rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as err:
        raise refuse(f"cannot be read ({err.strerror or err})") from None
    if len(raw) > max_bytes:
        raise refuse(f"is larger than {max_bytes:,} bytes; not read")
    return raw


def read_json(path: Path, advice: str, max_bytes: int = MAX_RUN_FILE_BYTES) -> Any:
    """The JSON value in the regular file ``path``, read with a size cap (:func:`read_capped`), or
    :class:`ReadError` (one line naming the file, then ``advice``): anything but a regular file, more
    than ``max_bytes``, text that is not UTF-8 JSON, or nesting too deep for the parser."""
    path = Path(path)
    raw = read_capped(path, advice, max_bytes)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ReadError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}); {advice}") from None
    except ValueError as err:
        raise ReadError(f"{path} is not valid JSON ({err}); {advice}") from None
    except RecursionError:
        raise ReadError(f"{path} nests its JSON too deeply to read; {advice}") from None
