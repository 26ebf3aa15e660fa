"""The probe sees through wrappers, and a patch that breaks a model is never returned.

``transformers`` 5.25 turns ``apply_rotary_pos_emb`` into a ``kernels`` ``Func`` module (an
``nn.Module`` made by ``@use_kernel_forward_from_hub``); other code wraps its rotation in
``functools.partial`` or ``functools.wraps`` decorators, or keeps it as a method of the attention
class. Discovery classifies each by what it does (the probe), and a refusal says what it found.

The toy family below is a whole causal LM in a few lines (its own config, rotary module, attention and
model), so each way of calling the rotation is tested end to end: patched within float32 rounding of
the unpatched model, ``undo()`` bit-exact, ``pickle`` and ``copy.deepcopy`` patched. The same toy is
used for :func:`patch`'s probe forward (a family whose attention also uses the tables where discovery
cannot see them, as ``deepseek_v32`` did on 5.25: refused, and restored exactly) and for the recipe
"a family discovery refuses" of CONTRIBUTING.md.
"""

from __future__ import annotations

import copy
import functools
import io
import math

import pytest
import torch
from torch import nn

transformers = pytest.importorskip("transformers")

from posenc.integrations import discovery  # noqa: E402
from posenc.integrations.hints import HINTS, Hint  # noqa: E402
from posenc.integrations.transformers import REBUILT_FORWARDS, UnsupportedModelError, patch  # noqa: E402


# -- a toy family ---------------------------------------------------------------------------------------------
class ToyConfig(transformers.PretrainedConfig):
    model_type = "posenc_toy"

    def __init__(self, vocab_size=40, hidden_size=32, num_attention_heads=2, head_dim=16, layers=2, **kwargs):
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.num_attention_heads, self.head_dim, self.num_hidden_layers = num_attention_heads, head_dim, layers
        self.max_position_embeddings = 4096
        self.rope_parameters = {"rope_type": "default", "rope_theta": 10000.0}
        super().__init__(**kwargs)


class ToyRotaryEmbedding(nn.Module):
    """Llama's tables: ``cat(theta, theta)``, float32."""

    def __init__(self, config):
        super().__init__()
        dim = config.head_dim
        self.config = config
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq  # (B, S, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


swap_halves = rotate_half  # a name that does not say it rotates: discovery does not probe it


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def _sin_first_rotation(x, sin, cos):
    """GPT-J's call: x (B, S, H, D), half-width sin and cos (B, S, D/2) in that order, interleaved pairs;
    what the probe cannot read from a signature."""
    sin, cos = sin.repeat_interleave(2, -1)[:, :, None], cos.repeat_interleave(2, -1)[:, :, None]
    every_two = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * cos + every_two * sin


#: the ways a family may hand its attention the rotation, each a global the attention reads
apply_rope_partial = functools.partial(apply_rotary_pos_emb, unsqueeze_dim=1)
apply_rope_wrapped = _logged(apply_rotary_pos_emb)


class ToyAttention(nn.Module):
    #: the global the attention calls (set per subclass)
    how = "global"

    def __init__(self, config):
        super().__init__()
        self.heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.qkv = nn.Linear(config.hidden_size, 3 * self.heads * self.head_dim, bias=False)
        self.o = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=False)

    def split(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return q, k, v  # each (B, H, S, D)

    def attend(self, q, k, v):
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, S, D)
        return self.o(out.transpose(1, 2).flatten(2))

    def forward(self, x, position_embeddings):
        cos, sin = position_embeddings
        q, k, v = self.split(x)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return self.attend(q, k, v)


class ToyPartialAttention(ToyAttention):
    def forward(self, x, position_embeddings):
        cos, sin = position_embeddings
        q, k, v = self.split(x)
        q, k = apply_rope_partial(q, k, cos, sin)
        return self.attend(q, k, v)


class ToyWrappedAttention(ToyAttention):
    def forward(self, x, position_embeddings):
        cos, sin = position_embeddings
        q, k, v = self.split(x)
        q, k = apply_rope_wrapped(q, k, cos, sin)
        return self.attend(q, k, v)


class ToyMethodAttention(ToyAttention):
    def apply_rope(self, q, k, cos, sin, unsqueeze_dim=1):
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return q * cos + swap_halves(q) * sin, k * cos + swap_halves(k) * sin

    def forward(self, x, position_embeddings):
        cos, sin = position_embeddings
        q, k, v = self.split(x)
        q, k = self.apply_rope(q, k, cos, sin)
        return self.attend(q, k, v)


