"""A program that prints its own name (``argv[0]``) or its working folder is not a translation failure: both
sides run as ``./NAME`` in the same folder path (issue 31: two vendor samples were reported as "output line 1
differs: …/build-source/prog… vs …/build-candidate/prog…")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xpiler_core.cli import main

PROGRAM = r"""#include <cstdio>
#include <unistd.h>
__global__ void twice(int* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2; }
int main(int argc, char** argv) {
  char cwd[4096];
  printf("[%s] starting...\n", argv[0]);
  printf("working in %s\n", getcwd(cwd, sizeof cwd));
  int h[64]; for (int i = 0; i < 64; ++i) h[i] = i;
  int* d; cudaMalloc(&d, sizeof h); cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  twice<<<2, 32>>>(d, 64);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  long sum = 0; for (int i = 0; i < 64; ++i) sum += h[i];
  printf("sum %ld\n", sum);
  return 0;
}
"""


@pytest.mark.parametrize("target", ["cpu", "hip"])
def test_a_program_printing_its_name_and_folder_verifies(tmp_path: Path, target: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    if target == "hip" and shutil.which("hipcc") is None:
        pytest.skip("hipcc is not installed")
    source = tmp_path / "banner.cu"
    source.write_text(PROGRAM)
    code = main(["translate", str(source), "--to", target, "-o", str(tmp_path / "out" / ("banner.cpp" if target == "cpu" else "banner.hip"))])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err


def test_a_program_folder_holding_the_scratch_folder_is_copied_once(tmp_path: Path) -> None:
    # a program in /tmp: the run's scratch folder lies inside the folder copied for the run (before, the copy
    # copied itself until names grew too long); a socket beside the program is not a file to copy
    import socket

    from xpiler_core.verify.program import scratch_copy

    (tmp_path / "prog.cu").write_text("int main() { return 0; }\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.txt").write_text("1 2 3\n")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "editor.sock"))
    try:
        dest = tmp_path / "xpiler-program-x" / "work" / "run"
        scratch_copy(tmp_path, dest)
    finally:
        server.close()
    assert (dest / "prog.cu").is_file() and (dest / "data" / "in.txt").read_text() == "1 2 3\n"
    assert not (dest / "editor.sock").exists()
    assert not (dest / "xpiler-program-x").exists()


def test_a_file_removed_while_the_folder_is_copied_is_not_an_error(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A program in a shared folder (/tmp): another program's temporary file may vanish between the listing
    and its copy; the run's copy goes on without it (it was the harness's own error before)."""
    from xpiler_core.verify import program as program_module

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "input.txt").write_text("kept\n")
    (tmp_path / "src" / "ccTEMP.s").write_text("gone\n")
    real_copy = shutil.copy2

    def vanishing(src: str, dst: str, **kwargs):  # type: ignore[no-untyped-def]
        if src.endswith("ccTEMP.s"):
            raise FileNotFoundError(src)
        return real_copy(src, dst, **kwargs)

    monkeypatch.setattr(program_module.shutil, "copy2", vanishing)
    program_module.scratch_copy(tmp_path / "src", tmp_path / "dest")
    assert (tmp_path / "dest" / "input.txt").read_text() == "kept\n"
    assert not (tmp_path / "dest" / "ccTEMP.s").exists()
