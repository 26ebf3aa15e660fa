"""The run folder of one ``posenc lab`` run: the settings resolved once from the command line
(:class:`LabRun`), a new folder checked writable, a stored run resumed only with the same config,
``--fresh`` deleting only the lab's own files, links refused, and the folder's lock.

Mistakes end in a :class:`LabError`, which the command prints as one line (exit status 2).
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, List, Tuple

from ...factory import SCHEMES
from ..corpus import load_corpus
from .config import LabConfig, preset_config
from .distributed import Dist, barrier
from .parser import config_overrides
from .store import (
    FolderBusy,
    LockRefused,
    RunDir,
    RunLock,
    is_lab_run,
    read_run_file,
    remove_temporaries,
    write_run_file,
)


class LabError(Exception):
    """A mistake in the command line or the run folder, reported as one line without a traceback."""


#: Files and folders of a run folder that ``--fresh`` may delete (nothing else is touched).
RUN_FILES = (
    "config.json",
    "corpus.json",
    "progress.json",
    "results.json",
    "results.md",
    "bpb_vs_length.png",
    "loss_by_position.png",
    "retrieval.png",
)


#: the most torch CPU threads a process may ask for (``torch.set_num_threads`` overflows on 400 digits)
MAX_THREADS = 4096


def check_threads(threads: int) -> None:
    """``--threads`` from 1 to :data:`MAX_THREADS`, or :class:`LabError`."""
    if threads < 1:
        raise LabError(f"--threads must be >= 1, got {threads}")
    if threads > MAX_THREADS:
        shown = str(threads) if len(str(threads)) <= 20 else f"a {len(str(threads))}-digit number"
        raise LabError(f"--threads must be <= {MAX_THREADS}, got {shown}")


def checked_config(make, what: str) -> LabConfig:
    try:
        return make()
    except (TypeError, ValueError) as err:
        raise LabError(f"{what}: {err}") from None


def check_writable(root: Path, flag: str) -> None:
    """Create ``root`` and write and delete a probe file in it, so a bad output path fails before
    any training instead of after it."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".posenc-probe-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise LabError(
            f"{flag} {str(root)!r}: cannot write there ({err.strerror or err}); choose a folder you can write to"
        ) from None


def _lab_paths(root: Path) -> List[Path]:
    """Paths in ``root`` that a lab run writes and that exist (links included, not followed)."""
    names = [root / n for n in RUN_FILES] + [root / "checkpoints"]
    return [p for p in names if p.is_symlink() or p.exists()]


def _refuse_links(root: Path, flag: str) -> None:
    """A run folder whose lab files or ``checkpoints`` are symbolic links would write (or delete)
    outside the folder: refused."""
    links = [p for p in _lab_paths(root) if p.is_symlink()]
    ckpt = root / "checkpoints"
    if ckpt.is_dir() and not ckpt.is_symlink():
        links += [p for p in ckpt.iterdir() if p.is_symlink()]
    if links:
        raise LabError(
            f"{flag} {str(root)!r}: {str(links[0])!r} is a symbolic link; the lab writes only real files "
            f"inside its run folder. Remove the link or choose another folder"
        )


def _clear_run(root: Path) -> None:
    """Delete the files of the lab run in ``root`` (a folder :func:`is_lab_run` accepted): the
    files named in :data:`RUN_FILES` and ``checkpoints/<scheme>.pt``, real files only. Links are
    refused before this runs; no folder is removed, and nothing else in ``root`` is touched."""
    for name in RUN_FILES:
        path = root / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
    ckpt = root / "checkpoints"
    if ckpt.is_dir() and not ckpt.is_symlink():
        for scheme in SCHEMES:
            path = ckpt / f"{scheme}.pt"
            if path.is_file() and not path.is_symlink():
                path.unlink()


def remove_stale_temporaries(root: Path) -> None:
    """Delete what an interrupted write of a lab file left in ``root`` and its ``checkpoints`` (the
    temporaries of :data:`RUN_FILES` and of ``<scheme>.pt``); called under the folder's lock."""
    remove_temporaries(root, RUN_FILES)
    ckpt = root / "checkpoints"
    if ckpt.is_dir() and not ckpt.is_symlink():
        remove_temporaries(ckpt, [f"{scheme}.pt" for scheme in SCHEMES])