class ToyHelperAttention(ToyAttention):
    """Rotates its keys in a helper method beside ``forward`` (Qwen4-Exp's indexer rotates its pooled
    keys in ``_select_tokens``): the helper must see posenc's rotation too."""

    def forward(self, x, position_embeddings):
        cos, sin = position_embeddings
        q, k, v = self.split(x)
        q, _ = apply_rotary_pos_emb(q, q[:, :0], cos, sin)
        return self.attend(q, self._keys(k, cos, sin), v)

    def _keys(self, k, cos, sin):
        return apply_rotary_pos_emb(k[:, :0], k, cos, sin)[1]


class ToyIndexerAttention(ToyAttention):
    """Also rotates a second copy of q inline with the full-width tables (DeepSeek-V3.2's indexer
    does so in 5.25): discovery sees only the function, and posenc's half-width tables break this."""

    def forward(self, x, position_embeddings):
        cos, sin = position_embeddings
        q, k, v = self.split(x)
        index_q = q * cos.unsqueeze(1) + swap_halves(q) * sin.unsqueeze(1)  # needs (B, S, D) tables
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return self.attend(q + 0 * index_q, k, v)


class ToySinFirstRotaryEmbedding(ToyRotaryEmbedding):
    """GPT-J's table: ``(sin, cos)``, one entry per frequency."""

    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq  # (B, S, D/2)
        return freqs.sin(), freqs.cos()


class ToySinFirstAttention(ToyAttention):
    def forward(self, x, position_embeddings):
        sin, cos = position_embeddings
        q, k, v = self.split(x)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, S, H, D), GPT-J's order
        q, k = apply_rotary_sin_first(q, sin, cos), apply_rotary_sin_first(k, sin, cos)
        return self.attend(q.transpose(1, 2), k.transpose(1, 2), v)


apply_rotary_sin_first = _sin_first_rotation


class ToyForCausalLM(nn.Module):
    def __init__(self, config, attention=ToyAttention, rotary=ToyRotaryEmbedding):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(attention(config) for _ in range(config.num_hidden_layers))
        self.rotary_emb = rotary(config)
        self.head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        with torch.no_grad():
            for p in self.parameters():
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))

    def forward(self, input_ids, position_ids=None, use_cache=None):
        x = self.embed(input_ids)
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        tables = self.rotary_emb(x, position_ids)
        for layer in self.layers:
            x = x + layer(x, tables)
        return self.head(x)


def toy(attention=ToyAttention, rotary=ToyRotaryEmbedding, seed=0) -> ToyForCausalLM:
    torch.manual_seed(seed)
    return ToyForCausalLM(ToyConfig(), attention, rotary).eval()


IDS = torch.randint(1, 40, (2, 24), generator=torch.Generator().manual_seed(5))
FAR = torch.arange(3000, 3024).expand(2, 24)


def _logits(model, position_ids=None):
    with torch.no_grad():
        return model(IDS, position_ids=position_ids)


# -- the probe through wrappers -------------------------------------------------------------------------------
def _kernels_func(fn):
    kernels = pytest.importorskip("kernels")
    return kernels.use_kernel_forward_from_hub("posenc_toy_rotary")(fn)


def test_a_kernels_func_module_is_classified_by_what_it_does():
    func = _kernels_func(apply_rotary_pos_emb)
    assert isinstance(func, nn.Module) and not callable(getattr(func, "__code__", None))
    found, why = discovery.classify_function(func, name="apply_rotary_pos_emb")
    assert why == ""
    assert (found.name, found.arity, found.form, found.layout, found.sign) == (
        "apply_rotary_pos_emb",
        "pair",
        "cat",
        "half",
        1,
    )
    assert discovery.kernels_function_of(func) is apply_rotary_pos_emb
    assert "kernels Func module" in discovery.describe_callable(func)


@pytest.mark.parametrize("fn", [apply_rope_partial, apply_rope_wrapped])
def test_partials_and_wraps_wrappers_are_classified_by_what_they_do(fn):
    found, why = discovery.classify_function(fn, name="x")
    assert why == "" and (found.form, found.layout) == ("cat", "half")


def test_a_refusal_names_the_wrapper_it_found():
    seq_first = functools.partial(apply_rotary_pos_emb, unsqueeze_dim=2)
    found, why = discovery.classify_function(seq_first, name="apply_rotary_pos_emb")
    assert found is None and "unsqueeze_dim=2" in why
    assert discovery.describe_callable(seq_first).startswith("functools.partial(the function apply_rotary_pos_emb")


