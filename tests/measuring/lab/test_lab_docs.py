"""The lab's docs against what backs them: every measured table comes from a committed run summary
and matches it, and every command the docs write runs as written (its flags parse and go together;
nothing trains)."""

from __future__ import annotations

import argparse
import importlib
import re
import runpy
import shlex
from pathlib import Path

import pytest

from posenc.measuring.lab.config import preset_config
from posenc.measuring.lab.folder import resolve_config
from posenc.measuring.lab.seeds import _seed_commands
from posenc.measuring.lab.store import RunDir, write_run_file
from posenc.measuring.lab.summary import BLOCK, DOC_FILES, load_summaries, render_text, stale_blocks

REPO = Path(__file__).resolve().parents[3]
#: Pages whose commands must run as written (the README only in its lab section).
PAGES = ("docs/lab.md", "docs/lab-history.md", "README.md")
#: What a measured number looks like in a table: three decimals (bits per byte), a percentage, k/n.
MEASURED = re.compile(r"\b\d+\.\d{3}\b|\b\d+(?:\.\d)?%|\b\d+/\d+\b")


def page(name: str) -> str:
    text = (REPO / name).read_text(encoding="utf-8")
    if name == "README.md":
        start = text.index("### The lab")
        end = text.index("\n### ", start + 1)
        return text[start:end]
    return text


def outside_blocks(text: str) -> str:
    return BLOCK.sub("", text)


# -- docs generated from run summaries ---------------------------------------------------------
def test_the_docs_blocks_equal_their_summaries():
    assert stale_blocks(REPO) == []


def test_every_committed_summary_is_shown_in_the_docs():
    shown = {m.group("name") for name in DOC_FILES for m in BLOCK.finditer((REPO / name).read_text(encoding="utf-8"))}
    assert set(load_summaries()) <= shown


def test_a_changed_number_or_summary_is_caught():
    summaries = load_summaries()
    assert summaries, "no committed run summary"
    text = (REPO / "docs/lab.md").read_text(encoding="utf-8")
    blocks = list(BLOCK.finditer(text))
    assert blocks
    body = blocks[0].group("body")
    digit = re.search(r"\d", body)
    assert digit is not None
    changed = str((int(digit.group()) + 1) % 10)
    edited = text[: blocks[0].start("body") + digit.start()] + changed + text[blocks[0].start("body") + digit.end() :]
    assert render_text(edited, summaries) != edited  # an edited table is rewritten, so check fails
    name = blocks[0].group("name")
    other = dict(summaries)
    other[name] = _perturbed(summaries[name])
    assert render_text(text, other) != text  # a changed summary no longer matches the docs


def _perturbed(summary: dict) -> dict:
    import copy

    s = copy.deepcopy(summary)
    for per in s["numbers"].values():
        for cells in per.values():
            for cell in cells.values():
                if "bpb" in cell:
                    cell["bpb"] += 0.5
                for b in ("near", "mid", "far"):
                    if b in cell:
                        cell[b] = [cell[b][1] - cell[b][0], cell[b][1]]
    for v in s["verdicts"]:
        v["verdict"] = "seen" if v["verdict"] != "seen" else "within noise"
    for per in [*s["train_seconds"].values(), s.get("cpu_seconds") or {}]:
        for key in per:
            per[key] += 1.0
    s["command"] += " --seed 9"
    return s


@pytest.mark.parametrize("name", ["docs/lab.md", "README.md"])
def test_no_measured_table_outside_the_rendered_blocks(name):
    """Measured numbers in tables live only in blocks rendered from summaries; one-seed history
    without a summary lives in docs/lab-history.md, which says so."""
    rows = [line for line in outside_blocks(page(name)).splitlines() if line.startswith("|") and MEASURED.search(line)]
    assert rows == []


def test_the_history_page_says_it_has_no_summary():
    head = " ".join(page("docs/lab-history.md")[:1500].split())
    assert "one training seed" in head and "none of it has a run summary" in head


