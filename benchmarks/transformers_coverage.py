"""Patch a tiny model of every rotary causal-LM model type of the installed transformers.

    PYTHONPATH=src python benchmarks/transformers_coverage.py            # print the table
    PYTHONPATH=src python benchmarks/transformers_coverage.py --write    # rewrite it in docs/transformers.md
    PYTHONPATH=src python benchmarks/transformers_coverage.py --write gemma4 dbrx   # rerun only these rows

Each type is built by ``posenc.testing.tiny_model_of_type`` (the family's default config, 2 layers,
width 64), patched, and held to an exact float64 reference (``posenc.testing.coverage``): logits at positions
0..31 and in a far block near the trained length, greedy generation with the KV cache, ``undo()``.
The same checks are asserted by ``tests/integrations/test_transformers_coverage.py``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
import warnings

import torch

from posenc import testing
from posenc.integrations import discovery

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "transformers.md"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the table in docs/transformers.md")
    parser.add_argument("types", nargs="*", help="only these model types (default: all)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    census = discovery.census()
    rows = []
    start = time.perf_counter()
    for model_type in args.types or list(census):
        t = time.perf_counter()
        row = testing.coverage(model_type)
        rows.append(row)
        ok = row.status == "supported"
        same = "same" if row.same_generation else "DIFFERS"
        checks = f"generation {same}, undo {'exact' if row.undo_exact else 'NOT EXACT'}"
        extra = (
            f"error {row.logit_error:.2g} (noise {row.noise:.2g}), far {row.far_error:.2g} (noise "
            f"{row.far_noise:.2g}, unpatched {row.plain_far_error:.2g}), {checks}"
            if ok
            else row.detail[:120]
        )
        print(f"{model_type:28s} {row.status:9s} {time.perf_counter() - t:5.1f}s {extra}", file=sys.stderr, flush=True)
    print(f"{len(rows)} types in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.write and args.types:  # the other types keep the rows the table already records for them
        done = {r.model_type for r in rows}
        kept = testing.read_coverage_table(DOC.read_text())
        rows += [
            testing.Coverage(t, status, detail=why)
            for t, (status, _, why) in kept.items()
            if t in census and t not in done
        ]
    table = testing.coverage_markdown(rows, census)
    if args.write:
        text = DOC.read_text()
        start_i, end_i = text.index(testing.COVERAGE_BEGIN), text.index(testing.COVERAGE_END)
        DOC.write_text(text[:start_i] + table + text[end_i + len(testing.COVERAGE_END) :])
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
