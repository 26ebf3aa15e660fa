"""Fixed tables that keep full precision when their module is cast.

``model.to(torch.bfloat16)`` casts every floating buffer. For position tables that is a bug: a
bf16 sine table has only 8 bits of mantissa, and bf16 inverse frequencies move every rotation angle.
Modules that hold such tables inherit :class:`PreciseTables`: after any ``.to()``, ``.half()``,
``.cuda()`` and so on, they rebuild their tables in their table dtype (float32 by default, or
float64 if asked) on whatever device the cast moved them to.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn


class PreciseTables(nn.Module):
    """Mixin for modules whose non-persistent buffers must keep ``self.table_dtype``."""

    table_dtype: torch.dtype = torch.float32

    def _precise_buffer_names(self) -> Iterable[str]:
        """Names of the buffers that must stay in ``self.table_dtype``."""
        raise NotImplementedError

    def _rebuild_tables(self, device: torch.device) -> None:
        raise NotImplementedError

    def _apply(self, fn, *args, **kwargs):
        module = super()._apply(fn, *args, **kwargs)
        for name in self._precise_buffer_names():
            buf = getattr(self, name, None)
            if buf is not None and buf.dtype != self.table_dtype:
                if buf.device.type == "meta":
                    setattr(self, name, buf.to(self.table_dtype))
                else:
                    self._rebuild_tables(buf.device)
                break
        return module
