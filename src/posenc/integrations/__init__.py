"""Bridges from posenc to other libraries' models (optional: each needs its library installed).

Hugging Face ``transformers``, in three modules, each importing only those above it:

* :mod:`posenc.integrations.discovery`: what a family's modeling code does (which function rotates
  q and k, in which layout, with which tables), found by probing it, plus the few families listed
  by hand; changes nothing.
* :mod:`posenc.integrations.tables`: posenc's exact tables in the form each family calls them
  (:class:`~posenc.integrations.tables.PosencRotaryTables`, per layer type, M-RoPE streams).
* :mod:`posenc.integrations.transformers`: :func:`~posenc.integrations.transformers.patch` a model
  in one call (and undo it), so its RoPE tables come from posenc's float64-derived tables and its
  rotation from posenc's kernels.
"""
