"""Xpiler language server (pygls 2): documents, diagnostics, code actions, background jobs and hover over
the ``xpiler_core`` public API. Start it with ``xpiler serve`` (stdio) or ``xpiler serve --tcp PORT``."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xpiler_server.server import XpilerServer, create_server

__all__ = ["XpilerServer", "create_server", "serve"]


def __getattr__(name: str) -> Any:
    # The package is loaded for ``xpiler --help`` (the ``serve`` entry point): pygls and lsprotocol only when used.
    if name in ("XpilerServer", "create_server"):
        from xpiler_server import server

        return getattr(server, name)
    raise AttributeError(name)


# After the server stops, the interpreter's exit joins worker threads (a job blocked in a compiler, say);
# past this many seconds the process ends anyway, so that ``exit`` always ends it promptly.
EXIT_DEADLINE_S = 1.0


def serve(tcp_port: int | None = None, host: str = "127.0.0.1") -> int:
    """Run the server over stdio, or over TCP on loopback when ``tcp_port`` is given; the exit code."""
    import logging
    import os
    import sys
    import threading

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # pygls logs every message body at INFO; keep the log to what happens, not what is said.
    logging.getLogger("pygls.protocol.json_rpc").setLevel(logging.WARNING)
    from xpiler_server.server import create_server

    server = create_server()
    if tcp_port is None:
        server.start_io()
    else:
        server.start_tcp(host, tcp_port)
    code = server.exit_code

    def end_now() -> None:
        logging.shutdown()
        os._exit(code)

    watchdog = threading.Timer(EXIT_DEADLINE_S, end_now)
    watchdog.daemon = True
    watchdog.start()
    return code