def test_one_place_states_each_presets_time():
    text = page("docs/lab.md")
    stated = [
        line
        for line in text.splitlines()
        if re.search(r"\b(smoke|quick|standard)\b.*\b(minutes?|hours?|\d+ s)\b", line)
    ]
    assert (
        len(
            [
                line
                for line in stated
                if line.startswith("| smoke") or line.startswith("| quick") or line.startswith("| standard")
            ]
        )
        <= 3
    )
    for other in ("README.md",):
        assert not re.search(r"about \d+ minutes", page(other))


# -- every command the docs write runs as written ----------------------------------------------
FENCE = re.compile(r"```(?:bash|sh|console)?\n(.*?)```", re.S)
INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
STARTS = ("posenc ", "torchrun ", "python benchmarks/", "python -m posenc")
PLACEHOLDERS = {
    "RUN": "runs/lab-quick-20260101-120000",
    "RUN_DIR": "runs/lab-quick-20260101-120000",
    "LR": "3e-3",
    "S": "rope",
}


def documented_commands():
    found = []
    for name in PAGES:
        text = page(name)
        for block in FENCE.findall(text):
            for line in block.splitlines():
                line = line.split("  #", 1)[0].strip()
                if line.startswith(STARTS) and not (line.startswith("torchrun") and " -m " not in line):
                    found.append((name, line))
        for span in INLINE.findall(FENCE.sub("", text)):
            span = " ".join(span.split())
            if span.startswith(STARTS) and not (span.startswith("torchrun") and " -m " not in span):
                found.append((name, span))
    return found


def test_the_docs_write_commands():
    commands = documented_commands()
    assert len([c for _, c in commands if c.startswith("posenc lab")]) >= 10


def _argv(command: str):
    words = [PLACEHOLDERS.get(w, w) for w in shlex.split(command) if w != "..."]
    if words[0] == "torchrun":
        words = words[words.index("-m") + 1 :]
    if words[:2] == ["python", "-m"]:
        words = words[2:]
    return words


def _parser(module: str, prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, exit_on_error=False)
    importlib.import_module(module).add_arguments(p)
    return p


@pytest.mark.parametrize("where, command", documented_commands(), ids=lambda v: v if len(v) < 60 else v[:60])
def test_a_documented_command_runs_as_written(where, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    words = _argv(command)
    if words[0] == "python" and words[1].startswith("benchmarks/"):
        script = runpy.run_path(str(REPO / words[1]), run_name="docs_check")
        if "parser" in script:
            _parse(script["parser"](), words[2:], command)
        return
    if words[0] == "posenc.measuring.lab.summary":
        from posenc.measuring.lab.summary import parser

        _parse(parser(), words[1:], command)
        return
    assert words[0] in ("posenc", "posenc.cli") or words[0] == "posenc", command
    verb, rest = words[1], words[2:]
    from posenc.cli import COMMANDS

    assert verb in COMMANDS, command
    args = _parse(_parser(COMMANDS[verb][0], f"posenc {verb}"), rest, command)
    if verb == "lab" and getattr(args, "lab_command", None) is None:
        _check_lab(args, tmp_path, command)


def _parse(parser: argparse.ArgumentParser, argv, command):
    if "--help" in argv or "-h" in argv:
        with pytest.raises(SystemExit) as done:
            parser.parse_args(argv)
        assert done.value.code == 0, command
        return argparse.Namespace(lab_command="help")
    try:
        return parser.parse_args(argv)
    except (argparse.ArgumentError, SystemExit) as err:
        pytest.fail(f"{command!r} does not parse: {err}")


def _check_lab(args, tmp_path: Path, command: str) -> None:
    """What `posenc lab` checks before it trains: the config and its flags together, the run folder."""
    from posenc.measuring.lab.cli import LabError

    if args.data == "PATH":
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "a.py").write_text("x = 1\n" * 100)
        args.data = str(tmp_path / "data")
    if args.resume:
        preset = next((p for p in ("smoke", "standard", "quick") if p in args.resume), "quick")
        run = RunDir(Path(args.resume))
        run.root.mkdir(parents=True)
        write_run_file(run.config_path, "config", preset_config(preset).to_dict())
    try:
        if args.seeds is not None:
            _seed_commands(args)
        else:
            resolve_config(args)
    except LabError as err:
        pytest.fail(f"{command!r} is refused: {err}")


