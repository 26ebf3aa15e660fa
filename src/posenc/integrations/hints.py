"""The few ``transformers`` families whose rotary call the probe cannot read, one line each.

:mod:`posenc.integrations.discovery` reads every family from its own code: which global its attention
calls to rotate, in which layout, with which cos/sin form. It calls a candidate function the way
Llama-style code does (``f(q, k, cos, sin)``, ``f(x, cos, sin)``, ``f(xq, xk, freqs_cis)``). GPT-J
(and CodeGen, which runs GPT-J's code) calls ``f(x, sin, cos)`` on one ``(batch, seq, heads,
rotary_dim)`` tensor, with a rotary module that returns ``(sin, cos)``; the probe is told that here,
and still finds the layout and form itself and holds the tables to the family's module.

This is the shape of Liger-Kernel's ``MODEL_TYPE_TO_APPLY_LIGER_FN``: a flat table scanned in a
minute, never a second way of patching. A new line is the last step of CONTRIBUTING.md's recipe "A
family discovery refuses", after teaching the probe has been ruled out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class Hint:
    """What the probe is told about one family.

    Attributes:
        function: the global of the modeling module the attention calls to rotate.
        sin_first: GPT-J's order, in both places: the function is called ``f(x, sin, cos)`` and the
            rotary module returns ``(sin, cos)``.
        seq_first: the function takes ``x`` as ``(batch, seq, heads, rotary_dim)`` and broadcasts
            sin/cos ``(batch, seq, rotary_dim // 2)`` over the heads (dimension 2).
    """

    function: str
    sin_first: bool = False
    seq_first: bool = False


#: ``config.model_type`` -> what the probe cannot read from that family's code
HINTS: Dict[str, Hint] = {
    "gptj": Hint("apply_rotary_pos_emb", sin_first=True, seq_first=True),
    "codegen": Hint("apply_rotary_pos_emb", sin_first=True, seq_first=True),
}
