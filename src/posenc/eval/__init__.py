"""``posenc eval``: measure a ``transformers`` checkpoint's long context under every RoPE scaling.

* :mod:`~posenc.eval.scalings` the specs (``yarn:4``), parsed from the scaling registry, and how one
  is applied to a loaded model through :func:`posenc.integrations.transformers.patch`;
* :mod:`~posenc.eval.measure`  perplexity over fixed windows and passkey retrieval (pure functions);
* :mod:`~posenc.eval.report`   ``results.json`` (schema-stamped), ``results.md`` and the plots;
* :mod:`~posenc.eval.cli`      the command: loading offline, the memory estimate, resumable cells.
* :mod:`~posenc.eval.files`    the folder's files (stamps, :class:`EvalError`, exact depth keys), written
  and read through :mod:`posenc.runs`.

See ``docs/eval.md``.
"""
