"""The CPU translation's directed float → half conversions (``__float2half_rz``/``_rd``/``_ru``), judged by
numpy as the runtime's are (tests/runtime/test_half_wmma_api.py)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from tests.conftest import build_shared
from tests.runtime.test_half_wmma_api import DIRECTED_SOURCE, assert_directed_halves, directed_inputs
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu


def test_directed_half_roundings_are_the_neighbours_of_the_value(tmp_path: Path) -> None:
    text, _records, _ctx = translate_to_cpu(DIRECTED_SOURCE, "directed.cu")
    assert text is not None
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    f = directed_inputs(34)
    outs = [np.zeros(f.size, np.float16) for _ in range(3)]
    lib.t_directed(*(ctypes.c_void_p(a.ctypes.data) for a in (f, *outs)), ctypes.c_int(f.size))
    assert_directed_halves(f, *outs)
