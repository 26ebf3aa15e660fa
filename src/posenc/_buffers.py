"""Fixed tables that keep full precision when their module is cast.

``model.to(torch.bfloat16)`` casts every floating buffer. For position tables that is a bug: a
bf16 sine table has only 8 bits of mantissa, and bf16 inverse frequencies move every rotation angle.
Modules that hold such tables inherit :class:`PreciseTables`: after any ``.to()``, ``.half()``,
``.cuda()`` and so on, they rebuild their tables on whatever device the cast moved them to, in float32
(or in float64 after ``.double()``: a cast may raise the tables' precision, never lower it).
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn


def ambient_device() -> torch.device:
    """The device new tensors go to here (honours ``with torch.device(...)``, including "meta")."""
    return torch.empty(0).device


class PreciseTables(nn.Module):
    """Mixin for modules whose non-persistent buffers must keep ``self.table_dtype``."""

    table_dtype: torch.dtype = torch.float32

    def _precise_buffer_names(self) -> Iterable[str]:
        """Names of the buffers that must stay in ``self.table_dtype``."""
        raise NotImplementedError

    def _rebuild_tables(self, device: torch.device) -> None:
        raise NotImplementedError

    def _apply(self, fn, *args, **kwargs):
        # Rebuild after every cast or move: ``fn`` may have rounded the tables (``.half()``) or, for
        # ``to_empty()``, replaced them with uninitialised memory. Rebuilding is cheap and exact.
        module = super()._apply(fn, *args, **kwargs)
        names = [n for n in self._precise_buffer_names() if getattr(self, n, None) is not None]
        if not names:
            return module
        first = getattr(self, names[0])
        if first.dtype == torch.float64:
            self.table_dtype = torch.float64
        if first.device.type == "meta":
            for name in names:
                setattr(self, name, getattr(self, name).to(self.table_dtype))
        else:
            self._rebuild_tables(first.device)
        return module
