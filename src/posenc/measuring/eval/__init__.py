"""``posenc eval``: measure a ``transformers`` checkpoint's long context under every RoPE scaling.

* :mod:`~posenc.measuring.eval.scalings` the specs (``yarn:4``), parsed from the scaling registry, and how one
  is applied to a loaded model through :func:`posenc.integrations.transformers.patch`;
* :mod:`~posenc.measuring.eval.measure`  perplexity over fixed windows and passkey retrieval (pure functions);
* :mod:`~posenc.measuring.eval.search`   ``--search``: a scaling's parameters tuned to one target length;
* :mod:`~posenc.measuring.eval.report`   ``results.json`` (schema-stamped), ``results.md`` and the plots;
* :mod:`~posenc.measuring.eval.settings` :class:`~posenc.measuring.eval.settings.EvalRun`, the command's settings
  checked once from the command line and the checkpoint's config, passed down whole;
* :mod:`~posenc.measuring.eval.memory`   the memory one forward pass takes, and what the device has;
* :mod:`~posenc.measuring.eval.cli`      the command: the flags, loading offline, resumable cells, the search's run.
* :mod:`~posenc.measuring.eval.tasks`      RULER's task families as prompt generators (pure, seeded, any tokenizer);
* :mod:`~posenc.measuring.eval.scoring`    exact match and recall of a continuation, effective length, retention;
* :mod:`~posenc.measuring.eval.taskrun`    ``--tasks``: the prompts run on the model (greedy continuations), cells;
* :mod:`~posenc.measuring.eval.taskreport` the tasks' part of ``results.json`` and ``results.md``;
* :mod:`~posenc.measuring.eval.checkpoint` the packaged trained checkpoint (``checkpoints/rope-passkey``) and
  the claims its committed summary holds;
* :mod:`~posenc.measuring.eval.files`    the folder's files (stamps, :class:`EvalError`, exact depth keys), written
  and read through :mod:`posenc.runs`.

See ``docs/eval.md``.
"""
