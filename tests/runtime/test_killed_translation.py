"""A translation killed mid-run (SIGKILL: a `timeout -s KILL`, the editor dropping a job) leaves no process:
the source program it was running on the runtime dies with it (parent-death signal), however long that
program would have run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from process_marks import marked

SPINNING_PROGRAM = """#include <cstdio>
__global__ void spin(volatile int* flag) { while (*flag == 0) { } }
int main() {
  int* flag; cudaMalloc(&flag, sizeof(int)); cudaMemset(flag, 0, sizeof(int));
  spin<<<1, 1>>>(flag);
  cudaDeviceSynchronize();
  printf("never\\n");
  return 0;
}
"""


def _running_program(token: str, exclude: int) -> bool:
    """Whether the spinning source program itself (not a compiler) is running under the translation."""
    for pid in marked(token):
        try:  # the executable itself (its argv[0] is the source's name, as the user would run it)
            name = os.readlink(Path("/proc") / str(pid) / "exe")
        except OSError:
            continue
        if pid != exclude and Path(name).name.startswith("prog"):
            return True
    return False


def test_a_killed_translation_leaves_no_process(tmp_path: Path) -> None:
    source = tmp_path / "spin.cu"
    source.write_text(SPINNING_PROGRAM)
    token = f"XPILER_TEST_TOKEN_{uuid.uuid4().hex}"
    env = {**os.environ, token: "1", "XPILER_NO_CACHE": "1"}
    translation = subprocess.Popen([sys.executable, "-m", "xpiler_core", "translate", str(source), "--to", "cpu",
                                    "-o", str(tmp_path / "spin.cpp"), "--timeout", "300"],
                                   env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the translation has started a program of its own
            if _running_program(token, translation.pid):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the translation never started the source program")
        time.sleep(1.0)
        translation.send_signal(signal.SIGKILL)
        translation.wait(timeout=30)
        deadline = time.monotonic() + 10
        while marked(token) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = marked(token)
        assert not left, f"processes left behind: {left}"
    finally:
        for pid in marked(token):
            os.kill(pid, signal.SIGKILL)
