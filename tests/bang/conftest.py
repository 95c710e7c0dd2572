"""Fixtures for the BANG CPU-model tests: the test kernels built once per generation, one worker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.runtime.bang_build import build_bang, format_build_errors
from xpiler_core.runtime.bang_run import BangWorker, CallResult

KERNELS = Path(__file__).resolve().parent / "kernels.mlu"


@dataclass
class BangLib:
    """One built test library and the worker that calls into it."""

    worker: BangWorker
    path: str

    def call(self, function: str, *args: object) -> CallResult:
        encoded: list[np.ndarray | tuple[str, float | int]] = []
        for a in args:
            if isinstance(a, np.ndarray):
                encoded.append(a)
            elif isinstance(a, bool | int):
                encoded.append(("int", int(a)))
            elif isinstance(a, float):
                encoded.append(("float", a))
            else:
                raise TypeError(f"unsupported argument {a!r}")
        return self.worker.call(self.path, function, encoded)

    def ok(self, function: str, *args: object) -> CallResult:
        """A call that must succeed: no model error, status 0."""
        result = self.call(function, *args)
        assert result.error is None, result.error
        assert result.returned == 0
        return result


@pytest.fixture(scope="session")
def bang_worker() -> Iterator[BangWorker]:
    with BangWorker(timeout_s=60) as worker:
        yield worker


def _build(generation: str) -> str:
    build = build_bang(KERNELS.read_text(encoding="utf-8"), path=str(KERNELS), generation=generation)
    assert build.ok and build.output is not None, format_build_errors(build)
    return str(build.output)


@pytest.fixture(scope="session")
def bang(bang_worker: BangWorker) -> BangLib:
    """Test kernels built for MLU370 (relaxed alignment)."""
    return BangLib(bang_worker, _build("MLU370"))


@pytest.fixture(scope="session")
def bang_strict(bang_worker: BangWorker) -> BangLib:
    """Test kernels built for MLU270 (strict MLU200-series alignment)."""
    return BangLib(bang_worker, _build("MLU270"))


@pytest.fixture(scope="session")
def build_lib(bang_worker: BangWorker) -> Callable[[str, str], BangLib]:
    """Builds BANG source (display name ``path``) for MLU370 and returns it bound to the session worker."""

    def build(source: str, path: str) -> BangLib:
        built = build_bang(source, path=path)
        assert built.ok and built.output is not None, format_build_errors(built)
        return BangLib(bang_worker, str(built.output))

    return build


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
