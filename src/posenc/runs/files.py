"""Writing and reading one run file: atomically, stamped with its schema, and read with limits."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Dict

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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """``data`` at ``path``, written to a temporary file in the same folder, flushed to disk and moved
    into place with ``os.replace`` (atomic on POSIX and Windows): a crash leaves the old file or the
    new one, never half of one."""
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
