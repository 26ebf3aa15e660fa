"""Bridges from posenc to other libraries' models (optional: each needs its library installed).

* :mod:`posenc.integrations.transformers`: patch a Hugging Face ``transformers`` model in one call so
  its RoPE tables come from posenc's float64-derived tables and its rotation from posenc's kernels.
"""
