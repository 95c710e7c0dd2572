"""A spec's Python reference (``reference = "ref.py:function"``), run in a child process with limits.

The reference is user code from the workspace, like the kernel: it runs in its own process
(``reference_worker.py``) under the spec's time limit and a memory limit, never inside xpiler's process
(where an endless loop would hang the CLI or the language server, and anything it did would happen with the
server's state at hand). One child serves every case of a run; it is started when the reference is loaded,
so a module that fails to import is reported at once, and killed with its process group when closed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from xpiler_core.diagnostics import XpilerError
from xpiler_core.runtime import children

WORKER = Path(__file__).resolve().parent / "reference_worker.py"
MEMORY_BYTES = 16 * 1024**3
START_TIMEOUT_S = 60.0


class ReferenceTimeout(Exception):
    """The reference did not return within its time limit (the child was killed)."""


class SandboxedReference:
    """Callable like the reference function (keyword arguments in, its result out), run in a child."""

    def __init__(self, module: Path, function: str, timeout_s: float, where: str) -> None:
        self.module, self.function, self.timeout_s, self.where = module, function, timeout_s, where
        self._folder = tempfile.TemporaryDirectory(prefix="xpiler-ref-")
        self._calls = 0
        self._proc: children.Popen | None = None
        self._start()

    def _start(self) -> None:
        self._proc = children.Popen(
            [sys.executable, str(WORKER), str(self.module), self.function], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=self._folder.name,
            memory_bytes=MEMORY_BYTES, wall_seconds=max(self.timeout_s, START_TIMEOUT_S) * 4)
        reply = self._read(START_TIMEOUT_S + self.timeout_s)
        if reply is None:
            self.close()
            raise XpilerError(f"reference module {self.module.name} did not load within "
                              f"{START_TIMEOUT_S + self.timeout_s:g} s", self.where)
        if "error" in reply:
            self.close()
            raise XpilerError(f"{reply['error']} ({self.module.name})", self.where)

    def _read(self, timeout_s: float) -> dict[str, Any] | None:
        """The child's next reply, or None when it did not come in time (the child is then killed)."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        import selectors

        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(min(left, 0.5)):
                    if left <= 0 or proc.poll() is not None:
                        self.close()
                        return None
                    continue
                line = proc.stdout.readline()
                if not line:
                    self.close()
                    return None
                try:
                    reply: dict[str, Any] = json.loads(line)
                except json.JSONDecodeError:
                    continue
                return reply

    def __call__(self, **kwargs: Any) -> Any:
        if self._proc is None:
            self._start()
        assert self._proc is not None and self._proc.stdin is not None
        self._calls += 1
        folder = Path(self._folder.name)
        inputs, outputs = folder / f"in{self._calls}.npz", folder / f"out{self._calls}.npz"
        scalars = [k for k, v in kwargs.items() if not isinstance(v, np.ndarray)]
        given: dict[str, Any] = {k: np.asarray(v) for k, v in kwargs.items()}
        np.savez(inputs, **given)
        try:
            self._proc.stdin.write(json.dumps({"inputs": str(inputs), "outputs": str(outputs),
                                               "scalars": scalars}) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            raise RuntimeError("the reference process died") from None
        reply = self._read(self.timeout_s)
        inputs.unlink(missing_ok=True)
        if reply is None:
            raise ReferenceTimeout(f"the reference did not return within {self.timeout_s:g} s (stopped)")
        if "error" in reply:
            raise RuntimeError(reply["error"])
        with np.load(outputs, allow_pickle=False) as data:
            arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
        outputs.unlink(missing_ok=True)
        if reply["kind"] == "dict":
            return dict(zip(reply["names"], arrays, strict=True))
        if reply["kind"] == "seq":
            return tuple(arrays)
        return arrays[0]

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass

    def __del__(self) -> None:
        try:
            self.close()
            self._folder.cleanup()
        except Exception:  # noqa: BLE001 - at interpreter exit modules may be gone
            pass

    def __enter__(self) -> SandboxedReference:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._folder.cleanup()
