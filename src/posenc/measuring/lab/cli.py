"""``posenc lab``: train one small LM per position scheme, evaluate at longer lengths, extend RoPE,
and write the report. See ``docs/lab.md``.

The run is a sequence of small steps (a training checkpoint, one scheme at one length, one extension
method at one length), each recorded in the run folder as soon as it finishes. ``--resume RUN_DIR``
skips everything recorded; Ctrl-C stops after the current training step (saving a checkpoint) or
discards only the evaluation in flight.

Mistakes a user can make (a bad flag value, an unwritable ``--out``, a corrupt or foreign file in the
run folder) end the command with one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import math
import shlex
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Tuple

import numpy as np
import torch

from .config import LabConfig
from .console import CpuClock, Interrupt, ProgressBars
from .distributed import Dist, barrier, setup, teardown
from .evaluate import evaluate_at, per_position_nats, window_ends
from .extend import extended_model, finetune
from .folder import LabError, LabRun, check_threads, open_run
from .metrics import bits_per_byte
from .parser import add_arguments as add_arguments
from .parser import command_line
from .passkey import bins as passkey_bins
from .report import MACHINERY_CHECK, build_results, write_report
from .schema import Progress, RunFileError
from .store import RunDir, load_checkpoint, save_checkpoint
from .train import TrainingDiverged, build_model, make_optimizer, run_kwargs, train_steps
from .verdicts import machinery_check_reason


def _work(cfg: LabConfig) -> dict:
    """Estimated cost (bytes read; a training byte counts 3) of each kind of step."""
    lengths = cfg.eval_lengths
    span = lengths[-1]
    per_len = {}
    for n in lengths:
        cells = len(passkey_bins(n, cfg.train_len)) if cfg.retrieval_trials else 0
        per_len[n] = cfg.eval_windows * span + cells * cfg.retrieval_trials * n
    return {
        "train_step": 3 * cfg.batch_size * cfg.train_len,
        "eval": per_len,
        "finetune": {n: 3 * cfg.finetune_steps * cfg.finetune_batch * n for n in lengths},
    }


def _extension_steps(cfg: LabConfig) -> List[Tuple[str, int, bool]]:
    lengths = cfg.eval_lengths
    if not (cfg.extension and "rope" in cfg.schemes and len(lengths) > 1):
        return []
    methods = ["none"] + list(cfg.extension_methods)
    steps = [(m, n, ft) for n in lengths[1:] for m in methods for ft in ((False, True) if cfg.finetune else (False,))]
    if cfg.finetune:
        # Control: the same fine-tune at the training length. The models are small and briefly
        # trained, so part of any fine-tune's gain is simply more training.
        steps += [("none", lengths[0], False), ("none", lengths[0], True)]
    return steps


def _sweep_key(rate: float) -> str:
    return repr(float(rate))


def _sweep(session: _Session) -> dict:
    """Each scheme's peak learning rate: ``cfg.lr`` for all, or the best of ``cfg.lr_sweep``.

    Every rate trains a fresh model for ``resolved_sweep_steps`` steps with the same schedule shape
    (warmup shortened in proportion) and retrieval share; it is scored by bits per byte on
    ``eval_windows`` fixed windows of the *training* text at the training length, so the
    validation text that the report measures plays no part in the choice.
    """
    cfg, corpus, record, progress, d, device = (
        session.cfg,
        session.corpus,
        session.record,
        session.progress,
        session.d,
        session.device,
    )
    if not cfg.lr_sweep:
        return {s: cfg.lr for s in cfg.schemes}
    steps = cfg.resolved_sweep_steps
    warmup = min(steps, max(1, round(cfg.warmup_steps * steps / cfg.steps)))
    ends = window_ends(corpus.train.size, cfg.train_len, cfg.eval_windows)
    unit = _work(cfg)["train_step"]
    jobs = [(s, r) for s in cfg.schemes for r in cfg.lr_sweep]
    done = sum(_sweep_key(r) in record.lr_sweep.get(s, {}) for s, r in jobs)
    task = progress.add("lr sweep", len(jobs), done)
    for k, (scheme, rate) in enumerate(jobs):
        if _sweep_key(rate) in record.lr_sweep.get(scheme, {}):
            continue
        progress.update(task, description=f"lr sweep: {scheme} at {rate:g} ({k + 1} of {len(jobs)})")
        model = build_model(cfg, scheme).to(device)
        optimizer = make_optimizer(model, rate, cfg.weight_decay)

        def on_step(step, loss):
            progress.work(unit)
            session.interrupt.check(d)

        try:
            _train_on_run_text(session, model, optimizer, start=0, total=steps, lr=rate, warmup=warmup, on_step=on_step)
        except TrainingDiverged:
            score = math.nan  # recorded as diverged, never chosen
        else:
            nats = per_position_nats(model, corpus.train, ends, cfg.train_len, batch=cfg.eval_batch, device=device, d=d)
            score = float(bits_per_byte(nats).mean())
        record.lr_sweep.setdefault(scheme, {})[_sweep_key(rate)] = score if math.isfinite(score) else None
        if d.main:
            session.run.save_progress(record)
        progress.update(task, advance=1)
        progress.log(f"lr sweep {scheme} at {rate:g}: {score:.3f} bits per byte on training windows")
    chosen = {}
    for scheme in cfg.schemes:
        scores = {r: record.lr_sweep[scheme][_sweep_key(r)] for r in cfg.lr_sweep}
        finite = {r: v for r, v in scores.items() if v is not None}
        if not finite:
            raise LabError(f"every rate of --lr-sweep diverged for {scheme} ({scores}); try smaller rates")
        chosen[scheme] = min(finite, key=finite.__getitem__)
    return chosen


def _train_on_run_text(
    session: _Session, model, optimizer, *, start: int, total: int, lr: float, warmup: int, on_step
) -> None:
    """:func:`train_steps` of ``model`` on the run's training text, with the run's device, processes
    and the settings its config fixes (:func:`run_kwargs`): the sweep and each scheme's training."""
    train_steps(
        model,
        optimizer,
        session.corpus.train,
        start=start,
        total=total,
        lr=lr,
        warmup=warmup,
        device=session.device,
        d=session.d,
        on_step=on_step,
        **run_kwargs(session.cfg),
    )


