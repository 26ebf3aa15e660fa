"""``posenc lab``: train small byte-level LMs that differ only in their position scheme, then
measure how each reads inputs longer than it was trained on, with and without RoPE context
extension.

One concept per module:

* :mod:`~posenc.lab.corpus`     the text (Python's own standard library by default), split by path;
* :mod:`~posenc.lab.config`     every knob in one dataclass, and the ``smoke``/``quick``/``standard`` presets;
* :mod:`~posenc.lab.metrics`    bits per byte and bootstrap confidence intervals (pure functions);
* :mod:`~posenc.lab.train`      identical training for every scheme (AdamW, warmup + cosine);
* :mod:`~posenc.lab.evaluate`   fixed validation windows at 1x, 2x, 4x, 8x the training length;
* :mod:`~posenc.lab.passkey`    passkey retrieval: training sequences, trials, greedy exact match;
* :mod:`~posenc.lab.extend`     RoPE context extension without retraining, and short fine-tunes;
* :mod:`~posenc.lab.store`      the run folder: atomic writes, checkpoints, resumable state;
* :mod:`~posenc.lab.distributed` torchrun / DDP helpers (gloo on CPU, NCCL on GPU);
* :mod:`~posenc.lab.schema`     the run files, typed and versioned (kept in :mod:`posenc.runs.lab_schema`);
* :mod:`~posenc.lab.verdicts`   claims judged by paired and exact tests, Holm's rule, and across seeds;
* :mod:`~posenc.lab.report`     results.json, the Markdown tables, the plots;
* :mod:`~posenc.lab.parser`     the command line's flags and the command that reproduces a config;
* :mod:`~posenc.lab.folder`     the run's settings (``LabRun``), resume, ``--fresh`` and the folder's lock;
* :mod:`~posenc.lab.console`    progress bars, Ctrl-C at the next safe point, the CPU clock;
* :mod:`~posenc.lab.seeds`      ``--seeds``: one run per training seed, then the summary across them;
* :mod:`~posenc.lab.cli`        the ``posenc lab`` command that runs it all (sweep, train, evaluate, extend).
"""
