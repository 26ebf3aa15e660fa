"""``posenc lab export``: a lab model written as a GPT-NeoX checkpoint computes the same logits.

The oracle is the real ``transformers`` GPT-NeoX implementation, loaded from the written folder
offline; nothing is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from posenc.cli import main  # noqa: E402
from posenc.measuring.corpus import stdlib_root  # noqa: E402
from posenc.measuring.lab.export import ExportError, byte_tokenizer, export_model, load_run_model  # noqa: E402
from posenc.model import ModelConfig, TinyLM  # noqa: E402

TEXT = "héllo wörld\n\tdef f(x):\r\n    return x ** 2  # ✓ \x00\x7f ünïcode 文字"


def _load(folder: Path):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return model, tokenizer


def _perturbed(cfg: ModelConfig, seed: int = 0) -> TinyLM:
    """A TinyLM whose every weight (LayerNorm gains and biases too) is away from its initial value."""
    torch.manual_seed(seed)
    model = TinyLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize(
    "layout, rotary_dim, bias, base",
    [
        ("half", None, False, 10000.0),  # the lab's own block
        ("half", 8, False, 500.0),  # partial rotary
        ("interleaved", None, True, 10000.0),  # rows permuted to half-split; biases carried over
        ("interleaved", 4, False, 10000.0),
    ],
)
def test_exported_model_gives_the_same_logits(tmp_path, layout, rotary_dim, bias, base):
    cfg = ModelConfig(
        d_model=48, n_layers=2, n_heads=3, rotary_dim=rotary_dim, rope_layout=layout, bias=bias, rope_base=base
    )
    model = _perturbed(cfg)
    export_model(model, tmp_path, max_position_embeddings=40)
    hf, tok = _load(tmp_path)
    assert type(hf).__name__ == "GPTNeoXForCausalLM"
    assert hf.config.max_position_embeddings == 40 and hf.config.use_parallel_residual is False
    assert hf.lm_head.weight.data_ptr() == hf.gpt_neox.embed_in.weight.data_ptr()  # tied, as in TinyLM
    ids = torch.tensor([list(TEXT.encode("utf-8")) * 3])  # longer than the trained context
    with torch.no_grad():
        ours, theirs = model(ids), hf(ids).logits
    assert ours.shape == theirs.shape
    torch.testing.assert_close(theirs, ours, atol=2e-5, rtol=1e-5)


def test_a_wrong_qkv_order_would_be_caught():
    # Negative control: the comparison above is sensitive to the layout of the fused projection.
    model = _perturbed(ModelConfig(d_model=32, n_layers=1, n_heads=2))
    from posenc.measuring.lab.export import gpt_neox_config, gpt_neox_state_dict

    state = gpt_neox_state_dict(model)
    config = transformers.GPTNeoXConfig(**gpt_neox_config(model, 32))
    hf = transformers.GPTNeoXForCausalLM(config).eval()
    key = "gpt_neox.layers.0.attention.query_key_value.weight"
    state[key] = model.blocks[0].attn.qkv.weight.detach().clone()  # TinyLM's [q | k | v] order, unpermuted
    hf.load_state_dict(state, strict=False)
    hf.tie_weights()
    ids = torch.tensor([list(b"def f(x): return x")])
    with torch.no_grad():
        assert (hf(ids).logits - model(ids)).abs().max() > 1e-2


def test_byte_tokenizer_gives_the_lab_byte_ids(tmp_path):
    byte_tokenizer().save_pretrained(tmp_path)
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert len(tok) == 256
    for text in (TEXT, "", " leading and trailing ", "a\n\n\nb", "".join(chr(c) for c in range(1, 256))):
        ids = tok(text)["input_ids"]
        assert ids == list(text.encode("utf-8"))
        assert tok.decode(ids) == text
    assert tok.convert_ids_to_tokens(list(range(256))) == list(dict.fromkeys(tok.convert_ids_to_tokens(range(256))))


def test_other_schemes_and_scaled_embeddings_are_refused(tmp_path):
    with pytest.raises(ExportError, match="only the rope scheme"):
        export_model(TinyLM(ModelConfig(scheme="alibi", d_model=16, n_heads=2)), tmp_path, max_position_embeddings=8)
    with pytest.raises(ExportError, match="multiplies its token embeddings by 2"):
        export_model(TinyLM(ModelConfig(d_model=16, n_heads=2, embed_scale=2.0)), tmp_path, max_position_embeddings=8)
    tempered = TinyLM(ModelConfig(d_model=16, n_heads=2))
    tempered.scheme.softmax_scale_factor = 1.25  # as DeepSeek-style YaRN sets it
    with pytest.raises(ExportError, match=r"by 1\.25 \(softmax_scale_factor\)"):
        export_model(tempered, tmp_path, max_position_embeddings=8)


def _small_text(tmp_path: Path) -> Path:
    """A few hundred kB of real Python source, so a lab run reads little."""
    root = stdlib_root()
    parts = [(root / name).read_text(encoding="utf-8") for name in ("argparse.py", "textwrap.py", "dataclasses.py")]
    path = tmp_path / "source.py.txt"
    path.write_text("\n\n".join(parts), encoding="utf-8")
    return path


TINY_RUN = [
    "lab",
    "--preset",
    "smoke",
    "--schemes",
    "rope,alibi",
    "--no-extension",
    "--steps",
    "4",
    "--checkpoint-every",
    "2",
    "--eval-windows",
    "4",
    "--retrieval-trials",
    "2",
    "--threads",
    "1",
    "--no-plots",
    "--warmup-steps",
    "2",
]


def test_lab_export_command_writes_the_trained_model(tmp_path, capsys):
    run, out = tmp_path / "run", tmp_path / "exported"
    assert main(TINY_RUN + ["--data", str(_small_text(tmp_path)), "--out", str(run)]) == 0
    assert main(["lab", "export", str(run), "--scheme", "rope", str(out)]) == 0
    assert "posenc eval" in capsys.readouterr().out
    lab_model, train_len = load_run_model(run, "rope")
    assert train_len == 32
    hf, tok = _load(out)
    assert json.loads((out / "config.json").read_text())["max_position_embeddings"] == 32
    ids = torch.tensor([tok("class Parser(object):\n    def parse(self, text):")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, lab_model(ids), atol=2e-5, rtol=1e-5)

    # mistakes: one line, exit 2
    capsys.readouterr()
    for argv, words in (
        (["lab", "export", str(run), "--scheme", "alibi", str(tmp_path / "x")], "only the rope scheme"),
        (["lab", "export", str(run), "--scheme", "learned", str(tmp_path / "x")], "no checkpoint of scheme"),
        (["lab", "export", str(tmp_path / "missing"), str(tmp_path / "x")], "no such folder"),
        (["lab", "export", str(tmp_path), str(tmp_path / "x")], "no config.json"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("posenc lab export:") and words in err and len(err.splitlines()) == 1


def test_export_never_overwrites_a_run_or_an_existing_folder(tmp_path, capsys):
    """``posenc lab export RUN --scheme rope RUN`` used to replace the run's config.json (the run could
    no longer resume or export), and any existing OUT was overwritten, weights included."""
    run = tmp_path / "run"
    assert main(TINY_RUN + ["--data", str(_small_text(tmp_path)), "--out", str(run)]) == 0
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.name.startswith(".")}
    capsys.readouterr()
    assert main(["lab", "export", str(run), "--scheme", "rope", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("posenc lab export:") and "already holds files" in err and len(err.splitlines()) == 1
    after = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.name.startswith(".")}
    assert after == before  # nothing of the run touched
    first = tmp_path / "first"
    assert main(["lab", "export", str(run), str(first)]) == 0  # the run still exports
    written = {p.name: p.read_bytes() for p in first.iterdir()}
    (first / "notes.txt").write_text("mine")
    assert main(["lab", "export", str(run), str(first)]) == 2  # an existing export is not replaced
    assert {p.name: p.read_bytes() for p in first.iterdir() if p.name != "notes.txt"} == written
    assert (first / "notes.txt").read_text() == "mine"
    (tmp_path / "a-file").write_text("x")
    assert main(["lab", "export", str(run), str(tmp_path / "a-file")]) == 2
    assert (tmp_path / "a-file").read_text() == "x"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["lab", "export", str(run), str(empty)]) == 0  # an empty folder loses nothing
    assert (empty / "config.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]  # no half export left


def test_lab_help_shows_plain_text(capsys):
    with pytest.raises(SystemExit):
        main(["lab", "--help"])
    shown = capsys.readouterr().out
    assert "export" in shown and "``" not in shown


def test_a_run_config_that_leaves_out_defaulted_fields_exports_with_the_labs_defaults(tmp_path, capsys):
    """A config.json is read as the lab reads it (``LabConfig.from_dict``): a field it leaves out takes
    the lab's default, so its model is built with the default width of the MLP and RoPE base, and the
    trained weights load; the run's training length and steps are the config's."""
    from posenc.measuring.lab.config import LabConfig
    from posenc.measuring.lab.store import save_checkpoint, write_run_file
    from posenc.measuring.lab.train import build_model

    cfg = LabConfig(
        d_model=32, n_layers=1, n_heads=2, train_len=32, steps=4, warmup_steps=1, checkpoint_every=2, schemes=["rope"]
    )
    stored = cfg.to_dict()
    left_out = {name: stored.pop(name) for name in ("mlp_ratio", "rope_base")}
    assert left_out == {"mlp_ratio": LabConfig.mlp_ratio, "rope_base": LabConfig.rope_base}
    run = tmp_path / "run"
    write_run_file(run / "config.json", "config", stored)
    trained = _perturbed(build_model(cfg, "rope").config, seed=3)
    state = {
        "model": trained.state_dict(),
        "optimizer": {},
        "step": 3,
        "losses": [],
        "model_config": trained.config.to_dict(),
    }
    save_checkpoint(run / "checkpoints" / "rope.pt", state)

    model, train_len = load_run_model(run, "rope")
    assert train_len == 32 and model.config == trained.config
    ids = torch.tensor([list(b"def f(x): return x")])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), trained(ids), rtol=0, atol=0)
    assert "note: rope stopped at step 3 of 4" in capsys.readouterr().err
