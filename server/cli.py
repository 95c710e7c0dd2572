"""``xpiler serve``: the language server over stdio, or ``--tcp PORT`` on loopback for debugging (unsafe: no
authentication, see PROTOCOL.md).

Registered with the core's command line through the ``xpiler.commands`` entry point (the core never
imports the server)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("serve", help="run the Xpiler language server (stdio, or --tcp PORT on 127.0.0.1)")
    parser.add_argument(
        "--tcp", type=int, metavar="PORT",
        help="listen on 127.0.0.1:PORT instead of stdio. UNSAFE, for debugging only: the port has no "
             "authentication, so any local process can connect and have code compiled and run as you",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from xpiler_core.diagnostics import XpilerError

    if args.tcp is not None and not 0 < args.tcp < 65536:
        raise XpilerError(f"--tcp: port {args.tcp} is not between 1 and 65535", "<command line>")
    from xpiler_server import serve

    return serve(tcp_port=args.tcp)
