"""The measuring apps' text: bytes of real source files, split into train and validation by file path.

The lab trains and measures on it; ``posenc eval`` reads its validation split when no text is given.

The default corpus is the ``.py`` files of the running Python's standard library (found with
``sysconfig.get_paths()["stdlib"]``, third-party ``site-packages`` excluded), so every Python
install ships it and nothing is downloaded. Models read raw bytes (vocabulary 256), so there is no
tokenizer and bits per byte compare across any text.

The split is decided per file by a hash of its path relative to the corpus root: the same file
always lands on the same side on every machine and in every run, and no file is on both sides.
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .._checks import check_float

#: Bytes put between consecutive files of one split (a blank line, as between two modules).
SEPARATOR = b"\n\n"
#: Folders of a Python install that hold third-party code rather than the standard library.
_THIRD_PARTY = {"site-packages", "dist-packages"}


def stdlib_root() -> Path:
    """The folder holding the running interpreter's standard library sources."""
    return Path(sysconfig.get_paths()["stdlib"])


def path_fraction(relative_path: str) -> float:
    """Map a relative POSIX path to a number in [0, 1), the same on every machine (SHA-256)."""
    digest = hashlib.sha256(relative_path.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def split_paths(relative_paths: Sequence[str], val_fraction: float) -> Tuple[List[str], List[str]]:
    """Split paths into (train, validation), each sorted; a path is validation iff its hash
    fraction is below ``val_fraction``. Deterministic and disjoint by construction."""
    check_float("val_fraction", val_fraction, greater_than=0.0, maximum=0.5)
    train: List[str] = []
    val: List[str] = []
    for rel in sorted(set(relative_paths)):
        (val if path_fraction(rel) < val_fraction else train).append(rel)
    return train, val


def _is_text(path: Path) -> bool:
    with open(path, "rb") as fh:
        return b"\x00" not in fh.read(8192)


def find_files(root: Path, pattern: str) -> List[str]:
    """Relative POSIX paths of the files under ``root`` matching ``pattern``, skipping hidden
    folders, third-party packages and binary files (a NUL byte in the first 8 KiB)."""
    found = []
    for path in root.rglob(pattern):
        rel = path.relative_to(root)
        if any(part.startswith(".") or part in _THIRD_PARTY or part == "__pycache__" for part in rel.parts[:-1]):
            continue
        if path.is_file() and _is_text(path):
            found.append(rel.as_posix())
    return sorted(found)


@dataclass
class Corpus:
    """Train and validation byte streams and where they came from.

    Attributes:
        train: uint8 array, shape (n_train_bytes,).
        val: uint8 array, shape (n_val_bytes,).
        source: the corpus root (or file) as given.
        train_files / val_files: relative paths on each side (one entry each for a single file).
    """

    train: np.ndarray
    val: np.ndarray
    source: str
    train_files: List[str]
    val_files: List[str]

    def summary(self) -> dict:
        """A JSON-ready description, including a fingerprint of the split."""
        fingerprint = hashlib.sha256("\n".join(self.val_files).encode()).hexdigest()[:16]
        return {
            "source": self.source,
            "train_files": len(self.train_files),
            "val_files": len(self.val_files),
            "train_bytes": int(self.train.size),
            "val_bytes": int(self.val.size),
            "val_split_sha256": fingerprint,
        }


def _concat(root: Path, rels: Sequence[str]) -> np.ndarray:
    chunks = []
    for rel in rels:
        chunks.append((root / rel).read_bytes())
    return _frozen(np.frombuffer(SEPARATOR.join(chunks), dtype=np.uint8))


def _frozen(array: np.ndarray) -> np.ndarray:
    array = array.copy()
    array.flags.writeable = False
    return array


def load_corpus(data: Optional[str] = None, *, pattern: Optional[str] = None, val_fraction: float = 0.1) -> Corpus:
    """Load the standard library (``data=None``) or the user's file/folder ``data``.

    Args:
        data: ``None`` for the standard library; a folder (every text file matching ``pattern``,
            split by path); or a single text file (its last ``val_fraction`` of bytes become the
            validation stream, since one path cannot be split by path).
        pattern: glob for files inside a folder; ``"*.py"`` for the standard library, ``"*"``
            otherwise.
        val_fraction: share of files (by path hash) or bytes held out for validation, in (0, 0.5].
    """
    check_float("val_fraction", val_fraction, greater_than=0.0, maximum=0.5)
    return _load(data, pattern, float(val_fraction))


@lru_cache(maxsize=2)
def _load(data: Optional[str], pattern: Optional[str], val_fraction: float) -> Corpus:
    # Cached: a process that runs the lab twice (tests, notebooks) reads the files once. The arrays
    # are shared between callers and never written to.
    if data is None:
        root, pattern = stdlib_root(), pattern or "*.py"
    else:
        root, pattern = Path(data).expanduser(), pattern or "*"
        if not root.exists():
            raise FileNotFoundError(f"--data {data!r} does not exist; give a text file or a folder")
    if root.is_file():
        raw = _frozen(np.frombuffer(root.read_bytes(), dtype=np.uint8))
        cut = int(raw.size * (1.0 - val_fraction))
        return Corpus(raw[:cut], raw[cut:], str(root), [root.name], [root.name])
    rels = find_files(root, pattern)
    train_files, val_files = split_paths(rels, val_fraction)
    if not train_files or not val_files:
        raise ValueError(
            f"--data {str(root)!r} with pattern {pattern!r} gave {len(train_files)} "
            f"training and {len(val_files)} validation files; both sides need at least "
            f"one (add files, raise val_fraction, or give a single file)"
        )
    return Corpus(_concat(root, train_files), _concat(root, val_files), str(root), train_files, val_files)