def test_the_check_catches_flags_that_do_not_go_together(tmp_path, monkeypatch):
    """The contradiction the docs once had: --resume refuses flags that change the stored config."""
    monkeypatch.chdir(tmp_path)
    command = "posenc lab --resume runs/lab-standard-1 --finetune-retrieval-share 0.5 --extension-methods linear,yarn"
    args = _parse(_parser("posenc.measuring.lab.cli", "posenc lab"), _argv(command)[2:], command)
    with pytest.raises(pytest.fail.Exception, match="is refused"):
        _check_lab(args, tmp_path, command)
    with pytest.raises(pytest.fail.Exception, match="does not parse"):
        _parse(_parser("posenc.measuring.lab.cli", "posenc lab"), ["--preset", "quick", "--share", "0.2"], "x")


def test_a_summary_of_finished_seeds_only(tmp_path):
    """While some seeds still train, a summary can hold the finished ones, and names a missing one."""
    from posenc.measuring.lab.report import build_results, write_report
    from posenc.measuring.lab.summary import summarize

    for seed, bpb in ((0, 3.0), (1, 3.4)):
        cfg = preset_config("quick", schemes=["rope"], eval_multipliers=[1, 2], seed=seed).to_dict()
        progress = {"eval": {"rope": {"64": {"bpb": bpb}}}, "extension": {}, "lr_sweep": {}}
        folder = tmp_path / f"seed-{seed}"
        folder.mkdir()
        write_report(build_results(cfg, {}, {}, progress, seed == 0), folder, plots=False)
    both = summarize(tmp_path, "t", "posenc lab")
    assert both["seeds"] == [0, 1] and both["complete"] is False
    first = summarize(tmp_path, "t", "posenc lab", only=[0])
    assert first["seeds"] == [0] and first["complete"] is True and first["numbers"]["0"]["rope"]["64"]["bpb"] == 3.0
    with pytest.raises(ValueError, match="no run folder with results.json for seed 2"):
        summarize(tmp_path, "t", "posenc lab", only=[2])


def test_the_before_after_table_matches_claims_and_counts_verdicts():
    from posenc.measuring.lab.summary import RULES_NOTE, table_before_after

    summary = {
        "seeds": [0, 1, 2],
        "verdicts": [
            {"claim": "A", "verdict": "within noise", "by_seed": {"0": "seen", "1": "seen", "2": "seen"}},
            {"claim": "C", "verdict": "seen", "by_seed": {"0": "seen", "1": "within noise", "2": "seen"}},
        ],
        "verdicts_before": {
            "seed": 0,
            "rule": "Before: overlap",
            "rule_short": "interval overlap",
            "verdicts": [{"claim": "A", "verdict": "seen"}, {"claim": "B", "verdict": "not seen"}],
        },
    }
    lines = table_before_after(summary).splitlines()
    assert lines[0] == (
        "| claim | before: seed 0, interval overlap | every seed: paired tests, Holm "
        "| after: 3 seeds, across-seed test, Holm |"
    )
    assert "| A | **seen** | **seen** | within noise |" in lines  # the same claim, three rules
    assert "| B | not seen | not asked | not asked |" in lines
    assert "| C | not asked | within noise | **seen** |" in lines
    assert lines[-1] == (
        f"Before: overlap. {RULES_NOTE}. before: 1 seen and 1 not seen of 2; every seed: 1 seen and 0 not "
        f"seen of 2; after: 1 seen and 0 not seen of 2."
    )
    assert table_before_after({"seeds": [0]}) == "No earlier-rule verdicts recorded for this run."


