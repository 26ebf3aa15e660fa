"""``posenc eval --write-config`` deploys the model eval measured.

For each family and scaling: the logits eval measures (the checkpoint loaded as eval loads it, the
scaling installed by :func:`posenc.measuring.eval.scalings.applied`) equal the logits of plain ``transformers``
loading the checkpoint with the config ``--write-config`` wrote, with no posenc code on that path.

Two ways this used to fail: a family whose default rotated share is not the whole head (GPT-NeoX 0.25,
Phi 0.5, ...) lost ``partial_rotary_factor`` from the written config and rotated a quarter or a half
of each head; and a family that folds YaRN's ``mscale_all_dim`` into its softmax scale when the
attention is built (DeepSeek-V2/V3, MiniCPM3, GLM-4-MoE-Lite, LongCat, Youtu) was measured with the
checkpoint's own scale under every scaling. Tiny random checkpoints, built here; nothing downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from posenc import testing  # noqa: E402
from posenc.cli import main  # noqa: E402
from posenc.measuring.eval.scalings import ScalingSpec, applied, parse_spec, rope_of, written_config  # noqa: E402
from posenc.measuring.lab.export import export_model  # noqa: E402
from posenc.model import ModelConfig, TinyLM  # noqa: E402

TRAINED = 32
#: every type of the registry that --write-config can write, with a fixed factor
SPECS = ["none", "linear:4", "ntk:4", "dynamic:4", "yarn:4", "yarn:4:beta_fast=16:beta_slow=2", "llama3:4"]
#: families whose default rotated share is not 1, given a checkpoint that rotates the whole head
WHOLE_HEAD = ["phi", "stablelm", "persimmon", "glm"]
#: families whose attention folds mscale_all_dim into its softmax scale in __init__
MSCALE = ["deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe_lite", "longcat_flash", "minicpm3", "youtu"]
#: the checkpoint's own rope: YaRN with DeepSeek-V3's mscale fields, trained on TRAINED tokens
CHECKPOINT_YARN = {
    "rope_type": "yarn",
    "rope_theta": 10000.0,
    "factor": 8.0,
    "original_max_position_embeddings": TRAINED,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}


def _checkpoint(folder: Path, model_type: str) -> Path:
    if model_type in MSCALE:
        rope = dict(CHECKPOINT_YARN)
        positions = TRAINED * 8
    else:
        rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}
        positions = TRAINED
    model = testing.tiny_model_of_type(model_type, rope_parameters=rope, max_position_embeddings=positions)
    model.save_pretrained(folder)
    return folder


def _eval_logits(folder: Path, spec: ScalingSpec, ids: torch.Tensor) -> torch.Tensor:
    """What eval measures: the checkpoint loaded as eval loads it, the scaling installed as eval does."""
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    with torch.no_grad(), applied(model.eval(), spec, ids.shape[1], TRAINED) as scaled:
        return scaled(ids).logits


def _deployed_logits(folder: Path, config_folder: Path, ids: torch.Tensor) -> torch.Tensor:
    """Plain transformers: the checkpoint with the written config, nothing of posenc on the way."""
    config = transformers.AutoConfig.from_pretrained(config_folder, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, config=config, local_files_only=True, dtype=torch.float32
    )
    with torch.no_grad():
        return model.eval()(ids).logits


def _round_trip(folder: Path, spec_text: str, tmp_path: Path, ids: torch.Tensor) -> float:
    out = tmp_path / f"written-{spec_text.replace(':', '_')}"
    assert main(["eval", str(folder), "--scalings", spec_text, "--write-config", str(out)]) == 0
    ours = _eval_logits(folder, parse_spec(spec_text), ids)
    theirs = _deployed_logits(folder, out, ids)
    return float((ours - theirs).abs().max())


def _ids(seed: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randint(0, testing.VOCAB, (1, 4 * TRAINED))  # 4x the trained context


@pytest.fixture(scope="module")
def lab_export(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab-export")
    torch.manual_seed(0)
    tiny = TinyLM(ModelConfig(d_model=64, n_layers=2, n_heads=2, vocab_size=testing.VOCAB))  # the whole head rotates
    export_model(tiny, folder, max_position_embeddings=TRAINED)
    return folder


@pytest.mark.parametrize("spec", SPECS)
def test_a_lab_export_deploys_as_measured(lab_export, tmp_path, spec):
    assert json.loads((lab_export / "config.json").read_text())["rope_parameters"]["partial_rotary_factor"] == 1.0
    assert _round_trip(lab_export, spec, tmp_path, _ids()) < 1e-4


@pytest.mark.parametrize("model_type", WHOLE_HEAD + MSCALE)
def test_every_family_deploys_as_measured_under_every_scaling(model_type, tmp_path):
    folder = _checkpoint(tmp_path / "ckpt", model_type)
    ids = _ids()
    errors = {spec: _round_trip(folder, spec, tmp_path, ids) for spec in SPECS}
    if model_type in MSCALE:  # the checkpoint's own temperature, written explicitly, is kept too
        errors["yarn:4:mscale=1:mscale_all_dim=1"] = _round_trip(
            folder, "yarn:4:mscale=1:mscale_all_dim=1", tmp_path, ids
        )
    assert max(errors.values()) < 1e-4, errors


@pytest.mark.parametrize("model_type", ["gpt_neox", "phi", "deepseek_v3"])
def test_longrope_as_a_search_reports_it_deploys_as_measured(model_type, tmp_path):
    """LongRoPE's per-pair factors cannot be spelt on the command line; the search's best is such a
    spec, and the written config is the same function the command calls."""
    folder = _checkpoint(tmp_path / "ckpt", "deepseek_v3" if model_type == "deepseek_v3" else model_type)
    source = json.loads((folder / "config.json").read_text())
    pairs = rope_of(source)["rotary_dim"] // 2
    spec = ScalingSpec(
        "longrope searched",
        "longrope",
        {
            "long_factor": [float(f) for f in np.linspace(1.0, 5.0, pairs)],
            "short_factor": [1.0] * pairs,
            "factor": 4.0,
            "original_max_position_embeddings": TRAINED,
        },
    )
    config, _ = written_config(source, spec, TRAINED)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "config.json").write_text(json.dumps(config))
    ids = _ids()
    ours = _eval_logits(folder, spec, ids)
    theirs = _deployed_logits(folder, tmp_path / "w", ids)
    assert float((ours - theirs).abs().max()) < 1e-4


def test_the_scalings_change_the_model_so_the_round_trip_can_fail(lab_export):
    """The comparison above is not vacuous: the scalings give logits far apart at 4x the context, and
    dropping partial_rotary_factor from a written config gives another model."""
    ids = _ids()
    logits = {s: _eval_logits(lab_export, parse_spec(s), ids) for s in ("none", "yarn:4", "linear:4")}
    assert (logits["none"] - logits["yarn:4"]).abs().max() > 1e-3  # 10x the tolerance of the round trip
    assert (logits["none"] - logits["linear:4"]).abs().max() > 1e-3
    source = json.loads((lab_export / "config.json").read_text())
    config, _ = written_config(source, parse_spec("none"), TRAINED)
    config["rope_parameters"].pop("partial_rotary_factor")  # what --write-config used to write
    folder = lab_export.parent / "dropped"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    assert (_deployed_logits(lab_export, folder, ids) - logits["none"]).abs().max() > 1e-3


def test_an_mscale_familys_none_is_measured_with_the_plain_softmax_scale(tmp_path):
    """DeepSeek-V3's attention builds its scale from the rope config; under ``none`` eval measures the
    scale the written config builds (1 / sqrt(qk_head_dim)), not the checkpoint's (x m(8, 1)^2)."""
    folder = _checkpoint(tmp_path / "ckpt", "deepseek_v3")
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()
    attention = next(m for m in model.modules() if type(m).__name__.endswith("Attention"))
    own = attention.scaling
    plain = attention.qk_head_dim**-0.5
    assert own == pytest.approx(plain * (0.1 * np.log(8.0) + 1.0) ** 2)
    with applied(model, parse_spec("none"), 4 * TRAINED, TRAINED):
        assert attention.scaling == pytest.approx(plain)
    assert attention.scaling == own  # put back


@pytest.mark.parametrize("model_type, words", [("zamba2", "cannot install its scalings")])
def test_a_family_the_patch_cannot_run_is_refused_in_one_line(tmp_path, capsys, model_type, words):
    """Zamba2 built without its rotary module (use_mem_rope=False, the tiny builder's default) has no
    rotation for posenc's patch to stand in for. eval says so before measuring anything, instead of a
    traceback or numbers of another model. (DeepSeek-V3.2 and MiniCPM3, refused here before the patch
    could run them, now deploy as measured: see MSCALE.)"""
    from posenc.measuring.lab.export import byte_tokenizer

    folder = _checkpoint(tmp_path / "ckpt", model_type)
    byte_tokenizer().save_pretrained(folder)
    text = tmp_path / "t.txt"
    text.write_text("def f(x):\n    return x\n" * 400)
    argv = ["eval", str(folder), "--scalings", "none", "--lengths", "32,64", "--windows", "2", "--passkey-trials", "0"]
    assert main(argv + ["--text", str(text), "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("posenc eval:") and words in last
