"""The real server with one fault injected: listing passes raises, so a code-action request on a kernel
crashes inside its handler. Used to check the server answers with an error and keeps serving."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from xpiler_server import create_server  # noqa: E402

from xpiler_core import api as core_api  # noqa: E402


def injected_fault() -> list[core_api.PassEntry]:
    raise RuntimeError("injected fault in pass discovery")


if __name__ == "__main__":
    core_api.passes = injected_fault
    create_server().start_io()
