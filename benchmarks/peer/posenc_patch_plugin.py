"""pytest plugin: run a ``transformers`` test suite with posenc's patch on every model it builds.

Load it with ``-p posenc_patch_plugin`` (this folder on ``PYTHONPATH``) and turn it on with
``--posenc-patch``. From then on every top-level ``PreTrainedModel`` the tests build is passed to
:func:`posenc.integrations.transformers.patch` as soon as it exists:

- a model built from a config (``Model(config)``, ``from_config``, ``_from_config``) when its
  ``post_init`` returns, unless that ``post_init`` runs inside the ``__init__`` of another model
  (a ``LlamaModel`` built by ``LlamaForCausalLM.__init__`` is patched as part of its parent);
- a model loaded by ``from_pretrained`` when the outermost ``from_pretrained`` returns (weights are
  loaded by then and the model is off the meta device);
- a model built on the meta device is patched like any other (and counted): a user who builds on
  meta, moves it with ``to_empty`` and runs ``init_weights`` expects the same model as one built
  directly.

A model the patch refuses (:class:`~posenc.integrations.transformers.UnsupportedModelError`) is
counted with the reason, and the same is tried for its top-most ``PreTrainedModel`` submodules (a
vision-language model's text model); nothing else is caught, so any other error fails the test.

``--posenc-report PATH`` writes a JSON summary: per test, the models patched and refused; totals.
Without ``--posenc-patch`` the plugin changes nothing (so a comparison run may load it in both modes).
"""

from __future__ import annotations

import functools
import json
import sys
from collections import Counter, defaultdict
from typing import Any, Dict, Optional

import pytest

_state: Dict[str, Any] = {
    "enabled": False,
    "loading": 0,  # depth of from_pretrained calls in progress
    "test": "(collection)",
    "tests": defaultdict(lambda: {"patched": [], "refused": [], "meta": 0}),
    "refusals": Counter(),  # (model_type, class, first line of the reason) -> count
    "patched": Counter(),  # class -> count
    "errors": [],
}


def pytest_addoption(parser):
    group = parser.getgroup("posenc", "posenc patch on every transformers model")
    group.addoption(
        "--posenc-patch", action="store_true", default=False, help="patch every top-level model the tests build"
    )
    group.addoption("--posenc-report", default=None, metavar="PATH", help="write a JSON summary of what was patched")


def pytest_configure(config):
    if not config.getoption("--posenc-patch"):
        return
    _state["enabled"] = True
    _install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _state["test"] = item.nodeid
    yield
    _state["test"] = "(between tests)"


def pytest_report_header(config):
    if _state["enabled"]:
        import posenc

        return f"posenc patch: on every top-level transformers model (posenc from {posenc.__file__})"
    return None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _state["enabled"]:
        return
    tests = _state["tests"]
    touched = sum(1 for t in tests.values() if t["patched"])
    terminalreporter.write_sep("-", "posenc patch")
    terminalreporter.write_line(
        f"models patched: {sum(_state['patched'].values())} in {touched} tests; "
        f"refused: {sum(_state['refusals'].values())}; of the models, built on the meta device: "
        f"{sum(t['meta'] for t in tests.values())}"
    )
    for (model_type, cls, reason), n in sorted(_state["refusals"].items()):
        terminalreporter.write_line(f"  refused {n}x {cls} ({model_type}): {reason}")


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--posenc-report")
    if not (_state["enabled"] and path):
        return
    summary = {
        "patched": dict(_state["patched"]),
        "refused": [
            {"model_type": mt, "class": cls, "reason": reason, "count": n}
            for (mt, cls, reason), n in sorted(_state["refusals"].items())
        ],
        "tests": {k: v for k, v in sorted(_state["tests"].items())},
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)


# -- the hooks into transformers ----------------------------------------------------------------------
def _install() -> None:
    from transformers.modeling_utils import PreTrainedModel

    post_init = PreTrainedModel.post_init
    from_pretrained = PreTrainedModel.from_pretrained.__func__

    @functools.wraps(post_init)
    def posenc_post_init(self, *args, **kwargs):
        out = post_init(self, *args, **kwargs)
        if _state["loading"] == 0 and not _built_inside_another_model(self):
            _patch_tree(self)
        return out

    @functools.wraps(from_pretrained)
    def posenc_from_pretrained(cls, *args, **kwargs):
        _state["loading"] += 1
        try:
            out = from_pretrained(cls, *args, **kwargs)
        finally:
            _state["loading"] -= 1
        if _state["loading"] == 0:
            model = out[0] if isinstance(out, tuple) else out  # output_loading_info=True gives (model, info)
            if isinstance(model, PreTrainedModel):
                _patch_tree(model)
        return out

    PreTrainedModel.post_init = posenc_post_init
    PreTrainedModel.from_pretrained = classmethod(posenc_from_pretrained)


def _built_inside_another_model(model) -> bool:
    """True when an ``__init__`` of a different ``PreTrainedModel`` is on the call stack."""
    from transformers.modeling_utils import PreTrainedModel

    frame: Optional[Any] = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "__init__":
            owner = frame.f_locals.get("self")
            if owner is not model and isinstance(owner, PreTrainedModel):
                return True
        frame = frame.f_back
    return False


def _patch_tree(model) -> None:
    from transformers.modeling_utils import PreTrainedModel

    from posenc.integrations.transformers import UnsupportedModelError, patch, patch_of

    record = _state["tests"][_state["test"]]
    if patch_of(model) is not None:
        return
    if any(p.device.type == "meta" for p in model.parameters()):
        record["meta"] += 1
    try:
        patch(model)
    except UnsupportedModelError as e:
        model_type = getattr(getattr(model, "config", None), "model_type", "?")
        reason = str(e).splitlines()[0][:300]
        record["refused"].append(type(model).__name__)
        _state["refusals"][(model_type, type(model).__name__, reason)] += 1
        for child in _topmost_submodels(model, PreTrainedModel):
            _patch_tree(child)
        return
    record["patched"].append(type(model).__name__)
    _state["patched"][type(model).__name__] += 1


def _topmost_submodels(model, base):
    found = []

    def walk(module):
        for child in module.children():
            if isinstance(child, base):
                found.append(child)
            else:
                walk(child)

    walk(model)
    return found
