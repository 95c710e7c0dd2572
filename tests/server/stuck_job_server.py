"""The real server (started as ``xpiler serve`` starts it) with a tuner that ignores cancellation and runs for
a minute: used to check that ``exit`` ends the process promptly even while a job's thread is busy."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from xpiler_server import serve  # noqa: E402

from xpiler_core import api as core_api  # noqa: E402


def stuck_tune(*args: Any, **kwargs: Any) -> Any:
    time.sleep(60)  # a compiler that does not look at the cancel token
    raise RuntimeError("unreachable in the test")


if __name__ == "__main__":
    core_api.tune = stuck_tune
    sys.exit(serve())
