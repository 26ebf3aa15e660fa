"""``patch()``'s probes leave the user's forward hooks alone: the probe forward it runs on the patched
model (and the calls of the rotary modules that check their tables) fired every forward hook and
pre-hook registered on the model, so a hook counting calls or recording activations saw a forward the
user never ran. Real tiny ``transformers`` models from :mod:`posenc.testing`."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from posenc import testing  # noqa: E402
from posenc.integrations import discovery  # noqa: E402
from posenc.integrations.transformers import patch  # noqa: E402


def _hook_everything(model):
    """A forward hook and a pre-hook on every module, each counting its calls; and the handles."""
    calls = {"pre": 0, "post": 0}
    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(lambda m, a: calls.__setitem__("pre", calls["pre"] + 1)))
        handles.append(module.register_forward_hook(lambda m, a, o: calls.__setitem__("post", calls["post"] + 1)))
    return calls, handles


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-dynamic", "phi-3.5-mini-instruct", "gpt-neox-20b"])
def test_patching_fires_no_hook_and_the_hooks_still_fire_after(name):
    model = testing.tiny_model(name)
    calls, handles = _hook_everything(model)
    with patch(model):
        assert calls == {"pre": 0, "post": 0}  # the probes ran, the hooks saw none of them
        ids = torch.arange(1, 9).unsqueeze(0)
        with torch.no_grad():
            model(input_ids=ids)
        assert calls["pre"] > 0 and calls["post"] == calls["pre"]  # the user's forward: every hook
    for handle in handles:
        handle.remove()
    counted = dict(calls)
    with torch.no_grad():
        model(input_ids=torch.arange(1, 9).unsqueeze(0))
    assert calls == counted  # removed through their handles: the tables put back were the originals


def test_hooks_are_put_back_when_the_probed_call_raises():
    layer = torch.nn.Linear(2, 2)
    seen = []
    layer.register_forward_hook(lambda m, a, o: seen.append(1))
    with pytest.raises(RuntimeError):
        with discovery.hooks_suspended(layer):
            layer(torch.zeros(1, 3))  # a shape the layer refuses
    layer(torch.zeros(1, 2))
    assert seen == [1]
