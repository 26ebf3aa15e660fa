"""Bridges from posenc to other libraries' models (optional: each needs its library installed).

Hugging Face ``transformers``, in four modules, each importing only those above it:

* :mod:`posenc.integrations.hints`: one flat line for each of the few families whose rotary call the
  probe cannot read (GPT-J and CodeGen's ``f(x, sin, cos)``); data only.
* :mod:`posenc.integrations.discovery`: what a family's modeling code does (which function rotates
  q and k, in which layout, with which tables), found by probing it, told by the hints what it
  cannot read; changes nothing.
* :mod:`posenc.integrations.tables`: posenc's exact tables in the form each family calls them
  (:class:`~posenc.integrations.tables.PosencRotaryTables`, per layer type, M-RoPE streams).
* :mod:`posenc.integrations.transformers`: :func:`~posenc.integrations.transformers.patch` a model
  in one call (and undo it), so its RoPE tables come from posenc's float64-derived tables and its
  rotation from posenc's stand-ins for the family's functions, on posenc's kernels.

``diffusers``, in one module: :mod:`posenc.integrations.diffusers`, whose
:func:`~posenc.integrations.diffusers.patch` gives a FLUX-style transformer posenc's exact axial
tables in place of its ``FluxPosEmbed``, per instance, with undo.

Engines other than ``transformers``, through one adapter protocol:

* :mod:`posenc.integrations.conform`: the exact answer of a config checked against any engine's
  rotation (``posenc conform``), with the cause of a wrong answer named.
"""