def _train_all(session: _Session, rates: dict) -> tuple:
    """({scheme: trained model}, {scheme: training info}) for every scheme of the run, each trained
    from its checkpoint where one exists (the same initial weights and data order for all)."""
    models, info = {}, {}
    for k, scheme in enumerate(session.cfg.schemes):
        models[scheme], info[scheme] = _train_one(session, scheme, k, rates[scheme])
    return models, info


def _load_training_state(path: Path, scheme: str, model, optimizer) -> Tuple[int, List[float], Optional[dict]]:
    """(steps done, losses so far, checkpoint) of ``scheme`` from its checkpoint at ``path``, loaded
    into ``model`` and ``optimizer``; (0, [], None) without one. A checkpoint of another model is
    refused."""
    ckpt = load_checkpoint(path)
    if ckpt is None:
        return 0, [], None
    if ckpt.get("model_config") != model.config.to_dict():
        raise LabError(
            f"checkpoint {path} was made with model config "
            f"{ckpt.get('model_config')}, but this version of posenc builds "
            f"{model.config.to_dict()}; resuming would mix two models. Delete that "
            f"checkpoint to retrain {scheme}, or start a new run"
        )
    try:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise RunFileError(
            path,
            f"does not fit the {scheme} model ({str(err).splitlines()[0][:160]})",
            "delete it to retrain that scheme",
        ) from None
    return ckpt["step"], [float(v) for v in ckpt["losses"]], ckpt


