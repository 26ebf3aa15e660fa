"""The files ``posenc eval`` writes in its output folder, through :mod:`posenc.runs`.

``progress.json`` (finished cells, resumed), ``search.json`` (the search's evaluations, replayed),
``results.json`` and ``results.md``; each JSON file starts with its stamp (``posenc.eval/<kind>``,
:data:`SCHEMA_VERSION`). :class:`EvalError` is the one-line mistake every part of the command raises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from ... import runs

#: Version of the files ``posenc eval`` writes; a folder of another version is not resumed. Version 2:
#: bits per byte as total bits over total bytes; passkey cells keyed and seeded by their depth's value
#: and holding their offsets and keys; the checkpoint known by the digest of its files.
SCHEMA_VERSION = 2
SCHEMA = "posenc.eval"
#: the lock an evaluation holds on its output folder while it runs
LOCK_NAME = ".posenc-eval.lock"
#: files an eval folder may hold (with the plots, ``*.png``); a folder holding others is not eval's
OWN_FILES = ("progress.json", "search.json", "results.json", "results.md", LOCK_NAME)
MAX_RUN_FILE_BYTES = runs.MAX_RUN_FILE_BYTES
#: the most nats a stored window (of progress.json or search.json) may hold per token it scored: ``exp``
#: of more (a probability below 1e-304) is past float64, so no perplexity could be reported from it
MAX_NATS_PER_TOKEN = 700.0


class EvalError(Exception):
    """A mistake in the command line or the inputs, reported as one line."""


def stamp(kind: str, content: Dict[str, Any]) -> Dict[str, Any]:
    """``content`` with the schema stamp of the ``kind`` of file (``posenc.eval/<kind>``, the version)."""
    return runs.stamp(f"{SCHEMA}/{kind}", SCHEMA_VERSION, content)


def write_json(path: Path, obj: Any) -> None:
    """``obj`` as indented JSON at ``path``, replaced atomically."""
    runs.write_json(path, obj)


def read_json(path: Path, advice: str, max_bytes: int = MAX_RUN_FILE_BYTES) -> Any:
    """:func:`posenc.runs.read_json`, its :class:`~posenc.runs.ReadError` as :class:`EvalError`."""
    try:
        return runs.read_json(path, advice, max_bytes=max_bytes)
    except runs.ReadError as err:
        raise EvalError(str(err)) from None


def read_stamped(path: Path, kind: str, advice: str) -> Dict[str, Any]:
    """The ``kind`` file at ``path`` (its stamp checked), or :class:`EvalError` naming what it is."""
    data = read_json(path, advice)
    if not isinstance(data, dict) or data.get("schema") != f"{SCHEMA}/{kind}":
        raise EvalError(f"{path} is not a posenc eval {kind} file; choose another --out or {advice}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise EvalError(
            f"{path} is version {data.get('schema_version')!r}; this posenc writes {SCHEMA_VERSION}; {advice}"
        )
    return data


def settings_changed(stored: Any, settings: Dict[str, Any]) -> list:
    """The keys whose values differ between a file's ``stored`` settings and these ``settings``,
    ``model`` (the checkpoint's path, recorded only) aside: a checkpoint is known by its digest."""
    old = stored if isinstance(stored, dict) else {}
    return sorted(k for k in set(settings) | set(old) if k != "model" and old.get(k) != settings.get(k))


def depth_key(depth: float) -> str:
    """The exact text of a needle depth, as keys of cells and results: the shortest decimal that reads
    back as the same float (``0.25``, ``0.1234567``; ``0`` and ``1`` for the ends), so two depths that
    differ never share a key."""
    text = repr(float(depth))
    return text[:-2] if text.endswith(".0") else text