def test_the_census_reads_transformers_kernels_functions():
    """On a transformers whose apply_rotary_pos_emb is a kernels Func (5.25), Llama's is found."""
    module = pytest.importorskip("transformers.models.mistral.modeling_mistral")
    census = discovery.census_module(module.__name__)
    assert [f.name for f in census.functions] == ["apply_rotary_pos_emb"] and not census.refused


# -- every way of calling, end to end --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "attention", [ToyAttention, ToyPartialAttention, ToyWrappedAttention, ToyMethodAttention, ToyHelperAttention]
)
def test_each_way_of_calling_the_rotation_is_patched_exactly_and_undone(attention):
    model = toy(attention)
    before, before_far = _logits(model), _logits(model, FAR)
    handle = patch(model)
    assert len(handle.attention_modules) == 2 or attention is ToyMethodAttention
    patched, patched_far = _logits(model), _logits(model, FAR)
    loaded = torch.load(io.BytesIO(_saved(model)), weights_only=False)
    twin = copy.deepcopy(model)
    assert torch.equal(_logits(loaded, FAR), patched_far) and torch.equal(_logits(twin, FAR), patched_far)
    handle.undo()
    assert torch.equal(_logits(model), before) and torch.equal(_logits(model, FAR), before_far)
    assert not any({"forward", "apply_rope", "_keys"} & set(m.__dict__) for m in model.modules())
    assert float((patched - before).abs().max()) < 1e-5
    # the far block: the float32 tables of the unpatched model drift, posenc's do not; both near exact
    assert float((patched_far - before_far).abs().max()) < 1e-2
    # negative control: the other pair layout is a different model
    with patch(model, layout="interleaved"):
        assert float((_logits(model) - before).abs().max()) > 1e-2


def _saved(model) -> bytes:
    buffer = io.BytesIO()
    torch.save(model, buffer)
    return buffer.getvalue()


def test_a_method_of_the_attention_class_is_found_and_set_on_each_instance():
    model = toy(ToyMethodAttention)
    found = discovery.discover(model)
    assert [(f.name, f.method) for f in found.functions] == [("apply_rope", True)]
    with patch(model):
        assert all(isinstance(layer.__dict__.get("apply_rope"), functools.partial) for layer in model.layers)
        assert "apply_rope" not in toy(ToyMethodAttention).layers[0].__dict__  # other instances untouched


# -- patch runs the patched model once before it returns ---------------------------------------------------------
def test_a_patch_that_breaks_the_model_is_refused_and_put_back():
    model = toy(ToyIndexerAttention)
    before = _logits(model)
    modules = [(n, id(m), m.__dict__.get("forward")) for n, m in model.named_modules()]
    with pytest.raises(UnsupportedModelError) as refused:
        patch(model)
    said = str(refused.value)
    assert "'posenc_toy'" in said and "probe" in said and "RuntimeError" in said
    assert [(n, id(m), m.__dict__.get("forward")) for n, m in model.named_modules()] == modules
    assert "_posenc_patch" not in model.__dict__
    assert torch.equal(_logits(model), before)


def test_the_probe_forward_keeps_the_random_state():
    model = toy()
    state = torch.random.get_rng_state()
    with patch(model):
        assert torch.equal(torch.random.get_rng_state(), state)


# -- the recipe of CONTRIBUTING.md: a family discovery refuses -------------------------------------------------
def test_the_recipe_a_family_discovery_refuses(monkeypatch):
    """Steps 1-4 of CONTRIBUTING.md's "A family discovery refuses", followed on the toy sin-first family."""
    model = toy(ToySinFirstAttention, ToySinFirstRotaryEmbedding)
    before = _logits(model)
    # 1. the refusal says what discovery found, and the model is untouched
    with pytest.raises(UnsupportedModelError, match=r"takes \(x, sin, cos\)"):
        patch(model)
    assert torch.equal(_logits(model), before)
    # 2. one hint line for the family: the function it calls, in GPT-J's order, seq first
    monkeypatch.setitem(HINTS, "posenc_toy", Hint("apply_rotary_sin_first", sin_first=True, seq_first=True))
    # the probe, told that, finds the layout itself
    found = discovery.discover(model)
    ((function,),) = [found.functions]
    assert (function.arity, function.layout, function.sin_first, found.sin_first) == (
        "single",
        "interleaved",
        True,
        True,
    )
    # 3. patched: equal to the unpatched model within float32 rounding, exact undo
    handle = patch(model)
    assert float((_logits(model) - before).abs().max()) < 1e-5
    handle.undo()
    assert torch.equal(_logits(model), before)