def _train_one(session: _Session, scheme: str, k: int, lr: float) -> tuple:
    """(model, info) of ``scheme`` (the ``k``-th) trained to ``cfg.steps`` at peak rate ``lr``,
    checkpointed every ``cfg.checkpoint_every`` steps and on Ctrl-C, with its wall and CPU time."""
    cfg, run, d, device, progress = session.cfg, session.run, session.d, session.device, session.progress
    model = build_model(cfg, scheme).to(device)
    optimizer = make_optimizer(model, lr, cfg.weight_decay)
    path = run.checkpoint_path(scheme)
    start, losses, ckpt = _load_training_state(path, scheme, model, optimizer)
    stage = f"train {scheme:<10} (scheme {k + 1} of {len(cfg.schemes)}, lr {lr:g})"
    task = progress.add(stage, cfg.steps, start)
    unit = _work(cfg)["train_step"]
    began, cpu_began = time.time(), time.process_time()
    ckpt_seconds = float(ckpt.get("seconds", 0.0)) if ckpt else 0.0
    ckpt_cpu = float(ckpt.get("cpu_seconds", 0.0)) if ckpt else 0.0

    def save(step_done):
        if d.main:
            save_checkpoint(
                path,
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "step": step_done,
                    "losses": losses,
                    "model_config": model.config.to_dict(),
                    "seconds": ckpt_seconds + time.time() - began,
                    "cpu_seconds": ckpt_cpu + time.process_time() - cpu_began,
                    "lr": lr,
                },
            )

    def on_step(step, loss):
        losses.append(loss)
        progress.update(task, completed=step + 1, description=f"{stage} {loss / math.log(2):.3f} bpb")
        progress.work(unit)
        if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
            save(step + 1)
            progress.log(
                f"{scheme} (scheme {k + 1} of {len(cfg.schemes)}): step "
                f"{step + 1}/{cfg.steps}, loss {loss / math.log(2):.3f} bits per byte"
            )
        try:
            session.interrupt.check(d)
        except KeyboardInterrupt:
            save(step + 1)
            raise

    if start < cfg.steps:
        try:
            _train_on_run_text(
                session, model, optimizer, start=start, total=cfg.steps, lr=lr, warmup=cfg.warmup_steps, on_step=on_step
            )
        except TrainingDiverged as e:
            raise LabError(
                f"training {scheme} diverged at step {e.step + 1} of {cfg.steps} (loss {e.loss}); "
                f"no checkpoint of the diverged weights was written. Start over with a smaller --lr, "
                f"--retrieval-answer-weight or --grad-clip and --fresh"
            ) from None
        barrier(d)
    progress.remove(task)
    model.eval()
    return model, _training_info(session, scheme, model, losses, lr)


