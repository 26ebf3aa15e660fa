"""conform: the exact RoPE of a config, checked against any engine through one adapter protocol.

**The adapter protocol** (public and stable). An adapter is a Python callable::

    rotate(config: dict, q: Tensor, k: Tensor, positions: Tensor)
        -> (q_rot, k_rot)  or  (q_rot, k_rot, softmax_scale)

* ``config``: a ``config.json`` as a dict (the fixtures' ``source`` and ``note`` keys may be present);
* ``q``, ``k``: ``(tokens, heads, head_dim)``, float32 or float64, in the layout the config implies
  (half-split, or interleaved pairs for GPT-J and ``rope_interleave: true``); ``head_dim`` is
  ``qk_rope_head_dim`` for multi-head latent attention;
* ``positions``: ``(tokens,)`` int64, the position of each token (not sorted, may repeat); q, k and
  positions are CPU tensors, which an adapter may move (its results may come from any device);
* ``q_rot``, ``k_rot``: the same shapes and dtype, rotated as the engine rotates them, the attention
  factor included wherever the engine puts it;
* ``softmax_scale`` (optional): what the engine multiplies the usual ``1 / sqrt(head_dim)`` of its
  attention by (1.0 when absent).

An adapter may carry four optional attributes: ``supports(config) -> True | False | str`` (a string
is the reason the engine cannot run this config; the table then says "not supported", not
"mismatch"), ``max_position(config) -> int | None`` (the largest position the engine can rotate, as
an engine whose cache ends at its context length; the groups past it are skipped and listed in the
result), ``engine`` (its name) and ``version``. An adapter is called many times per config, in
order of the position groups (:mod:`.checks`); it may keep state between calls, as an engine's
cache does, and that state is what the ``near_again`` group checks.

Modules, each importing only those above it:

* :mod:`.reference`: the exact answer of a config (posenc's float64 tables) and the same computation
  under a misreading;
* :mod:`.hypotheses`: the misreadings conform knows, stated by config field;
* :mod:`.checks`: the position groups, the five checks, the verdicts and the named causes;
* :mod:`.configs`: fixtures, files and generated configs of every registered rope type;
* :mod:`.adapters`: posenc's own adapter and the installed ``transformers``';
* :mod:`.schema`: the summary file ``--json`` writes and its reader;
* :mod:`.docs`: the table of docs/conformance.md, rendered from committed summaries.

Use :func:`conform` from code, ``posenc conform`` from a shell, and
:func:`posenc.testing.assert_conforms` from a test suite.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import platform
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

import torch

from .adapters import BUILTIN, engine_version, posenc_rotate, transformers_rotate
from .checks import CHECKS, ConfigResult, check_config
from .configs import ConfigCase, generated, resolve
from .reference import family_softmax_scale, read_config
from .schema import CONFIG_STATUSES, SCHEMA, SCHEMA_VERSION, check_summary, read_summary, worst_by_check

__all__ = [
    "CHECKS",
    "ConfigCase",
    "ConfigResult",
    "Report",
    "SCHEMA",
    "SCHEMA_VERSION",
    "check_summary",
    "conform",
    "family_softmax_scale",
    "generated",
    "load_adapter",
    "posenc_rotate",
    "read_config",
    "read_summary",
    "resolve",
    "transformers_rotate",
]


def load_adapter(spec: str) -> Callable[..., Any]:
    """The adapter named ``MODULE:FUNCTION`` (or a built-in: ``posenc``, ``transformers``).

    Raises:
        ValueError: naming the spec and what went wrong (no colon, module not importable, no such
            attribute, not callable).
    """
    if spec in BUILTIN:
        return BUILTIN[spec]
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"adapter must be MODULE:FUNCTION or one of {sorted(BUILTIN)}, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any failure of the engine's import: one line
        raise ValueError(f"adapter {spec!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ValueError(f"adapter {spec!r}: {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"adapter {spec!r}: {attr!r} is a {type(target).__name__}, not a callable")
    return target


@dataclasses.dataclass
class Report:
    """A run of conform: one :class:`~.checks.ConfigResult` per config, and the engine."""

    engine: str
    version: str
    adapter: str
    dtypes: List[str]
    results: List[ConfigResult]
    precision: Optional[float] = None

    def counts(self) -> Dict[str, int]:
        return {s: sum(r.status == s for r in self.results) for s in CONFIG_STATUSES}

    def over_tolerance(self) -> List[ConfigResult]:
        """Configs whose precision loss exceeds ``precision`` (none without a tolerance)."""
        if self.precision is None:
            return []
        return [
            r
            for r in self.results
            if r.status == "precision" and any(c.status == "precision" and c.error > self.precision for c in r.checks)
        ]

    @property
    def exit_code(self) -> int:
        """1 for a wrong answer, an error, or precision loss past the tolerance; else 0."""
        counts = self.counts()
        return 1 if counts["wrong"] or counts["error"] or self.over_tolerance() else 0

    def summary(self) -> Dict[str, Any]:
        """The summary of :mod:`.schema` (what ``--json`` writes)."""
        from ... import __version__

        configs = []
        for r in self.results:
            checks = [
                {**dataclasses.asdict(c), **{f: float(f"{getattr(c, f):.4g}") for f in ("error", "noise", "allowance")}}
                for c in r.checks
            ]
            entry = {k: v for k, v in dataclasses.asdict(r).items() if k != "checks"}
            entry["worst"] = worst_by_check(checks)
            entry["checks"] = checks
            configs.append(entry)
        return check_summary(
            {
                "schema": SCHEMA,
                "schema_version": SCHEMA_VERSION,
                "engine": {"name": self.engine, "version": self.version, "adapter": self.adapter},
                "posenc_version": __version__,
                "torch_version": torch.__version__,
                "python_version": platform.python_version(),
                "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
                "dtypes": list(self.dtypes),
                "precision_tolerance": self.precision,
                "exit_code": self.exit_code,
                "counts": self.counts(),
                "configs": configs,
            }
        )


def conform(
    adapter: Union[str, Callable[..., Any]],
    configs: Union[None, Sequence[str], Iterable[ConfigCase], Iterable[Dict[str, Any]]] = None,
    *,
    dtypes: Sequence[str] = ("float32", "float64"),
    precision: Optional[float] = None,
    engine: Optional[str] = None,
    version: Optional[str] = None,
    progress: Optional[Callable[[ConfigResult], None]] = None,
) -> Report:
    """Check an engine's rotation against the exact answer on configs.

    Args:
        adapter: a callable of the adapter protocol, or its ``MODULE:FUNCTION`` / built-in name.
        configs: names as ``posenc conform --config`` takes them (``None``: all fixtures and generated
            configs), :class:`~.configs.ConfigCase` objects, or config dicts.
        dtypes: the dtypes of q and k, from ``float32`` and ``float64``.
        precision: the tolerance past which precision loss makes :attr:`Report.exit_code` 1.
        engine, version: override the adapter's own ``engine`` and ``version`` attributes.
        progress: called with each config's result as it is done.
    """
    spec = (
        adapter
        if isinstance(adapter, str)
        else f"{getattr(adapter, '__module__', '?')}:{getattr(adapter, '__qualname__', '?')}"
    )
    function = load_adapter(adapter) if isinstance(adapter, str) else adapter
    if not callable(function):
        raise TypeError(f"adapter must be a callable or a MODULE:FUNCTION string, got {type(adapter).__name__}")
    for dtype in dtypes:
        if dtype not in ("float32", "float64"):
            raise ValueError(f"dtypes must be float32 or float64, got {dtype!r}")
    if precision is not None and not (isinstance(precision, (int, float)) and precision > 0):
        raise ValueError(f"precision must be a number > 0 or None, got {precision!r}")
    cases = _cases(configs)
    results = []
    for case in cases:
        if case.config is None:
            result = ConfigResult(case.name, case.source, "error", message=case.problem)
        else:
            result = check_config(function, case.name, case.source, case.config, dtypes)
        results.append(result)
        if progress is not None:
            progress(result)
    return Report(
        engine or str(getattr(function, "engine", None) or spec.split(":")[0]),
        version or engine_version(function),
        spec,
        list(dtypes),
        results,
        precision,
    )


def _cases(configs: Any) -> List[ConfigCase]:
    if configs is None:
        return resolve(["all"])
    items = list(configs)
    if all(isinstance(c, str) for c in items):
        return resolve(items)
    out = []
    for i, c in enumerate(items):
        if isinstance(c, ConfigCase):
            out.append(c)
        elif isinstance(c, dict):
            out.append(ConfigCase(str(c.get("source", f"config {i}")), "dict", c))
        else:
            raise TypeError(f"configs[{i}] must be a config dict, a ConfigCase or a name, got {type(c).__name__}")
    return out
