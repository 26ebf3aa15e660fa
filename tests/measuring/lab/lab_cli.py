"""What the ``posenc lab`` command-line tests share: the flags of the smallest real run, and the one
line a refusal prints."""

from __future__ import annotations


def tiny_lab_flags(schemes: str) -> list[str]:
    """``posenc lab`` flags of the smallest real run: the smoke preset, the given schemes, two lengths,
    no extension, six steps (a checkpoint at 3), one thread, no plots."""
    return [
        "lab",
        "--preset",
        "smoke",
        "--threads",
        "1",
        "--schemes",
        schemes,
        "--eval-multipliers",
        "1,2",
        "--no-extension",
        "--steps",
        "6",
        "--warmup-steps",
        "1",
        "--checkpoint-every",
        "3",
        "--eval-windows",
        "4",
        "--retrieval-trials",
        "2",
        "--bootstrap-samples",
        "20",
        "--no-plots",
    ]


def one_line(err: str) -> str:
    """The one ``posenc lab:`` line of ``err``; fails if there is another, or a traceback."""
    lines = [line for line in err.strip().splitlines() if line.startswith("posenc lab:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
