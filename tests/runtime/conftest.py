"""Shared helpers: build a source once per test module and call its extern "C" entries."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.runtime.bang.build import build_bang, format_build_errors
from xpiler_core.runtime.bang.run import BangWorker
from xpiler_core.runtime.bang.run import CallResult as BangCallResult
from xpiler_core.runtime.build import build_library
from xpiler_core.runtime.call import _dtype_name
from xpiler_core.runtime.sandbox import CallArg, CallResult, call_library


class Built:
    """A library built from one source; ``call`` runs one extern "C" function in a sandboxed child."""

    def __init__(self, text: str, dialect: Dialect = Dialect.CUDA, warp_size: int = 32) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="xpiler-test-")
        self.dir = Path(self._tmp.name)
        self.build = build_library(
            text, dialect, self.dir / "build", warp_size=warp_size, display_name=f"t{dialect.suffix}"
        )
        assert self.build.ok, self.build.log

    def call(
        self,
        entry: str,
        args: Sequence[object],
        timeout_s: float = 60.0,
        threads: int | None = 2,
        env: dict[str, str] | None = None,
    ) -> CallResult:
        call_args, names = [], []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                call_args.append(CallArg(f"a{i}", _dtype_name(a), array=a))
                names.append(f"a{i}")
            else:
                call_args.append(
                    CallArg(f"a{i}", _dtype_name(a), value=a.item() if isinstance(a, np.generic) else a)
                )  # type: ignore[arg-type]
        assert self.build.library is not None
        return call_library(
            self.build.library,
            entry,
            "host",
            call_args,
            names,
            self.dir / entry,
            timeout_s=timeout_s,
            threads=threads,
            env=env,
        )

    def outputs(self, entry: str, args: Sequence[object]) -> list[np.ndarray]:
        res = self.call(entry, args)
        assert res.ok, res.error
        return [res.outputs[f"a{i}"] for i, a in enumerate(args) if isinstance(a, np.ndarray)]


@pytest.fixture(scope="module")
def built_factory():  # type: ignore[no-untyped-def]
    cache: dict[tuple[str, Dialect, int], Built] = {}

    def get(text: str, dialect: Dialect = Dialect.CUDA, warp_size: int = 32) -> Built:
        key = (text, dialect, warp_size)
        if key not in cache:
            cache[key] = Built(text, dialect, warp_size)
        return cache[key]

    return get


# ---- the BANG C model: Fixtures for the BANG CPU-model tests: the test kernels built once per generation, one worker

KERNELS = Path(__file__).resolve().parent / "bang_kernels.mlu"


@dataclass
class BangLib:
    """One built test library and the worker that calls into it."""

    worker: BangWorker
    path: str

    def call(self, function: str, *args: object) -> BangCallResult:
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

    def ok(self, function: str, *args: object) -> BangCallResult:
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