def _training_info(session: _Session, scheme: str, model, losses: List[float], lr: float) -> dict:
    """What the report says of ``scheme``'s training: steps, final bits per byte (mean of the last
    tenth of the losses), parameters, the wall and CPU seconds its checkpoint recorded, the rate."""
    tail = losses[-max(1, len(losses) // 10) :]
    seconds, cpu = _saved_seconds(session.run.checkpoint_path(scheme), scheme) if session.d.main else (None, None)
    return {
        "steps": len(losses),
        "final_bpb": float(np.mean(tail)) / math.log(2),
        "parameters": model.num_parameters(),
        "train_seconds": seconds,
        "train_cpu_seconds": cpu,
        "lr": lr,
    }


def _saved_seconds(path: Path, scheme: str) -> Tuple[float, Optional[float]]:
    """Training (wall, CPU) seconds recorded in ``scheme``'s checkpoint, which the last training
    step wrote (CPU None for a checkpoint written before the lab recorded it)."""
    ckpt = load_checkpoint(path)
    if ckpt is None:
        raise LabError(
            f"checkpoint {path} of {scheme} is missing although training finished; "
            f"something removed it during the run. Resume to retrain {scheme}"
        )
    cpu = ckpt.get("cpu_seconds")
    return ckpt["seconds"], None if cpu is None else float(cpu)


def _timed(fn, *args, **kwargs) -> dict:
    """``fn(*args, **kwargs)`` (an evaluation dict) with the CPU seconds it took as ``cpu_seconds``."""
    began = time.process_time()
    result = fn(*args, **kwargs)
    result["cpu_seconds"] = time.process_time() - began
    return result


def run(args) -> int:
    if getattr(args, "lab_command", None) == "export":
        from .export import run as export_run

        return export_run(args)
    try:
        if getattr(args, "seeds", None) is not None:
            from .seeds import run_seeds

            return run_seeds(args)
        if args.device == "cuda" and not torch.cuda.is_available():
            raise LabError("--device cuda was given but torch.cuda.is_available() is False; allowed here: --device cpu")
        if args.threads is not None:
            check_threads(args.threads)
            torch.set_num_threads(args.threads)
        d = setup(args.device)
        try:
            return _run(args, d)
        finally:
            teardown(d)
    except (LabError, RunFileError) as err:
        print(f"posenc lab: {err}", file=sys.stderr)
        return 2


def _initial_work(cfg, run: RunDir, record: Progress, steps: list) -> tuple:
    """(total, done) estimated work of the whole run, for the overall ETA."""
    w = _work(cfg)
    total = done = 0.0
    sweep = cfg.resolved_sweep_steps * w["train_step"]
    for scheme in cfg.schemes:
        for rate in cfg.lr_sweep:
            total += sweep
            done += sweep if _sweep_key(rate) in record.lr_sweep.get(scheme, {}) else 0.0
        total += cfg.steps * w["train_step"]
        path = run.checkpoint_path(scheme)
        ckpt = load_checkpoint(path)
        if ckpt is not None:
            done += min(cfg.steps, ckpt["step"]) * w["train_step"]
        for n in cfg.eval_lengths:
            total += w["eval"][n]
            done += w["eval"][n] if str(n) in record.eval.get(scheme, {}) else 0.0
    for method, n, ft in steps:
        cost = w["eval"][n] + (w["finetune"][n] if ft else 0.0)
        total += cost
        done += cost if _have(record, method, n, ft) else 0.0
    return total, done


def _run(args, d: Dist) -> int:
    with ExitStack() as stack:
        return _run_locked(args, d, stack)


@dataclass
class _Session:
    """What every step of one ``posenc lab`` run shares: its settings (config and run folder), the
    data, the run's record, the evaluation windows and arguments, progress display, Ctrl-C and the
    CPU clock."""

    settings: LabRun
    corpus: Any
    corpus_info: dict
    d: Dist
    device: torch.device
    record: Progress
    ends: Any
    eval_kw: dict
    progress: ProgressBars
    interrupt: Interrupt
    clock: CpuClock
    info: dict = field(default_factory=dict)

    @property
    def cfg(self) -> LabConfig:
        return self.settings.cfg

    @property
    def run(self) -> RunDir:
        return self.settings.run

    def finish_step(self, complete: bool = False, plots: bool = False) -> None:
        """Record the finished work (and the CPU time so far) and rewrite the results and report."""
        if self.d.main:
            self.record.cpu_seconds = self.clock.total()
            self.run.save_progress(self.record)
            results = build_results(
                self.cfg.to_dict(), self.corpus_info, self.info, self.record.to_dict(), complete, self.d.describe()
            )
            write_report(results, self.run.root, command_line(self.cfg), plots=plots)


def _start_session(args, d: Dist, stack: ExitStack) -> _Session:
    """The run ``args`` asks for, opened (:func:`~posenc.measuring.lab.folder.open_run`) with its record,
    evaluation windows and display; its CPU clock counts from before the corpus is read."""
    began = time.process_time()  # the run's CPU clock covers reading the corpus too
    settings, corpus, corpus_info = open_run(args, d, stack)
    cfg, run = settings.cfg, settings.run
    device = torch.device("cuda", d.local_rank) if settings.device == "cuda" else torch.device("cpu")
    record = run.progress()
    lengths = cfg.eval_lengths
    try:
        ends = window_ends(corpus.val.size, lengths[-1], cfg.eval_windows)
    except ValueError as err:
        raise LabError(str(err)) from None
    eval_kw = dict(
        batch=cfg.eval_batch,
        final_bytes=cfg.final_bytes,
        span=lengths[-1],
        bootstrap_samples=cfg.bootstrap_samples,
        seed=cfg.seed,
        device=device,
        d=d,
        train_len=cfg.train_len,
        retrieval_trials=cfg.retrieval_trials,
    )
    return _Session(
        settings,
        corpus,
        corpus_info,
        d,
        device,
        record,
        ends,
        eval_kw,
        ProgressBars(d.main),
        Interrupt(),
        CpuClock(record.cpu_seconds, start=began),
    )


def _run_locked(args, d: Dist, stack: ExitStack) -> int:
    session = _start_session(args, d, stack)
    cfg, run, record, progress = session.cfg, session.run, session.record, session.progress
    progress.log(
        f"run folder {run.root} ({'resuming' if session.settings.resuming else 'new'}); "
        f"{session.corpus_info['train_bytes'] / 1e6:.1f} MB train, "
        f"{session.corpus_info['val_bytes'] / 1e6:.1f} MB validation"
    )
    small = machinery_check_reason(cfg.to_dict())
    if small:
        progress.log(f"{MACHINERY_CHECK} ({small})")
    ext_steps = _extension_steps(cfg)
    total, done = _initial_work(cfg, run, record, ext_steps)
    if done >= total:  # a finished run resumed: nothing is redone or rewritten, its CPU time included
        session.clock = CpuClock(record.cpu_seconds, frozen=True)
    with session.interrupt.catching(), progress:
        progress.start_overall(total, done)
        rates = _sweep(session)
        models, session.info = _train_all(session, rates)
        _evaluate_schemes(session, models)
        if ext_steps:
            _extend_rope(session, models["rope"], ext_steps)
    session.finish_step(complete=True, plots=session.settings.plots)
    barrier(d)
    if d.main:
        # Plain lines (no wrapping, no timestamps), so the path and the command can be copied.
        if small:
            print(f"{MACHINERY_CHECK} ({small}): no verdicts", file=sys.stderr)
        print(
            f"report: {run.root / 'results.md'}  explore it: posenc explore --lab-run {shlex.quote(str(run.root))}",
            file=sys.stderr,
        )
    return 0


def _evaluate_schemes(session: _Session, models: dict) -> None:
    """Every scheme at every evaluation length not yet recorded, each recorded when it finishes."""
    cfg, record, progress = session.cfg, session.record, session.progress
    work = _work(cfg)
    todo = [(s, n) for s in cfg.schemes for n in cfg.eval_lengths if str(n) not in record.eval.get(s, {})]
    total = len(cfg.schemes) * len(cfg.eval_lengths)
    task = progress.add("evaluate", total, total - len(todo))
    for scheme, n in todo:
        session.interrupt.check(session.d)
        k = cfg.schemes.index(scheme) + 1
        progress.update(task, description=f"evaluate {scheme} at {n} (scheme {k} of {len(cfg.schemes)})")
        result = _timed(
            evaluate_at,
            models[scheme],
            session.corpus.val,
            session.ends,
            n,
            learned_beyond=cfg.learned_beyond,
            **session.eval_kw,
        )
        record.eval.setdefault(scheme, {})[str(n)] = result
        session.finish_step()
        progress.update(task, advance=1)
        progress.work(work["eval"][n])
        if "bpb" in result:
            progress.log(f"{scheme} at {n}: {result['bpb']:.3f} bits per byte" + _retrieval_summary(result))


def _extend_rope(session: _Session, rope, ext_steps: List[Tuple[str, int, bool]]) -> None:
    """Each RoPE extension step (method, length, fine-tuned) not yet recorded: extend the trained
    RoPE model, fine-tune it where asked, evaluate, record."""
    cfg, record, progress, d = session.cfg, session.record, session.progress, session.d
    work = _work(cfg)
    ext_todo = [s for s in ext_steps if not _have(record, *s)]
    task = progress.add("extend rope", len(ext_steps), len(ext_steps) - len(ext_todo))
    for method, n, ft in ext_todo:
        session.interrupt.check(d)
        progress.update(task, description=f"extend rope: {method} at {n}{' fine-tuned' if ft else ''}")
        began = time.process_time()
        model = extended_model(rope, method, n, cfg.train_len)
        if ft:
            _finetune(session, model, method, n, work["finetune"][n])
        result = evaluate_at(model, session.corpus.val, session.ends, n, **session.eval_kw)
        result["cpu_seconds"] = time.process_time() - began
        entry = record.extension.setdefault(method, {}).setdefault(str(n), {})
        if ft:
            entry["finetuned"] = result
        else:
            entry.update(result)
        session.finish_step()
        progress.update(task, advance=1)
        progress.work(work["eval"][n])
        progress.log(
            f"rope+{method} at {n}{' fine-tuned' if ft else ''}: "
            f"{result['bpb']:.3f} bits per byte" + _retrieval_summary(result)
        )


def _finetune(session: _Session, model, method: str, n: int, cost: float) -> None:
    """Fine-tune the extended ``model`` at length ``n`` (``cost``: its share of the overall work)."""
    progress, cfg = session.progress, session.cfg
    ft_task = progress.add(f"fine-tune {method} at {n}", cfg.finetune_steps)
    unit = cost / cfg.finetune_steps

    def on_ft_step(step, loss):
        progress.update(ft_task, completed=step + 1)
        progress.work(unit)
        session.interrupt.check(session.d)

    try:
        finetune(model, session.corpus.train, cfg, n, device=session.device, d=session.d, on_step=on_ft_step)
    except TrainingDiverged as e:
        raise LabError(
            f"the fine-tune of rope+{method} at {n} diverged at step {e.step + 1} (loss "
            f"{e.loss}); every finished result is saved. Start over with a smaller "
            f"--finetune-lr and --fresh"
        ) from None
    progress.remove(ft_task)


def _retrieval_summary(result: dict) -> str:
    cells = result.get("retrieval") or {}
    if not cells:
        return ""
    return "; passkey " + ", ".join(f"{name} {cell['accuracy']:.0%}" for name, cell in cells.items())


def _have(record: Progress, method: str, n: int, ft: bool) -> bool:
    entry = record.extension.get(method, {}).get(str(n))
    if entry is None:
        return False
    return "finetuned" in entry if ft else "bpb" in entry
