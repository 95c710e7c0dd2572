"""Round trip: ``print_module(lower(parse(src)))`` compiles with the real compiler wherever ``src`` does.

The oracle is the compiler (nvcc -arch=sm_80, HIP_PLATFORM=amd hipcc --offload-arch=gfx90a, gcc/g++), not our
own output; for C programs the oracle is also the original program's output on the same input. Compile
verdicts are cached (``xpiler_core.cache``, sub-cache ``ast-roundtrip``) keyed on tool version + flags +
text, so reruns only compile what changed. Sources are globbed at test time (the suite grows).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from xpiler_core.cache import caching_disabled, get_cache, stable_key
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.printer import print_module

ROOT = Path(__file__).resolve().parents[2]
COMPILE_TIMEOUT_S = 180


@dataclass(frozen=True)
class Tool:
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def _tool_for(suffix: str) -> Tool | None:
    if suffix in (".cu", ".cuh"):
        return Tool(("nvcc", "-arch=sm_80", "-std=c++17", "-c")) if shutil.which("nvcc") else None
    if suffix == ".hip":
        if not shutil.which("hipcc"):
            return None
        return Tool(("hipcc", "--offload-arch=gfx90a", "-c"), (("HIP_PLATFORM", "amd"),))
    if suffix == ".c":
        return Tool(("gcc", "-std=gnu11", "-fopenmp", "-c"))
    if suffix in (".cc", ".cpp"):
        return Tool(("g++", "-std=c++17", "-fopenmp", "-c"))
    return None


@cache
def _version(tool: Tool) -> str:
    out = subprocess.run([tool.argv[0], "--version"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **dict(tool.env)})
    return out.stdout.strip()


def compile_ok(text: str, suffix: str) -> tuple[bool, str]:
    """(compiled, stderr) of ``text`` as a file with ``suffix``, cached on tool version + flags + text."""
    tool = _tool_for(suffix)
    assert tool is not None
    key = stable_key("ast-roundtrip-compile", tool.argv, tool.env, _version(tool), suffix, text)
    store = get_cache("ast-roundtrip")
    if not caching_disabled() and key in store:
        cached: tuple[bool, str] = store[key]
        return cached
    with tempfile.TemporaryDirectory(prefix="xpiler-rt-") as tmp:
        src = Path(tmp) / f"unit{suffix}"
        src.write_text(text, encoding="utf-8")
        try:
            proc = subprocess.run(
                [*tool.argv, str(src), "-o", str(Path(tmp) / "unit.o")],
                capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, cwd=tmp,
                env={**os.environ, **dict(tool.env)},
            )
            verdict = (proc.returncode == 0, proc.stderr[-4000:])
        except subprocess.TimeoutExpired:
            return False, "timeout"  # not cached: a busy machine is not a verdict
    store[key] = verdict
    return verdict


def _sources(patterns: list[str]) -> list[Path]:
    found: list[Path] = []
    for pattern in patterns:
        found.extend(p for p in ROOT.glob(pattern) if p.is_file())
    return sorted(set(found))


def _dialect_of(path: Path) -> Dialect | None:
    return {".cu": Dialect.CUDA, ".hip": Dialect.HIP, ".c": Dialect.C}.get(path.suffix)


def _roundtrip_report(paths: list[Path]) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Per-dialect (round-tripped compiled, originals that compiled) and the failures, compiled -j2."""

    def check(path: Path) -> tuple[str, bool, bool, str]:
        source = path.read_text(encoding="utf-8")
        module = lower_text(source, str(path))
        internal = [d.format() for d in module.diagnostics if d.code == "ast.internal"]
        printed = print_module(module)
        original_ok, _ = compile_ok(source, path.suffix)
        if not original_ok:
            return path.suffix, False, False, ""
        printed_ok, err = compile_ok(printed, path.suffix)
        problem = ""
        if not printed_ok:
            problem = f"{path.relative_to(ROOT)}: original compiles, round trip does not:\n{err}"
        elif internal:
            problem = f"{path.relative_to(ROOT)}: internal lowering errors: {internal}"
        return path.suffix, True, printed_ok and not internal, problem

    counts: dict[str, tuple[int, int]] = {}
    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for suffix, tried, ok, problem in pool.map(check, paths):
            done, total = counts.get(suffix, (0, 0))
            counts[suffix] = (done + int(ok), total + int(tried))
            if problem:
                failures.append(problem)
    return counts, failures


def _available(paths: list[Path]) -> list[Path]:
    return [p for p in paths if _tool_for(p.suffix) is not None]


def test_examples_round_trip_compile() -> None:
    paths = _available(_sources(["examples/*.cu", "examples/*.hip", "examples/*.c"]))
    if not paths:
        pytest.skip("no examples with an installed compiler")
    counts, failures = _roundtrip_report(paths)
    print("examples round trip (compiled/tried):", counts)
    assert not failures, "\n\n".join(failures)
    assert sum(total for _, total in counts.values()) > 0, "no original example compiled"


SUITE_SAMPLE = 3


