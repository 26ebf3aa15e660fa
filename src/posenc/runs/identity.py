"""What a measured checkpoint *is*: a digest of its files' bytes, so a run can tell the model it
measured from another one at the same path."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path
from typing import Callable, Iterable, List, Optional

#: bytes read at a time while hashing (weights are gigabytes; memory stays flat)
CHUNK = 1 << 22


def digest_files(root: Path, names: Iterable[str], on_bytes: Optional[Callable[[int], None]] = None) -> str:
    """SHA-256 (hex) over each named file of ``root``, in sorted order: its name, its size and its
    bytes. A renamed, added, removed or edited file changes it; the folder's path and the files' times
    do not."""
    digest = hashlib.sha256()
    for name in sorted(set(names)):
        path = Path(root) / name
        size = path.stat().st_size
        digest.update(f"{name}\0{size}\0".encode("utf-8"))
        with path.open("rb") as fh:
            while True:
                block = fh.read(CHUNK)
                if not block:
                    break
                digest.update(block)
                if on_bytes is not None:
                    on_bytes(len(block))
    return digest.hexdigest()


def checkpoint_files(root: Path, skip: Iterable[str] = ()) -> List[str]:
    """The regular files at the top of a checkpoint folder that loading it can read: everything but
    hidden files, documentation (``*.md``) and the names in ``skip``."""
    skipped = set(skip)
    out = []
    for path in Path(root).iterdir():
        if path.name.startswith(".") or path.suffix.lower() == ".md" or path.name in skipped:
            continue
        if stat.S_ISREG(path.stat().st_mode):  # follows links: a linked weight file is hashed by content
            out.append(path.name)
    return sorted(out)


def content_digest(root: Path, skip: Iterable[str] = (), on_bytes: Optional[Callable[[int], None]] = None) -> str:
    """The content digest of a checkpoint folder: :func:`digest_files` over :func:`checkpoint_files`."""
    return digest_files(root, checkpoint_files(root, skip), on_bytes)
