"""A project in the editor: a file whose kernel lives in a local header, with main() checking itself,
translates from the code action into the file and its translated header (hipcc compiles them); when the
whole-program verification fails, the diagnostic is on the user's file (at main), not on a temp file."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient
from server_lsp_helpers import code_actions, execute, open_doc, wait_for_version, wait_notification

pytestmark = pytest.mark.asyncio(loop_scope="module")

HEADER = """#pragma once
#include <cuda_runtime.h>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""
MAIN = """#include <cstdio>
#include "kernels/scale.cuh"
int main() {
  const int n = 1000;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = (float)i;
  float* d; cudaMalloc(&d, n * sizeof(float));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  scale<<<(n + 127) / 128, 128>>>(d, 2.0f, n);
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += h[i] != 2.0f * i;
  printf(bad ? "FAIL\\n" : "PASS\\n");
  return bad != 0;
}
"""
# The size of a coalesced group is the number of lanes active together: 16 of a 32-lane warp, 32 of a 64-lane
# wavefront. The HIP translation keeps the code as written, so the programs print different numbers.
WAVE_DEPENDENT = """#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void odd_lanes(int* out) {
  if (threadIdx.x & 1) out[threadIdx.x] = cg::coalesced_threads().size();
}
int main() {
  int* d; cudaMalloc(&d, 64 * sizeof(int));
  cudaMemset(d, 0, 64 * sizeof(int));
  odd_lanes<<<1, 64>>>(d);
  int h[64];
  cudaMemcpy(h, d, 64 * sizeof(int), cudaMemcpyDeviceToHost);
  printf("odd lanes see %d active\\n", h[1]);
  return 0;
}
"""


async def translate_to_hip(client: LanguageClient, source: Path) -> dict:
    uri = source.as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, uri, 1))
    open_doc(client, uri, source.read_text())
    await waiting
    actions = await code_actions(client, uri, 2, only=["source"])
    action = next(a for a in actions if a.title == "Translate to HIP")
    started = await execute(client, action.command.command, *action.command.arguments)
    return await wait_notification(client, "xpiler/jobFinished", started["jobId"], timeout=300)


async def test_a_header_using_program_translates_from_the_code_action(client: LanguageClient, tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale.cuh").write_text(HEADER)
    source = tmp_path / "main.cu"
    source.write_text(MAIN)
    finished = await translate_to_hip(client, source)
    assert finished["state"] == "done", finished
    created = [c.uri for p in client.applied_edits for c in p.edit.document_changes or []  # type: ignore[attr-defined]
               if isinstance(c, types.CreateFile) and c.uri.startswith(tmp_path.as_uri())]
    assert (tmp_path / "main.hip").as_uri() in created
    header = tmp_path / "kernels" / "scale.hip.h"
    assert header.is_file() and '#include "kernels/scale.hip.h"' in (tmp_path / "main.hip").read_text()
    compiled = subprocess.run(["hipcc", "--offload-arch=gfx90a", "-c", str(tmp_path / "main.hip"), "-o",
                               str(tmp_path / "main.o")], env={**os.environ, "HIP_PLATFORM": "amd"},
                              capture_output=True, text=True, timeout=300)
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    assert "verified" in finished.get("message", ""), finished


async def test_a_failing_whole_program_is_diagnosed_at_main(client: LanguageClient, tmp_path: Path) -> None:
    source = tmp_path / "wave.cu"
    source.write_text(WAVE_DEPENDENT)
    finished = await translate_to_hip(client, source)
    assert finished["state"] == "done", finished
    uri = source.as_uri()
    for _ in range(100):
        published = [d for d in client.diagnostics.get(uri, []) if str(d.code).startswith("translate.")]
        if published:
            break
        await asyncio.sleep(0.1)
    [diagnostic] = [d for d in published if d.code == "translate.unresolved"]
    assert "differ" in diagnostic.message
    main_line = next(i for i, line in enumerate(WAVE_DEPENDENT.splitlines()) if line.startswith("int main"))
    assert diagnostic.range.start.line == main_line


KERNEL_ONLY = """__global__ void shift(float* x, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += b;
}
"""


async def test_create_test_spec_lens_drafts_a_spec_that_loads(client: LanguageClient, tmp_path: Path) -> None:
    from xpiler_core.verify.spec import load_spec

    source = tmp_path / "shift.cu"
    source.write_text(KERNEL_ONLY)
    uri = source.as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, uri, 1))
    open_doc(client, uri, KERNEL_ONLY)
    await waiting
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    [lens] = [lens for lens in lenses if lens.command and lens.command.command == "xpiler.createSpec"]
    answer = await execute(client, lens.command.command, *lens.command.arguments)
    assert answer["created"] and answer["toFill"] == 0
    spec = load_spec(answer["spec"])
    assert spec.entry == "shift" and [a.name for a in spec.args] == ["x", "b", "n"]
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert not [lens for lens in lenses if lens.command and lens.command.command == "xpiler.createSpec"]
