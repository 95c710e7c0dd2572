"""Warp votes after lanes left: in CUDA a lane that returned (or took the other side of a branch) is not active,
so it is absent from ``__ballot_sync``/``__activemask``, cannot make ``__all_sync`` false, and cannot make
``__any_sync`` true. The structural CPU lowering keeps each vote's operands in a per-thread array; every block
starts that array at the vote's neutral value (it once started uninitialized: lanes past ``n`` counted whatever
the stack held, wrong with no test to say so when verification was off). Judged against the source run on the
runtime at sizes that leave a partial last warp."""

from __future__ import annotations

import tempfile
from pathlib import Path

from xpiler_core.dialect import Dialect
from xpiler_core.plans.cuda_to_cpu import _launch_params_used, spec_with_launch_args, translate_to_cpu
from xpiler_core.verify import autospec
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

VOTES = r"""
__global__ void votes(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int positive = in[i] > 3;
  unsigned mask = __activemask();
  unsigned b = __ballot_sync(mask, positive);
  int all_true = __all_sync(mask, 1);
  int any_big = __any_sync(mask, in[i] > 100);
  out[i] = __popc(b) * 1000 + __popc(mask) * 10 + all_true * 2 + any_big;
}
"""


def test_votes_count_only_the_lanes_that_stayed() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "votes.cu"
        src.write_text(VOTES, encoding="utf-8")
        built = autospec.build_spec(VOTES, str(src), Dialect.CUDA, Path(tmp) / "spec")
        assert built.spec_path is not None, built.reason
        spec = load_spec(str(built.spec_path))
        assert any(case["n"] % 32 for case in spec.cases), "a partial last warp is tested"
        candidate, records, _ctx = translate_to_cpu(VOTES, str(src), spec)
        assert candidate is not None and "xpiler_simt" not in candidate, "the structural tier is under test"
        launch = _launch_params_used(records)
        test_spec = spec_with_launch_args(spec, launch, Path(tmp) / "launch") if launch else spec
        for seed in range(3):
            report = run_spec(test_spec, candidate_text=candidate, candidate_dialect=Dialect.C,
                              candidate_entry=spec.entry, candidate_kind="host", seed=seed)
            assert report.passed and report.tested, report.summary()
