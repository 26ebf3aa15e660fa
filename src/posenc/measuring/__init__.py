"""The measuring apps: each runs an experiment and writes its results as run files (:mod:`posenc.runs`).

* :mod:`~posenc.measuring.lab`   ``posenc lab``: small LMs that differ only in their position scheme,
  trained alike and read past their training length;
* :mod:`~posenc.measuring.eval`  ``posenc eval``: a ``transformers`` checkpoint's perplexity and passkey
  retrieval past its context, per scaling;
* :mod:`~posenc.measuring.bench` ``posenc bench``: RoPE implementations timed side by side;
* :mod:`~posenc.measuring.corpus` the text the lab trains and measures on (Python's own standard
  library by default, split by path), whose validation split is also eval's default text.

What two of them share lives here beside them (the corpus) or in :mod:`posenc.runs` and below, never
in one of them.
"""
