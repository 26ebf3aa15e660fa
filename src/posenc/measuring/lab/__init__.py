"""``posenc lab``: train small byte-level LMs that differ only in their position scheme, then
measure how each reads inputs longer than it was trained on, with and without RoPE context
extension.

One concept per module (the text it trains on is :mod:`posenc.measuring.corpus`):

* :mod:`~posenc.measuring.lab.config`     every knob in one dataclass, and the ``smoke``/``quick``/``standard`` presets;
* :mod:`~posenc.measuring.lab.metrics`    bits per byte and bootstrap confidence intervals (pure functions);
* :mod:`~posenc.measuring.lab.train`      identical training for every scheme (AdamW, warmup + cosine);
* :mod:`~posenc.measuring.lab.evaluate`   fixed validation windows at 1x, 2x, 4x, 8x the training length;
* :mod:`~posenc.measuring.lab.passkey`    passkey retrieval: training sequences, trials, greedy exact match;
* :mod:`~posenc.measuring.lab.extend`     RoPE context extension without retraining, and short fine-tunes;
* :mod:`~posenc.measuring.lab.store`      the run folder's lock (its files: :mod:`posenc.runs.lab_run`);
* :mod:`~posenc.measuring.lab.distributed` torchrun / DDP helpers (gloo on CPU, NCCL on GPU);
* :mod:`~posenc.measuring.lab.schema`     the run files, typed and versioned (kept in :mod:`posenc.runs.lab_schema`);
* :mod:`~posenc.measuring.lab.stats`      intervals for proportions, paired tests, Holm's rule, claims across seeds;
* :mod:`~posenc.measuring.lab.verdicts`   claims judged by paired and exact tests, Holm's rule, and across seeds;
* :mod:`~posenc.measuring.lab.report`     results.json, the Markdown tables, the plots;
* :mod:`~posenc.measuring.lab.summary`    run summaries: the small JSON files every number of the lab's docs comes from;
* :mod:`~posenc.measuring.lab.export`     ``posenc lab export``: a lab model as a ``transformers`` checkpoint;
* :mod:`~posenc.measuring.lab.parser`     the command line's flags and the command that reproduces a config;
* :mod:`~posenc.measuring.lab.folder`     the run's settings (``LabRun``), resume, ``--fresh`` and the folder's lock;
* :mod:`~posenc.measuring.lab.console`    progress bars, Ctrl-C at the next safe point, the CPU clock;
* :mod:`~posenc.measuring.lab.seeds`      ``--seeds``: one run per training seed, then the summary across them;
* :mod:`~posenc.measuring.lab.cli`        the ``posenc lab`` command that runs it all (sweep, train, evaluate, extend).
"""
