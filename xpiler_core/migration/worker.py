"""A worker of a local tree migration: ``python -m xpiler_core.migration.worker``. Reads one job per line
(JSON) on standard input, runs it and answers one outcome per line on standard output, until its input
closes. Its own children (compilers, tests) live in its scratch session and die with it."""

from __future__ import annotations

import os
import socket
import sys


def main() -> int:
    from xpiler_core.migration.jobs import FileJob, run_job
    from xpiler_core.runtime import children

    children.start_session()
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout = sys.stderr  # anything printed by the work must not corrupt the answers
    node = socket.gethostname()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            outcome = run_job(FileJob.from_json(line), node)
            answers.write(outcome.to_json() + "\n")
            answers.flush()
    finally:
        children.end_session()
    return 0


if __name__ == "__main__":
    sys.exit(main())
