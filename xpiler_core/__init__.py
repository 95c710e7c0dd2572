"""Xpiler core library: parse, model, transform and verify tensor kernels across accelerators.

The core never imports the language server; the server (``xpiler_server``) only calls this public API.
"""

__version__ = "0.1.0"