def test_a_hint_that_says_the_wrong_order_is_refused(monkeypatch):
    """A hint is a claim the probe still checks: told cos-first for a sin-first function, it matches
    no rotation, and the model is refused unchanged."""
    model = toy(ToySinFirstAttention, ToySinFirstRotaryEmbedding)
    before = _logits(model)
    monkeypatch.setitem(HINTS, "posenc_toy", Hint("apply_rotary_sin_first", sin_first=False, seq_first=True))
    with pytest.raises(UnsupportedModelError, match=r"told by its hint"):
        patch(model)
    assert torch.equal(_logits(model), before)


# -- a model that holds a patched part ----------------------------------------------------------------------------
def test_patching_a_model_whose_part_is_patched_says_already_patched():
    from posenc import testing

    model = testing.tiny_model_of_type("mistral")
    inner = patch(model.model)
    with pytest.raises(ValueError, match=r"already patched by posenc in its part"):
        patch(model)
    inner.undo()
    outer = patch(model)  # and the other way round: the part of a patched model
    with pytest.raises(ValueError, match=r"already patched by posenc in its part"):
        patch(model.model)
    outer.undo()
    assert "_posenc_patch" not in model.__dict__ and "_posenc_patch" not in model.model.__dict__


# -- pickles made by earlier layouts of the patch -------------------------------------------------------------
def _as_if_pickled_at(obj, old_module: str) -> bytes:
    """``obj`` pickled (protocol 2, as ``torch.save`` writes) as if its class were defined in ``old_module``."""
    import pickle

    cls = type(obj)
    data = pickle.dumps(obj, protocol=2)
    new = f"c{cls.__module__}\n{cls.__qualname__}\n".encode()
    assert new in data
    return data.replace(new, f"c{old_module}\n{cls.__qualname__}\n".encode())


def test_tables_pickled_when_they_lived_in_the_transformers_module_load():
    """PerLayerTypeTables and StreamTables were defined in posenc.integrations.transformers before the
    tables had a module of their own; pickles of patched Gemma 3 and Qwen2-VL models name them there."""
    import pickle

    from posenc import RotaryEmbedding
    from posenc.integrations.tables import PerLayerTypeTables, PosencRotaryTables, StreamTables

    per_type = PerLayerTypeTables(
        tables={
            "full_attention": PosencRotaryTables(RotaryEmbedding(8, base=1e6)),
            "sliding_attention": PosencRotaryTables(RotaryEmbedding(8, base=1e4)),
        }
    )
    streams = StreamTables(PosencRotaryTables(RotaryEmbedding(8)), (0, 1, 2, 0))
    x, pos = torch.zeros(1, 5, 8), torch.arange(3, 8)[None]
    for tables, args in ((per_type, (x, pos, "sliding_attention")), (streams, (x, pos.expand(3, 1, 5)))):
        loaded = pickle.loads(_as_if_pickled_at(tables, "posenc.integrations.transformers"))
        assert type(loaded) is type(tables)
        for got, want in zip(loaded(*args), tables(*args)):
            assert torch.equal(got, want)


@pytest.mark.parametrize(
    ("model_type", "old"),
    [
        ("llama", "pair|apply_rotary_pos_emb=half"),
        ("deepseek_v2", "complex|apply_rotary_emb=interleaved"),
        ("gptj", "single|apply_rotary_pos_emb=interleaved"),
    ],
)
def test_forwards_named_as_when_families_were_listed_by_hand_load(model_type, old):
    """A patched model pickled when llama, DeepSeek-V2 and GPT-J were listed by hand names its attention
    forward by the style of that list; it loads as the forward discovery builds now."""
    from posenc import testing

    model = testing.tiny_model_of_type(model_type)
    ids = torch.arange(1, 9)[None]
    with patch(model):
        with torch.no_grad():
            want = model(ids).logits
        layer = next(m for m in model.modules() if isinstance(m.__dict__.get("forward"), functools.partial))
        cls = type(layer)
        name = f"{cls.__module__.replace('.', ':')}|{cls.__qualname__.replace('.', ':')}|{old}"
        forward = getattr(REBUILT_FORWARDS, name)  # what unpickling the old name does
        assert forward is layer.__dict__["forward"].func  # the same function the patch installed
        with torch.no_grad():
            assert torch.equal(model(ids).logits, want)
