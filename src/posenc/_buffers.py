"""Fixed tables that keep full precision when their module is cast, and grow safely under threads.

``model.to(torch.bfloat16)`` casts every floating buffer. For position tables that is a bug: a
bf16 sine table has only 8 bits of mantissa, and bf16 inverse frequencies move every rotation angle.
Modules that hold such tables inherit :class:`PreciseTables`: after any ``.to()``, ``.half()``,
``.cuda()`` and so on, they rebuild their tables on whatever device the cast moved them to, in float32
(or in float64 after ``.double()``: a cast may raise the tables' precision, never lower it).

The same base gives each module a lock and a memory budget for its caches: a cache grows by building
the new tables first and publishing them in one assignment under the lock, so a thread that reads
the tables sees either the old set or the new one, never half of each.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterable

import torch
from torch import nn


def ambient_device() -> torch.device:
    """The device new tensors go to here (honours ``with torch.device(...)``, including "meta")."""
    return torch.empty(0).device


class PreciseTables(nn.Module):
    """Mixin for modules whose non-persistent buffers must keep ``self.table_dtype``."""

    table_dtype: torch.dtype = torch.float32
    #: Most bytes a module's cached tables may hold. Positions past the cache are computed per call
    #: for just the rows asked for, so memory stays bounded at any position (see docs/reliability.md).
    cache_limit_bytes: int = 64 << 20

    def __init__(self) -> None:
        super().__init__()
        # reentrant: a rebuild after a cast publishes new tables while the cast holds the lock
        self._table_lock = threading.RLock()

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_table_lock", None)  # locks do not pickle or deepcopy
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        super().__setstate__(state)
        self._table_lock = threading.RLock()

    def _precise_buffer_names(self) -> Iterable[str]:
        """Names of the buffers that must stay in ``self.table_dtype``."""
        raise NotImplementedError

    def _rebuild_tables(self, device: torch.device) -> None:
        raise NotImplementedError

    # ``nn.Module._apply`` is private, but it is the one method every cast and move goes through,
    # including a parent's ``.to()``, which never calls the children's public ``to``. PyTorch has no
    # public hook that runs after a module's tensors were converted (the global
    # ``register_module_buffer_registration_hook`` fires on registration only). Replace this override
    # with such a per-module post-conversion hook once PyTorch offers one.
    # tests/test_buffers.py fails loudly if ``_apply``'s signature or its use by ``.to()`` changes.
    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], *args: Any, **kwargs: Any) -> "PreciseTables":
        # Rebuild after every cast or move: ``fn`` may have rounded the tables (``.half()``) or, for
        # ``to_empty()``, replaced them with uninitialised memory. Rebuilding is cheap and exact.
        with self._table_lock:
            module: PreciseTables = super()._apply(fn, *args, **kwargs)
            names = [n for n in self._precise_buffer_names() if getattr(self, n, None) is not None]
            if not names:
                return module
            first = getattr(self, names[0])
            if first.dtype == torch.float64:
                self.table_dtype = torch.float64
            if first.device.type == "meta":
                for name in names:
                    setattr(self, name, getattr(self, name).to(self.table_dtype))
                self._tables_moved_to_meta()
            else:
                self._rebuild_tables(first.device)
            return module

    def _tables_moved_to_meta(self) -> None:
        """Called after a move to the meta device (no values to rebuild); republish the tables."""
