"""The one name of each RoPE scaling wherever an app prints it: the lesson's pages and the tour's
figures (through the lesson's palette, :mod:`posenc.teaching.lesson.palette`) and the lab's reports
and verdicts. It stands here, below both apps, so that neither imports the other; the core's registry
holds the facts of a scaling only, never how a page names it.
"""

from __future__ import annotations

#: RoPE scaling (the registry's ``rope_type``) -> its one name on every page, in the tour's figures
#: and in the lab's reports (a type missing here is printed by its rope type); "default" is plain
#: RoPE, with no scaling
SCALING_LABELS: dict[str, str] = {
    "default": "plain RoPE",
    "linear": "PI (linear)",
    "ntk": "NTK-aware",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN",
    "llama3": "Llama 3",
    "longrope": "LongRoPE",
    "proportional": "proportional",
}
