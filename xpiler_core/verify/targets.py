"""How each target judges a candidate: its real compiler's verdict and a run of a spec's cases.

One runner per kind of target, all with the shape :class:`xpiler_core.translation.TargetRunner` expects:

* :class:`GpuRunner` — CUDA (nvcc) or HIP (hipcc) verdict, the candidate run on the SIMT-on-CPU runtime at
  the target's warp size; the spec's own entry (a kernel or a host function).
* :class:`CpuRunner` — g++/gcc with OpenMP; the candidate is an ``extern "C"`` host function built natively.
* :class:`BangRunner` — the MLU model's build (g++ plus the on-chip capacity check) is the compile verdict;
  the candidate runs on the model.

Every runner compiles and builds with the project's settings (include dirs, macros, translated headers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from xpiler_core.dialect import Dialect
from xpiler_core.progress import CancelToken
from xpiler_core.project import BuildSettings
from xpiler_core.verify.harness import SpecReport, run_spec
from xpiler_core.verify.spec import KernelSpec
from xpiler_core.verify.toolchains import CompileVerdict, compile_check, is_cplusplus


@dataclass
class GpuRunner:
    target: Dialect
    warp_size: int
    source_warp: int
    build: BuildSettings | None = None  # the candidate's (translated headers beside it)
    source_build: BuildSettings | None = None  # the source's
    kind: str | None = None  # force the candidate's entry kind ("host" for C → CUDA's bound functions)
    display_name: str | None = None  # what compiler messages call the candidate: the output file's name

    def compile(self, text: str) -> CompileVerdict:
        return compile_check(text, self.target, build=self.build, display_name=self.display_name)

    def run(self, spec: KernelSpec, text: str, seed: int, cancel: CancelToken | None,
            cases: list[int] | None = None) -> SpecReport:
        return run_spec(spec, candidate_text=text, candidate_dialect=self.target, candidate_entry=spec.entry,
                        candidate_kind=self.kind or spec.kind, warp_size=self.warp_size, cases=cases, seed=seed,
                        cancel=cancel, build=self.build, reference_build=self.source_build)

    def run_source(self, spec: KernelSpec, seed: int, cancel: CancelToken | None,
                   cases: list[int] | None = None) -> SpecReport:
        return run_spec(spec, warp_size=self.source_warp, cases=cases, seed=seed, cancel=cancel,
                        build=self.source_build)


def host_isa() -> str:
    """The vector extensions the CPU output is compiled for: AVX2/FMA/F16C when this CPU has them (the
    output is built for the machine it runs on, like -march=native), else the compiler's baseline."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return ""
    return "avx2,fma,f16c" if {"avx2", "fma", "f16c"} <= flags else ""


def gcc_verdict(candidate: str, build: BuildSettings | None = None, display_name: str | None = None) -> CompileVerdict:
    """The GNU compiler's verdict on a CPU candidate: g++ when it is C++ (the prelude, ``extern "C"``), as
    the harness builds it, else gcc."""
    return compile_check(candidate, Dialect.C, toolchain="g++" if is_cplusplus(candidate) else None, flags=("-fopenmp", "-fno-strict-aliasing"),
                         build=build, display_name=display_name)


@dataclass
class CpuRunner:
    target: Dialect = Dialect.C
    warp_size: int = 32  # the source's warp size (the CPU output has no warps)
    build: BuildSettings | None = None
    source_build: BuildSettings | None = None
    display_name: str | None = None  # what compiler messages call the candidate: the output file's name

    def compile(self, text: str) -> CompileVerdict:
        return gcc_verdict(text, self.build, self.display_name)

    def run(self, spec: KernelSpec, text: str, seed: int, cancel: CancelToken | None,
            cases: list[int] | None = None) -> SpecReport:
        return run_spec(spec, candidate_text=text, candidate_dialect=Dialect.C, candidate_entry=spec.entry,
                        candidate_kind="host", cases=cases, seed=seed, cancel=cancel, build=self.build,
                        reference_build=self.source_build)

    def run_source(self, spec: KernelSpec, seed: int, cancel: CancelToken | None,
                   cases: list[int] | None = None) -> SpecReport:
        return run_spec(spec, warp_size=self.warp_size, cases=cases, seed=seed, cancel=cancel,
                        build=self.source_build)


@dataclass
class BangRunner:
    target: Dialect = Dialect.BANG
    warp_size: int = 32  # the source's (BANG tasks have no warps)
    generation: str | None = None
    facts: dict[str, object] = field(default_factory=dict)  # the model's build facts, for the manifest
    source_build: BuildSettings | None = None

    def compile(self, text: str) -> CompileVerdict:
        from xpiler_core.runtime.bang.build import build_bang, format_build_errors

        build = build_bang(text, path="candidate.mlu", generation=self.generation)
        self.facts.update({"generation": build.generation, "onchip_usage": build.usage,
                           "capacity_violations": [v.diagnostic.format() for v in build.capacity_violations]})
        return CompileVerdict(build.ok, "mlu-model", build.generation or "default", build.command,
                              "" if build.ok else format_build_errors(build), list(build.diagnostics),
                              build.seconds, build.cached)

    def run(self, spec: KernelSpec, text: str, seed: int, cancel: CancelToken | None,
            cases: list[int] | None = None) -> SpecReport:
        from xpiler_core.verify.bang import run_bang_spec

        return run_bang_spec(spec, text, seed=seed, cancel=cancel, generation=self.generation, cases=cases)

    def run_source(self, spec: KernelSpec, seed: int, cancel: CancelToken | None,
                   cases: list[int] | None = None) -> SpecReport:
        return run_spec(spec, warp_size=self.warp_size, cases=cases, seed=seed, cancel=cancel,
                        build=self.source_build)


def runner_for(target: Dialect, warp_size: int | None = None, source_warp: int = 32) -> GpuRunner | CpuRunner | BangRunner:
    """The runner of a target with its default warp size (HIP 64, CUDA 32)."""
    if target is Dialect.C:
        return CpuRunner(warp_size=source_warp)
    if target is Dialect.BANG:
        return BangRunner(warp_size=source_warp)
    return GpuRunner(target, warp_size or (64 if target is Dialect.HIP else 32), source_warp)
