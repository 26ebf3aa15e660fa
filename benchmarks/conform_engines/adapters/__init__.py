"""Adapters of the conform protocol for real engines, each run inside that engine's own venv.

Every module here has ``rotate(config, q, k, positions)``: ``q`` and ``k`` are ``(tokens, heads,
head_dim)`` in the layout the config implies and ``positions`` is ``(tokens,)`` int64; it returns
``(q_rot, k_rot)`` or ``(q_rot, k_rot, softmax_scale)``. The engine's own public RoPE code does the
work, fed by the engine's own reading of the config; an adapter only converts tensors to the
engine's shapes and back. A rope type the engine has no code for raises
``NotImplementedError("not supported: ...")``.
"""
