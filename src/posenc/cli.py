"""The ``posenc`` command line.

Each subcommand lives in its own module, which defines ``add_arguments(parser)`` and
``run(args) -> int``. Only the chosen subcommand's module is imported, so ``posenc tour`` does not pay
for the web server's imports and ``posenc explore`` does not pay for the lab's.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from typing import List, Optional

#: name -> (module, one-line help)
COMMANDS = {
    "tour": ("posenc.teaching.tour", "walk through how transformers know word order, every number computed live"),
    "explore": ("posenc.teaching.explorer.server", "start the interactive console in your browser"),
    "lab": ("posenc.measuring.lab.cli", "train small LMs that differ only in position scheme and test long inputs"),
    "bench": ("posenc.measuring.bench", "time RoPE implementations side by side"),
    "inspect": ("posenc.inspect", "explain a model's position encoding from its config.json, with a precision audit"),
    "eval": (
        "posenc.measuring.eval.cli",
        "a checkpoint's perplexity and passkey retrieval past its context, per scaling",
    ),
    "conform": ("posenc.conform", "check an engine's RoPE against the exact answer, every rope type (see --help)"),
}

#: name -> (extra, the top-level packages that extra installs). The core needs only torch; each app
#: names the extra it needs instead of failing on an import deep inside it.
EXTRAS = {
    "tour": ("tour", ("rich", "matplotlib")),
    "explore": ("explore", ("fastapi", "uvicorn")),
    "lab": ("lab", ("numpy", "rich", "matplotlib")),
    "eval": ("eval", ("numpy", "rich", "matplotlib", "transformers")),
}


def missing_extra(command: str) -> Optional[str]:
    """A one-line message naming the extra ``command`` needs, or ``None`` when it is installed."""
    if command not in EXTRAS:
        return None
    extra, packages = EXTRAS[command]
    missing = []
    for package in packages:
        try:
            importlib.import_module(package)
        except ImportError:
            missing.append(package)
    if not missing:
        return None
    return (
        f"posenc {command} needs the [{extra}] extra (missing: {', '.join(missing)}); "
        f"install it with: pip install 'posenc[{extra}]'"
    )


def _available() -> dict:
    found = {}
    for name, (module, summary) in COMMANDS.items():
        try:
            present = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # the parent package is absent
            present = False
        if present:
            found[name] = (module, summary)
    return found


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = _available()
    parser = argparse.ArgumentParser(
        prog="posenc", description="Positional encodings for PyTorch transformers, explained and measured."
    )
    parser.add_argument("--version", action="version", version=f"posenc {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = argv[0] if argv and argv[0] in commands else None
    if chosen is not None:
        problem = missing_extra(chosen)
        if problem is not None:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    for name, (module, summary) in commands.items():
        p = sub.add_parser(name, help=summary, description=summary)
        if name == chosen:
            importlib.import_module(module).add_arguments(p)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(importlib.import_module(commands[args.command][0]).run(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


def _version() -> str:
    from . import __version__

    return __version__


if __name__ == "__main__":
    sys.exit(main())