def _suite_sample(paths: list[Path]) -> list[Path]:
    """A stable sample (by path hash) so the default run stays short on a cold cache as the suite grows."""
    ranked = sorted(paths, key=lambda p: stable_key(str(p.relative_to(ROOT))))
    return sorted(ranked[:SUITE_SAMPLE])


def test_benchmark_suite_sample_round_trip_compile() -> None:
    paths = _available(_sources(["benchmarks/suite/**/*.cu"]))
    if not paths:
        pytest.skip("benchmark suite empty or nvcc missing")
    counts, failures = _roundtrip_report(_suite_sample(paths))
    print("suite sample round trip (compiled/tried):", counts)
    assert not failures, "\n\n".join(failures)


@pytest.mark.slow
def test_benchmark_suite_round_trip_compile() -> None:
    paths = _available(_sources(["benchmarks/suite/**/*.cu"]))
    if not paths:
        pytest.skip("benchmark suite empty or nvcc missing")
    counts, failures = _roundtrip_report(paths)
    print("suite round trip (compiled/tried):", counts)
    assert not failures, "\n\n".join(failures)


# ------------------------------------------------------------------------ C semantics (run both)
# Small programs that stress what the printer re-creates: precedence, unary spacing, dangling else,
# comma operator, compound assignment, casts, sizeof, do/while, pragmas, switch (kept opaque), arrays.
C_PROGRAMS: dict[str, str] = {
    "precedence": r"""
#include <stdio.h>
int main(void) {
    int a = 7, b = -3, c = 5;
    unsigned u = 0xF0u;
    int r1 = a - -b + c * (a - b) / (c % 3 + 1);
    int r2 = (a << 2 >> 1) + (u & 0x3C | 1) ^ 2;
    int r3 = a > b ? c > a ? 1 : 2 : 3;
    int r4 = !(a < b) + ~b - - -c;
    int r5 = (a, b, c) + (a = 2, a * 3);
    long r6 = (long)(a * b) * sizeof(int) + sizeof a;
    double r7 = (double)a / 2 + (float)c * 0.5f;
    int q = 4;
    int r8 = -q++ + !q-- * 10 + ~q++;  /* tree-sitter reads -q++ as (-q)++; C as -(q++) */
    printf("%d %d %d %d %d %ld %.3f %d %d\n", r1, r2, r3, r4, r5, r6, r7, r8, q);
    return 0;
}
""",
    "control": r"""
#include <stdio.h>
static int classify(int x) {
    switch (x % 3) { case 0: return 10; case 1: return 20; default: break; }
    return 30;
}
int main(void) {
    int acc = 0, i, j;
    for (i = 0, j = 10; i < j; i++, j--) acc += i * j;
    if (acc > 5)
        if (acc > 1000) acc = 1; else acc += 1;
    int k = 3;
    do { acc ^= k << 1; --k; } while (k > 0);
    while (acc > 100) { acc /= 3; if (acc == 7) break; else continue; }
#pragma GCC unroll 4
    for (int t = 0; t < 8; ++t) { acc += classify(t); }
    int arr[2][3] = {{1, 2, 3}, {4, 5, 6}};
    int *p = &arr[1][0];
    acc += *p++ + p[1] + *(p + 1) * 2;
    acc %= 1000;
    printf("%d\n", acc);
    return 0;
}
""",
    "pointers": r"""
#include <stdio.h>
#include <string.h>
struct pair { int a; float b; };
static float dot(const float *restrict x, const float *restrict y, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i += 1) s += x[i] * y[i];
    return s;
}
int main(void) {
    float x[5] = {1, 2, 3, 4, 5}, y[5];
    memset(y, 0, sizeof(y));
    for (int i = 0; i <= 4; i++) y[i] = (float)(i * i) - 1.5f;
    struct pair pr = {3, 2.5f};
    struct pair *pp = &pr;
    pp->a += (int)pp->b;
    const char *msg = "round" "trip";
    printf("%.2f %d %s %c\n", dot(x, y, 5), pr.a, msg, msg[0]);
    return 0;
}
""",
}


def _run_c(text: str, workdir: Path, stem: str) -> str:
    src = workdir / f"{stem}.c"
    exe = workdir / stem
    src.write_text(text, encoding="utf-8")
    build = subprocess.run(["gcc", "-std=gnu11", "-O1", "-fopenmp", str(src), "-o", str(exe)],
                           capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30, cwd=workdir)
    assert run.returncode == 0, run.stderr
    return run.stdout


def _c_mains() -> dict[str, str]:
    programs = dict(C_PROGRAMS)
    for path in _sources(["examples/*.c"]):
        text = path.read_text(encoding="utf-8")
        if "main(" in text:
            programs[path.name] = text
    return programs


@pytest.mark.parametrize("name", sorted(_c_mains()))
def test_c_round_trip_runs_the_same(name: str, tmp_path: Path) -> None:
    source = _c_mains()[name]
    module = lower_text(source, f"{name}.c", Dialect.C)
    assert not [d for d in module.diagnostics if d.code == "ast.internal"]
    printed = print_module(module)
    assert _run_c(printed, tmp_path, "printed") == _run_c(source, tmp_path, "original")
