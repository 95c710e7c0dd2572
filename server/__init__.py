"""Xpiler language server (pygls 2): documents, diagnostics, code actions, background jobs and hover over
the ``xpiler_core`` public API. Start it with ``xpiler serve`` (stdio) or ``xpiler serve --tcp PORT``."""

from xpiler_server.server import XpilerServer, create_server

__all__ = ["XpilerServer", "create_server", "serve"]


def serve(tcp_port: int | None = None, host: str = "127.0.0.1") -> None:
    """Run the server over stdio, or over TCP on loopback when ``tcp_port`` is given."""
    import logging
    import sys

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # pygls logs every message body at INFO; keep the log to what happens, not what is said.
    logging.getLogger("pygls.protocol.json_rpc").setLevel(logging.WARNING)
    server = create_server()
    if tcp_port is None:
        server.start_io()
    else:
        server.start_tcp(host, tcp_port)
