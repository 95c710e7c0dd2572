"""Discovery and inputs for the benchmark suite (`benchmarks/suite/<group>/<op>/spec.toml`).

Used by `tests/suite/` and `benchmarks/suite_table.py`. It reads the spec TOML itself (per the format in
ARCHITECTURE.md) so the suite's references can be exercised even where the harness is not available;
running kernels is the harness's job (`xpiler_core.verify.harness.run_spec`).
"""

from __future__ import annotations

import ast
import importlib.util
import operator
import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SUITE_ROOT = Path(__file__).resolve().parent / "suite"
HAZARD_GROUP = "warp64"

_BINARY_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


_FUNCTIONS: dict[str, Callable[..., int]] = {"ceil_div": _ceil_div, "min": min, "max": max}


def eval_int_expr(expr: int | str, env: dict[str, int]) -> int:
    """Evaluate a spec size expression (integers, + - * // %, parentheses, ceil_div/min/max, case names)."""
    if isinstance(expr, int):
        return expr

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise KeyError(f"unknown name {node.id!r} in expression {expr!r}")
            return env[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
            return _BINARY_OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
            return _FUNCTIONS[node.func.id](*(walk(a) for a in node.args))
        raise ValueError(f"unsupported syntax in size expression {expr!r}")

    return walk(ast.parse(str(expr), mode="eval"))


@dataclass(frozen=True)
class SuiteEntry:
    """One operator of the suite: its spec file and the parsed TOML."""

    spec_path: Path
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def group(self) -> str:
        return str(self.data["group"])

    @property
    def source_path(self) -> Path:
        return self.spec_path.parent / str(self.data["source"])

    @property
    def features(self) -> list[str]:
        return [str(f) for f in self.data.get("features", [])]

    @property
    def cases(self) -> list[dict[str, int]]:
        return [dict(c) for c in self.data.get("cases", [])]

    @property
    def is_hazard(self) -> bool:
        return self.group == HAZARD_GROUP

    @property
    def test_id(self) -> str:
        return f"{self.group}/{self.name}"

    def case_label(self, case: dict[str, int]) -> str:
        return ",".join(f"{k}={v}" for k, v in case.items())


def iter_entries(root: Path = SUITE_ROOT) -> Iterator[SuiteEntry]:
    for spec_path in sorted(root.glob("*/*/spec.toml")):
        with spec_path.open("rb") as fh:
            yield SuiteEntry(spec_path, tomllib.load(fh))


def operator_entries() -> list[SuiteEntry]:
    return [e for e in iter_entries() if not e.is_hazard]


def hazard_entries() -> list[SuiteEntry]:
    return [e for e in iter_entries() if e.is_hazard]


_INIT_RE = re.compile(r"^(?P<kind>[a-z]+)(?:\((?P<args>[^)]*)\))?$")


def _numpy_dtype(name: str) -> np.dtype[Any]:
    if name == "bfloat16":
        raise ValueError("bfloat16 has no numpy dtype; the suite does not use it")
    return np.dtype(name)


def make_array(arg: dict[str, Any], env: dict[str, int], rng: np.random.Generator) -> np.ndarray:
    """An input array for one argument, following its `init` (an `out` argument starts as zeros)."""
    shape = tuple(eval_int_expr(s, env) for s in arg.get("shape", []))
    dtype = _numpy_dtype(str(arg["dtype"]))
    init = str(arg.get("init", "zeros")) if arg["role"] != "out" else "zeros"
    match = _INIT_RE.match(init.replace(" ", ""))
    if not match:
        raise ValueError(f"arg {arg['name']}: unknown init {init!r}")
    kind = match.group("kind")
    params = [float(p) for p in match.group("args").split(",")] if match.group("args") else []
    if kind == "normal":
        values: np.ndarray = rng.standard_normal(shape)
    elif kind == "uniform":
        values = rng.uniform(params[0], params[1], shape)
    elif kind == "randint":
        # Inclusive upper bound; the suite's specs are valid either way.
        values = rng.integers(int(params[0]), int(params[1]) + 1, shape)
    elif kind == "zeros":
        values = np.zeros(shape)
    elif kind == "ones":
        values = np.ones(shape)
    elif kind == "arange":
        values = np.arange(int(np.prod(shape))).reshape(shape)
    elif kind == "value":
        values = np.full(shape, params[0])
    else:
        raise ValueError(f"arg {arg['name']}: unknown init {init!r}")
    return np.ascontiguousarray(values.astype(dtype))


def make_inputs(entry: SuiteEntry, case: dict[str, int], seed: int = 0) -> dict[str, Any]:
    """Every argument of the entry for one case: arrays for buffers, Python numbers for scalars."""
    rng = np.random.default_rng(seed)
    values: dict[str, Any] = {}
    for arg in entry.data["args"]:
        if arg["role"] == "scalar":
            raw = arg["value"]
            values[arg["name"]] = raw if isinstance(raw, float) else eval_int_expr(raw, case)
        else:
            values[arg["name"]] = make_array(arg, case, rng)
    return values


def load_reference(entry: SuiteEntry) -> Callable[..., Any]:
    module_rel, func_name = str(entry.data["reference"]).split(":")
    module_path = entry.spec_path.parent / module_rel
    spec = importlib.util.spec_from_file_location(f"suite_ref_{entry.group}_{entry.name}", module_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import reference {module_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    func: Callable[..., Any] = getattr(module, func_name)
    return func


def output_args(entry: SuiteEntry) -> list[dict[str, Any]]:
    return [a for a in entry.data["args"] if a["role"] in ("out", "inout")]


def run_reference(entry: SuiteEntry, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Call the reference the way the harness does (ins, inouts and scalars as keywords); name its outputs."""
    kwargs = {a["name"]: inputs[a["name"]] for a in entry.data["args"] if a["role"] != "out"}
    result = load_reference(entry)(**kwargs)
    outs = output_args(entry)
    if isinstance(result, dict):
        return {str(k): np.asarray(v) for k, v in result.items()}
    if isinstance(result, tuple):
        return {a["name"]: np.asarray(v) for a, v in zip(outs, result, strict=True)}
    if len(outs) != 1:
        raise ValueError(f"{entry.test_id}: reference returned one array for {len(outs)} outputs")
    return {outs[0]["name"]: np.asarray(result)}


@dataclass(frozen=True)
class CompileResult:
    """nvcc's verdict on one suite source."""

    ok: bool
    stderr: str
    cached: bool


NVCC_FLAGS = ("-arch=sm_80", "-c")


def _nvcc_version() -> str:
    import subprocess

    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown"


def _nvcc_direct(source: Path, version: str) -> CompileResult:
    """Fallback while `xpiler_core.verify.toolchains` is absent: nvcc in a temp dir, cached by diskcache."""
    import subprocess
    import tempfile

    from xpiler_core.cache import caching_disabled, get_cache, stable_key

    text = source.read_text()
    key = stable_key("suite-nvcc", text, version, NVCC_FLAGS)
    cache = get_cache("compile")
    if not caching_disabled() and key in cache:
        ok, stderr = cache[key]
        return CompileResult(bool(ok), str(stderr), cached=True)
    with tempfile.TemporaryDirectory(prefix="xpiler-suite-nvcc-") as tmp:
        src = Path(tmp) / source.name
        src.write_text(text)
        try:
            proc = subprocess.run(
                ["nvcc", *NVCC_FLAGS, src.name, "-o", "out.o"],
                cwd=tmp, capture_output=True, text=True, timeout=300, check=False,
            )
            ok, stderr = proc.returncode == 0, proc.stderr
        except subprocess.TimeoutExpired:
            ok, stderr = False, "nvcc timed out after 300 s"
    cache[key] = (ok, stderr)
    return CompileResult(ok, stderr, cached=False)


def _compile_one(source: Path, version: str) -> CompileResult:
    try:
        from xpiler_core.dialect import Dialect
        from xpiler_core.verify.toolchains import compile_check
    except ImportError:
        return _nvcc_direct(source, version)
    verdict = compile_check(source.read_text(), Dialect.CUDA)
    return CompileResult(bool(verdict.ok), str(verdict.stderr), bool(verdict.cached))


def nvcc_verdicts(sources: list[Path], jobs: int = 2) -> dict[Path, CompileResult]:
    """nvcc -arch=sm_80 -c on every source, `jobs` at a time (the machine has 2 cores), cached."""
    from concurrent.futures import ThreadPoolExecutor

    version = _nvcc_version()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda s: _compile_one(s, version), sources))
    return dict(zip(sources, results, strict=True))
