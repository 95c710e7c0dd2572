"""Shared helpers: build a source once per test module and call its extern "C" entries."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.frontend.dialect import Dialect
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
