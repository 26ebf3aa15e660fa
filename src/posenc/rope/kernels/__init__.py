"""Fused rotation kernels behind :func:`posenc.apply_rotary`.

* :mod:`.cpu`: a C kernel compiled on first use, one pass over q and k, threads over positions.
* :mod:`.triton_rope`: a Triton kernel for GPUs (also run on CPU in Triton's interpreter by the
  tests), with an autograd Function whose backward is the same kernel with sin negated.

Both are checked against :func:`posenc.rope.apply.rotate_reference`, which stays the definition.
"""