def test_recombine_recomputes_the_verdicts_from_the_per_seed_effects():
    from posenc.measuring.lab.summary import recombine, table_verdicts

    def rec(effect, relation=">"):
        # Four windows shared by every seed, each seed's differences centred on its effect.
        return {
            "claim": "c",
            "group": "g",
            "unit": "bpb",
            "relation": relation,
            "verdict": "seen",
            "effect": effect,
            "p": 1e-12,
            "holm_tests": 1,
            "units": "windows",
            "unit_diffs": [effect - 0.001, effect + 0.001, effect - 0.002, effect + 0.002],
        }

    summary = {
        "name": "t",
        "seeds": [0, 1, 2],
        "verdicts": [],
        "verdicts_by_seed": {"0": [rec(0.30)], "1": [rec(0.31)], "2": [rec(0.29)]},
    }
    out = recombine(summary)
    assert out["verdicts"][0]["verdict"] == "seen" and summary["verdicts"] == []
    # t interval on Satterthwaite's 2.1 degrees of freedom: the spread between seeds plus the windows.
    assert "| c | seen | seen | seen | +0.300 [+0.276, +0.324] | 0.00027 | **seen** |" in table_verdicts(out)
    assert out["verdicts"][0]["p_holm"] == out["verdicts"][0]["p"]  # one claim: Holm changes nothing
    bare = {
        **summary,
        "verdicts_by_seed": {
            k: [{**v[0], "unit_diffs": None} for _ in v] for k, v in summary["verdicts_by_seed"].items()
        },
    }
    assert recombine(bare)["verdicts"][0]["verdict"] == "not measured"  # no sampling kept: no test made up
    summary["verdicts_by_seed"]["1"] = [rec(-0.31, relation=">")]
    assert recombine(summary)["verdicts"][0]["verdict"] == "within noise"
    del summary["verdicts_by_seed"]["0"][0]["relation"]
    with pytest.raises(ValueError, match="seed 0: the verdict 'c' has no relation"):
        recombine(summary)
    one = recombine({"name": "t", "seeds": [0], "verdicts": [], "verdicts_by_seed": {"0": [rec(0.3)]}})
    assert "| c | seen | +0.300 | — | **seen** (one seed) |" in table_verdicts(one)
    assert "rest on one seed" in table_verdicts(one)


def test_the_committed_summaries_hold_what_recombine_needs():
    from posenc.measuring.lab.summary import load_summaries, recombine

    for name, summary in load_summaries().items():
        assert recombine(summary)["verdicts"] == summary["verdicts"], name


def test_a_summary_judges_each_seed_again_and_keeps_the_windows_it_pairs(tmp_path):
    """A summary recomputes every seed's verdicts from its per-window values under the current rule
    (never copying what the run wrote) and keeps each bits-per-byte claim's per-window differences,
    which the test across seeds pairs by window."""
    import json

    import numpy as np

    from posenc.measuring.lab.report import build_results, write_report
    from posenc.measuring.lab.summary import summarize

    rng = np.random.default_rng(0)
    text = rng.normal(3.0, 0.3, 64)  # how hard each shared window is
    for seed in (0, 1, 2):
        cfg = preset_config("quick", schemes=["rope"], eval_multipliers=[1, 8], seed=seed, extension=False).to_dict()
        cells = {}
        for length, shift in (("64", 0.0), ("512", 0.4)):
            w = text + shift + rng.normal(0, 0.05, 64)
            cells[length] = {
                "bpb": float(w.mean()),
                "bpb_ci": [float(w.mean()) - 0.1, float(w.mean()) + 0.1],
                "bpb_windows": [float(v) for v in w],
            }
        folder = tmp_path / f"seed-{seed}"
        folder.mkdir()
        write_report(
            build_results(cfg, {}, {}, {"eval": {"rope": cells}, "extension": {}, "lr_sweep": {}}, True),
            folder,
            plots=False,
        )
        stored = json.loads((folder / "results.json").read_text())
        stored["verdicts"] = [dict(v, verdict="not seen") for v in stored["verdicts"]]  # a stale rule's verdicts
        (folder / "results.json").write_text(json.dumps(stored))
    summary = summarize(tmp_path, "t", "posenc lab")
    (claim,) = [v for v in summary["verdicts_by_seed"]["1"] if v.get("units") == "windows"]
    assert claim["verdict"] == "seen" and len(claim["unit_diffs"]) == 64
    assert np.mean(claim["unit_diffs"]) == pytest.approx(claim["effect"], abs=1e-6)
    across = next(v for v in summary["verdicts"] if v["claim"] == claim["claim"])
    assert across["verdict"] == "seen" and "64 windows paired across seeds" in across["evidence"]