def resolve_config(args) -> tuple:
    """(config, run folder, resuming?) from the parsed arguments; a :class:`LabError` for mistakes."""
    overrides = config_overrides(args)
    if args.resume:
        if getattr(args, "fresh", False):
            raise LabError(
                "--fresh starts a run over and --resume continues one; to start "
                f"{args.resume!r} over, use --out {args.resume!r} --fresh"
            )
        run = RunDir(Path(args.resume))
        if not run.root.is_dir():
            raise LabError(
                f"--resume {args.resume!r}: no such folder; give a folder made by an earlier `posenc lab` run"
            )
        stored = read_run_file(run.config_path, "config")
        if stored is None:
            raise LabError(
                f"--resume {args.resume!r}: no config.json there; give a folder made by an earlier `posenc lab` run"
            )
        cfg = checked_config(lambda: LabConfig.from_dict(stored), f"{run.config_path}")
        if args.preset is not None and args.preset != cfg.preset:
            overrides["preset"] = args.preset
        for key, value in overrides.items():
            if getattr(cfg, key) != value:
                raise LabError(
                    f"--resume continues the stored config; {key}={value!r} differs "
                    f"from the run's {getattr(cfg, key)!r}. Drop the flag or start a "
                    f"new run"
                )
        _refuse_links(run.root, "--resume")
        check_writable(run.root, "--resume")
        return cfg, run, True
    cfg = checked_config(lambda: preset_config(args.preset or "quick", **overrides), "invalid settings")
    if args.out:
        root = Path(args.out)
    else:
        root = Path("runs") / f"lab-{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    if root.exists() and not root.is_dir():
        raise LabError(f"--out {str(root)!r} is a file, not a folder; choose a folder")
    found = _lab_paths(root) if root.is_dir() else []
    if found:
        lab = is_lab_run(root)
        names = ", ".join(p.name for p in found)
        if not lab:
            raise LabError(
                f"--out {str(root)!r} holds {names} but no config.json written by posenc lab, so it is "
                f"not a lab run and nothing there is touched; choose an empty or new folder"
            )
        if not getattr(args, "fresh", False):
            raise LabError(
                f"--out {str(root)!r} already holds a run; use --resume {str(root)!r} "
                f"to continue it, add --fresh to start it over, or choose another folder"
            )
        _refuse_links(root, "--out")
        with locked(root, "--out"):
            _clear_run(root)
    check_writable(root, "--out")
    return cfg, RunDir(root), False


@contextmanager
def locked(root: Path, flag: str):
    """Hold ``root``'s run lock, or end with one line if another process holds it."""
    try:
        lock = RunLock(root).acquire()
    except FolderBusy as busy:
        raise LabError(
            f"{flag} {str(root)!r} is in use by {busy} (another posenc lab is running there); wait for "
            f"it to finish or choose another folder"
        ) from None
    except LockRefused as refused:
        raise LabError(f"{flag} {str(root)!r}: {refused}") from None
    try:
        yield lock
    finally:
        lock.release()


@dataclass(frozen=True)
class LabRun:
    """The settings of one ``posenc lab`` run, resolved once from the parsed arguments and passed
    down whole: the config, the run folder, whether it resumes, where it computes and whether it
    plots. ``named`` says the folder was given (``--out`` or ``--resume``) rather than made up from
    the time, which under torchrun each process would do differently."""

    cfg: LabConfig
    run: RunDir
    resuming: bool
    device: str
    plots: bool
    named: bool

    @classmethod
    def from_args(cls, args) -> "LabRun":
        """The settings ``args`` asks for (:func:`resolve_config`, with its checks and ``--fresh``)."""
        cfg, run, resuming = resolve_config(args)
        return cls(cfg, run, resuming, args.device, args.plots, bool(args.resume or args.out))


def open_run(args, d: Dist, stack: ExitStack) -> Tuple[LabRun, Any, dict]:
    """(settings, corpus, corpus summary) of the run ``args`` asks for; on the main process the
    folder is made, locked (released by ``stack``) and its config and corpus files written or
    checked."""
    lab = LabRun.from_args(args)
    cfg, run, resuming = lab.cfg, lab.run, lab.resuming
    if d.active and not lab.named:
        import torch.distributed as dist

        shared = [str(run.root)]
        dist.broadcast_object_list(shared, src=0)
        run = RunDir(Path(shared[0]))
        lab = replace(lab, run=run)
    try:
        corpus = load_corpus(cfg.data, pattern=cfg.pattern, val_fraction=cfg.val_fraction)
    except (OSError, ValueError) as err:
        raise LabError(str(err)) from None
    corpus_info = corpus.summary()
    if d.main:
        run.root.mkdir(parents=True, exist_ok=True)
        stack.enter_context(locked(run.root, "--resume" if resuming else "--out"))
        remove_stale_temporaries(run.root)
        if resuming:
            stored = read_run_file(run.corpus_path, "corpus")
            if stored and stored.get("val_split_sha256") != corpus_info["val_split_sha256"]:
                raise LabError(
                    f"the corpus changed since this run started (split fingerprint "
                    f"{stored.get('val_split_sha256')} -> {corpus_info['val_split_sha256']}); "
                    f"resume with the same data or start a new run"
                )
        else:
            write_run_file(run.config_path, "config", cfg.to_dict())
        write_run_file(run.corpus_path, "corpus", corpus_info)
    barrier(d)
    return lab, corpus, corpus_info
