"""``posenc explore``: serve the interactive console on a local port.

The server binds the loopback interface by default, so the console is reachable from this machine
only. ``--host`` can widen that deliberately (for example inside a container); the page itself never
contacts anything but the server it came from.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import webbrowser
from pathlib import Path

LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORT = 8765


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1, this machine only)")
    parser.add_argument("--open", action="store_true", help="open the console in a web browser")
    parser.add_argument(
        "--lab-run",
        type=Path,
        default=None,
        metavar="DIR",
        help="a `posenc lab` run folder whose results.json the lab view shows",
    )
    parser.add_argument(
        "--eval-run",
        type=Path,
        default=None,
        metavar="DIR",
        help="a `posenc eval` output folder whose results.json the eval view shows",
    )


def _allowed_hosts(host: str):
    """Host header values the server answers to (IPv6 addresses appear there in brackets)."""
    if host in ("0.0.0.0", "::", ""):
        return None  # any name this machine answers to
    names = set(LOOPBACK) | {host}
    return sorted(f"[{name}]" if ":" in name else name for name in names)


def port_free(host: str, port: int) -> bool:
    """True when uvicorn could bind ``host:port`` now.

    The check binds the way uvicorn's server does (asyncio sets ``SO_REUSEADDR`` on POSIX), so a port
    whose last connections wait in ``TIME_WAIT`` after a restart counts as free, as it is to uvicorn,
    while a port something listens on does not.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        if os.name == "posix":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def warm_up() -> None:
    """Pay torch's one-time lazy imports before a reader's first click.

    The lesson draws its fixed weights under :func:`posenc.model.local_random`, a torch dispatch mode,
    and torch imports its compiler stack on the first use of such a mode: seconds on a small machine.
    The server runs this in a background thread while the page loads, so the first quiz answer or
    figure does not wait for it. Dispatch modes are per thread, so the requests never see this one.
    """
    import torch

    from posenc.model import local_random

    with local_random(0):
        torch.empty(1).normal_()


def run(args: argparse.Namespace) -> int:
    import torch
    import uvicorn

    from .app import create_app

    if not 0 <= args.port <= 65535:
        print(f"--port must be between 0 and 65535, got {args.port}", file=sys.stderr)
        return 2
    if args.lab_run is not None and not args.lab_run.is_dir():
        print(f"--lab-run {args.lab_run} is not a folder", file=sys.stderr)
        return 2
    if args.eval_run is not None and not args.eval_run.is_dir():
        print(f"--eval-run {args.eval_run} is not a folder", file=sys.stderr)
        return 2
    if args.port and not port_free(args.host, args.port):
        print(
            f"port {args.port} on {args.host} is in use; choose another with --port N (or --port 0 for any free one)",
            file=sys.stderr,
        )
        return 1
    if args.host not in LOOPBACK:
        print(f"warning: listening on {args.host}, so other machines can reach the console", file=sys.stderr)
    torch.set_num_threads(1)  # every request is a small computation; stay light

    app = create_app(lab_run=args.lab_run, allowed_hosts=_allowed_hosts(args.host), eval_run=args.eval_run)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    server = uvicorn.Server(config)

    def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            threading.Event().wait(0.05)
        ports = [s.getsockname()[1] for srv in server.servers for s in srv.sockets]
        shown = "localhost" if args.host in LOOPBACK else args.host
        url = f"http://{shown}:{ports[0] if ports else args.port}/"
        print(f"posenc explorer running at {url}  (Ctrl+C to stop)", flush=True)
        if args.open:
            webbrowser.open(url)

    threading.Thread(target=announce, daemon=True).start()
    threading.Thread(target=warm_up, daemon=True, name="posenc-warm-up").start()
    server.run()
    return 0
