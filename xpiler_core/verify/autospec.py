"""Build a test spec from the code itself when the user gives none.

Two shapes of code are understood, and the spec says which assumptions were made:
- an ``extern "C"`` host entry taking buffers and integer sizes: buffer lengths come from its
  ``cudaMemcpy``/``hipMemcpy`` byte counts (``n * sizeof(float)`` → ``n`` elements), host→device copies
  mark inputs and device→host copies outputs; a ``cudaMemcpyToSymbol`` source is an input too, and copy sizes
  may use file-scope integer constants (``#define KW 7``, ``const int KW = 7;``);
- a ``__global__`` kernel taking buffers and exactly one integer size ``n``, one-dimensional: every buffer
  gets ``n`` elements, the block size comes from the file's launch site or ``__launch_bounds__`` (else 256)
  and the grid covers ``n``.
Inputs are random (seeded by the harness); sizes include values that are not multiples of the block. The
reference is the source itself (differential testing: source at its warp size vs the candidate at its own).
Anything else gets no spec and a reason — the translation is then "compiled-not-executed", never verified.
"""

from __future__ import annotations

import functools
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.model import Function, FunctionKind, KernelModel, Param, build_model
from xpiler_core.frontend.source import parse_text
from xpiler_core.project import BuildSettings
from xpiler_core.verify.entry_shim import shim_for
from xpiler_core.verify.host_record import EntryParam, EntryRecorder, RecordedShapes, record_entry
from xpiler_core.verify.index_bounds import (
    BufferBounds,
    bang_buffer_bounds,
    buffer_bounds,
    guard_limits,
    module_constants,
)
from xpiler_core.verify.shape_solve import SolvedSizes, kernel_name, solve_sizes
from xpiler_core.verify.shape_solve import describe as describe_solved

# Sizes the tests use for each integer size parameter (case i uses the i-th value; several parameters
# take the values in a rotated order so that they differ from each other).
CASE_SIZES = (257, 1000, 4099)
_INT_TYPES = re.compile(
    r"^(const\s+)?(unsigned\s+)?(int|long|long long|size_t|int32_t|int64_t|uint32_t|unsigned)$"
)
_FLOAT_TYPES = {
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "int": "int32",
    "unsigned int": "uint32",
    "unsigned": "uint32",
    "int32_t": "int32",
    "uint32_t": "uint32",
    "int64_t": "int64",
    "long long": "int64",
    "unsigned char": "uint8",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "uint8_t": "uint8",
    "short": "int16",
    "signed short": "int16",
    "short int": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "uint16_t": "uint16",
    "long": "int64",
    "long int": "int64",
    "signed int": "int32",
    "unsigned long": "uint64",
    "unsigned long long": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "bool": "bool",
    # BANG C's fixed-width names (bang.h)
    **{name: name for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")},
}
_MEMCPY = re.compile(
    r"\b(?:cuda|hip)Memcpy(?:Async)?\s*\(\s*([A-Za-z_]\w*)\s*,\s*([A-Za-z_]\w*)\s*,\s*([^,]+?)\s*,\s*(\w+)"
)
# copies into __constant__/__device__ symbols: the host buffer is an input of the entry
_MEMCPY_TO_SYMBOL = re.compile(
    r"\b(?:cuda|hip)MemcpyToSymbol(?:Async)?\s*\(\s*(?:HIP_SYMBOL\s*\(\s*)?[A-Za-z_]\w*\s*\)?\s*,\s*"
    r"([A-Za-z_]\w*)\s*,\s*((?:[^,()]|\([^()]*\))+)"
)
# file-scope integer constants (#define N 7, const int N = 7;, constexpr int T = N * C;), usable in copy sizes like
# KW * sizeof(float)
_FILE_CONSTANT = re.compile(
    r"^[ \t]*(?:#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([\w \t()*+]+?)[ \t]*$"
    r"|(?:static[ \t]+)?(?:constexpr|const)[ \t]+(?:int|unsigned|size_t|long)[ \t]+([A-Za-z_]\w*)[ \t]*=\s*"
    r"([\w\s()*+]+?)\s*;)",
    re.MULTILINE,
)
_SIZEOF = re.compile(r"sizeof\s*\(\s*[\w\s\*]+\)")
_CAST = re.compile(r"\(\s*(?:size_t|int|long|unsigned|unsigned int|long long|int64_t)\s*\)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_STREAM = re.compile(r"^(cudaStream_t|hipStream_t|CUstream)$")


SizeOrigin = Literal["code", "guessed", "solved"]


@dataclass
class AutoSpec:
    spec_path: Path | None
    spec_text: str
    reason: str  # the assumptions made, or why no spec could be built
    # where the sizes of the cases come from: the code ("code": its copies, loops or guards fix them), guesses
    # ("guessed": the entry's kernels have their shape built in and take no size), or solved from that built-in
    # shape ("solved"). Guessed and solved sizes are still guesses of a kind: a source that runs past its buffers
    # at them says the sizes are wrong, not that the source is.
    sizes_origin: SizeOrigin = "code"

    @property
    def sizes_guessed(self) -> bool:
        return self.sizes_origin != "code"


def build_spec(text: str, path: str, dialect: Dialect, workdir: Path, entry: str | None = None,
               allow_shim: bool = False, model: KernelModel | None = None,
               build: BuildSettings | None = None, kernel: str | None = None) -> AutoSpec:
    """Write ``spec.toml`` and a copy of the source into ``workdir``; or say why not.

    ``entry`` names the host function to test (in plain C every function has C linkage; a file of several
    functions is tested one function at a time); ``kernel`` one kernel of a file of kernels only
    (:func:`separately_tested_kernels`), tested on its own."""
    model = model or build_model(parse_text(text, path, dialect))  # the plan's own model when it has one
    if kernel is not None:
        entries = []
    elif entry is not None:
        named = model.function(entry)
        if named is None or named.kind is FunctionKind.KERNEL:
            return AutoSpec(None, "", f"no host function '{entry}' to test")
        entries = [named]
    else:
        entries = [f for f in model.host_entries if f.extern_c]
        if not entries and allow_shim:
            # a C++ host function that launches (``void run(...)``): tested through an extern "C" forwarder
            entries = [f for f in model.host_entries if f.template_params is None and f.name != "main"
                       and "::" not in f.name][:1]
    reasons: list[str] = []
    built: tuple[str, str] | str = "nothing to test"
    origin: SizeOrigin = "code"
    if entries:
        recorded = record_shapes(entries[0], text, path, dialect, build)
        if recorded is not None and recorded.host_memory_launched:
            # no test could say more than this: the source's own entry is wrong on a GPU without HMM
            buffer, kernel, position = recorded.host_memory_launched[0]
            return AutoSpec(None, "", (
                f"the source itself is defective, so the translation is not judged: its entry {entries[0].name} "
                f"copies '{buffer}' to or from the device as host memory and also passes '{buffer}' itself to "
                f"kernel {kernel_name(kernel)} (argument {position + 1}): host memory, which a GPU without access to "
                f"system-allocated memory (HMM) cannot dereference"))
        params = entry_params(entries[0])
        display = Path(path).name or f"source{dialect.suffix}"
        recorder = None if params is None else functools.partial(
            EntryRecorder, text, dialect, display, entries[0].name, params, build=build)
        host = _host_spec(model, entries[0], text, recorded, recorder)
        if isinstance(host, str):
            reasons.append(host)
            built = host
        else:
            built, origin = host[:2], host[2]
    if dialect is Dialect.BANG and not entries:
        kernels = [k for k in model.kernels if k.kind is FunctionKind.KERNEL and not k.is_template]
        built = (_bang_kernel_spec(model, kernels[0], text) if len(kernels) == 1 else
                 f"{len(kernels)} __mlu_global__ kernels and no host code: which one to launch is not derivable; "
                 "give --spec" if kernels else "no __mlu_global__ kernel found")
    elif not entries or isinstance(built, str):
        kernels = [k for k in model.kernels if k.kind is FunctionKind.KERNEL and not k.is_template
                   and kernel in (None, k.name)]
        if not kernels:
            built = ("no non-template __global__ kernel to launch directly" if entries
                     else 'no extern "C" host entry and no non-template __global__ kernel found')
        elif len(kernels) > 1:
            built = (f"{len(kernels)} kernels and no usable host entry: which one to launch, and how, is not "
                     "derivable; give --spec")
        elif (fixed := _fixed_shape_kernel_spec(model, kernels[0], text)) is not None:
            if isinstance(fixed, str):
                built = fixed
            else:
                built, origin = fixed[:2], fixed[2]
        else:
            built = _kernel_spec(model, kernels[0], text)
    if isinstance(built, str):
        return AutoSpec(None, "", "; ".join([*reasons, built]))
    body, reason = built
    # a C file built as C has unmangled symbols: its functions need no forwarder
    built_as_c = dialect is Dialect.C and not re.search(r'extern\s+"C"|\btemplate\s*<|\bstd::|\bnamespace\b', text)
    forwarded = None if built_as_c else next(
        (f for f in entries if not f.extern_c and f'entry = "{f.name}"' in body), None)
    if forwarded is not None:
        body = _with_shim(body, forwarded)
        reason += f' (through an extern "C" forwarder to the C++ function {forwarded.name})'
    # the copy keeps the user's file name: what the runtime reports about the source (an out-of-bounds access
    # at its cudaMalloc, a fault) then names their file
    own = Path(path).name if Path(path).suffix else Path(path).name + dialect.suffix
    source_name = own if re.fullmatch(r"[A-Za-z0-9_.+-]+", own) and own != "spec.toml" else \
        "source" + (Path(path).suffix or dialect.suffix)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / source_name).write_text(text, encoding="utf-8")
    spec_text = body.replace("@SOURCE@", source_name)
    spec_path = workdir / "spec.toml"
    spec_path.write_text(spec_text, encoding="utf-8")
    return AutoSpec(spec_path, spec_text, reason, sizes_origin=origin)


def separately_tested_kernels(model: KernelModel, dialect: Dialect) -> list[str]:
    """The kernels of a CUDA/HIP file of several kernels and no host code that launches them (generated code:
    TVM writes one kernel per fused stage), each tested on its own: which runs first and what they share is not
    in the file, but each is a function of its own buffers that the translation must compute alike."""
    if dialect not in (Dialect.CUDA, Dialect.HIP) or model.launches or any(f.extern_c for f in model.host_entries):
        return []
    kernels = [k.name for k in model.kernels if k.kind is FunctionKind.KERNEL and not k.is_template]
    return kernels if len(kernels) > 1 else []


def record_shapes(entry: Function, text: str, path: str, dialect: Dialect,
                  build: BuildSettings | None = None) -> RecordedShapes | None:
    """The entry's buffer lengths and directions from a recorded run on the runtime; None where it cannot run
    (not CUDA/HIP, a parameter the probe cannot pass, a source that does not build or copies nothing)."""
    if dialect not in (Dialect.CUDA, Dialect.HIP) or not any(p.is_pointer for p in entry.params):
        return None
    params = entry_params(entry)
    if params is None:
        return None
    display = Path(path).name or f"source{dialect.suffix}"
    recorded = record_entry(text, dialect, display, entry.name, params, build=build)
    return None if isinstance(recorded, str) else recorded


def entry_params(entry: Function) -> list[EntryParam] | None:
    """The entry's parameters as a recorded run passes them; None when one cannot be passed."""
    params: list[EntryParam] = []
    for p in entry.params:
        dtype = _dtype(p)
        if not p.name:
            return None
        if p.is_pointer:
            if dtype is None:
                return None
            params.append(EntryParam(p.name, "buffer", _DTYPE_BYTES[dtype]))
        elif _is_int_scalar(p):
            params.append(EntryParam(p.name, "size"))
        elif dtype in ("float32", "float64"):
            params.append(EntryParam(p.name, dtype))
        elif _STREAM.match(p.base_type.strip()):
            params.append(EntryParam(p.name, "handle"))
        else:
            return None
    return params


def _dtype(param: Param) -> str | None:
    base = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", "", param.base_type).strip()
    base = re.sub(r"\s+", " ", base)
    return _FLOAT_TYPES.get(base)


def _is_int_scalar(param: Param) -> bool:
    if param.is_pointer or param.is_reference:
        return False
    base = re.sub(r"\s+", " ", param.base_type.replace("const", "")).strip()
    return bool(_INT_TYPES.match(base))


def _init_for(dtype: str) -> str:
    if dtype.startswith(("int", "uint")):
        return "randint(0, 16)"
    return "normal"


def _buffer_arg(name: str, dtype: str, shape: str, role: str, init: str) -> list[str]:
    """The spec lines of a one-dimensional buffer argument."""
    return ["[[args]]", f'name = "{name}"', f'dtype = "{dtype}"', f'shape = ["{shape}"]', f'role = "{role}"',
            f'init = "{init}"', ""]


def _scalar_arg(name: str, dtype: str, value: str) -> list[str]:
    """The spec lines of a scalar argument; ``value`` is a number or a size name."""
    return ["[[args]]", f'name = "{name}"', f'dtype = "{dtype}"', 'role = "scalar"', f'value = "{value}"', ""]


def _tolerance(dtypes: list[str]) -> str:
    if "float16" in dtypes:
        return "{ atol = 1e-2, rtol = 1e-2 }"
    if all(d.startswith(("int", "uint")) for d in dtypes):
        return "{ atol = 0, rtol = 0 }"
    return "{ atol = 1e-4, rtol = 1e-4 }"


# The most elements one buffer of an automatic test may have (sizes that multiply are scaled down to fit).
MAX_TEST_ELEMENTS = 1 << 20


def case_values(degree: int) -> tuple[int, ...]:
    """Per-case values of a size parameter when ``degree`` of them multiply into one buffer's length: the
    usual sizes for one, smaller ones (still not multiples of a block) for several, so no test is impossible."""
    if degree <= 1:
        return CASE_SIZES
    top = int(MAX_TEST_ELEMENTS ** (1.0 / degree))
    return tuple(max(3, int(top * f)) | 1 for f in (0.9, 0.5, 0.27))


_INT_DECL = re.compile(r"\b(?:const\s+)?(?:size_t|int|long(?:\s+long)?|unsigned(?:\s+(?:int|long))?|int64_t|"
                       r"uint64_t|int32_t|uint32_t|auto)\s+([^;(){}]*=[^;{}]*);")


def integer_locals(body: str) -> dict[str, str]:
    """``name → initializer`` of the integer locals a function declares (``size_t a = n * c, b = a / 2;``)."""
    found: dict[str, str] = {}
    for match in _INT_DECL.finditer(body):
        depth, part, parts = 0, "", []
        for ch in match.group(1):
            depth += ch in "([" and 1 or 0
            depth -= ch in ")]" and 1 or 0
            if ch == "," and depth == 0:
                parts.append(part)
                part = ""
            else:
                part += ch
        parts.append(part)
        for declarator in parts:
            name, eq, value = declarator.partition("=")
            if eq and re.fullmatch(r"\s*[A-Za-z_]\w*\s*", name):
                found.setdefault(name.strip(), value.strip())
    return found


def _cases(size_names: list[str], shapes: dict[str, str] | None = None) -> str:
    degree = max((len({n for n in size_names if re.search(rf"\b{n}\b", shape)}) for shape in (shapes or {}).values()),
                 default=1)
    values = case_values(degree)
    out = []
    for i in range(len(values)):
        rotated = [values[(i + j) % len(values)] for j in range(len(size_names))]
        chosen = _positive_assignment(size_names, rotated, shapes or {})
        if chosen is None:
            continue  # no order of these values gives every buffer a length (``k = in - out + 1``)
        out.append("[[cases]]")
        out.extend(f"{name} = {value}" for name, value in chosen.items())
        out.append("")
    return "\n".join(out)


def _positive_assignment(names: list[str], values: list[int], shapes: dict[str, str]) -> dict[str, int] | None:
    """``names`` bound to ``values`` in the first order (the given one, then the others) in which every buffer
    length is positive, halved (kept odd) while a buffer would exceed what a test may allocate (a size that
    multiplies constants built into the code: ``D0 * D1 * N``); a length the tests cannot evaluate does not
    decide."""
    from itertools import islice, permutations

    from xpiler_core.verify.expr import ExprError, evaluate_int

    limit = MAX_TEST_ELEMENTS * 8  # elements, or the bytes of a copied buffer's 8-byte elements
    for order in islice(permutations(values), 24):
        current = list(order)
        for _ in range(24):
            env: dict[str, int] = {**dict(zip(names, current, strict=True)), _ELEM: 4}
            try:
                lengths = [evaluate_int(shape, env) for shape in shapes.values()]
            except (ExprError, ValueError, TypeError, ZeroDivisionError, NameError, KeyError):
                return dict(zip(names, values, strict=True))
            if not all(n > 0 for n in lengths):
                break
            if max(lengths, default=0) <= limit or all(v <= 3 for v in current):
                return dict(zip(names, current, strict=True))
            current = [max(3, (v // 2) | 1) for v in current]
    return None


def _host_spec(model: KernelModel, entry: Function, text: str,
               recorded: RecordedShapes | None = None,
               recorder: Callable[[], EntryRecorder] | None = None) -> tuple[str, str, SizeOrigin] | str:
    """(spec, how it was built, where its sizes come from: see :class:`AutoSpec`), or why there is none.

    ``recorded``: what a run of the entry on the runtime copied (:mod:`host_record`); its lengths and
    directions take the place of those read from the code. ``recorder``: the entry built to record it again
    (sizes for kernels with their shape built in are solved with it: :mod:`shape_solve`)."""
    body = text[entry.body_span.start_byte : entry.body_span.end_byte] if entry.body_span else ""
    locals_ = integer_locals(body)
    sizes = [p.name for p in entry.params if p.name and _is_int_scalar(p)]
    for match in _FILE_CONSTANT.finditer(text):
        name, value = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        if name not in sizes:
            locals_.setdefault(name, " ".join(value.split()))
    roles: dict[str, set[str]] = {}
    shapes: dict[str, str] = {}  # byte counts for the buffers in `copied`, element counts for the others
    for src, nbytes in _MEMCPY_TO_SYMBOL.findall(body):
        roles.setdefault(src, set()).add("in")
        if count := _element_count(nbytes, locals_, set(sizes)):
            shapes[src] = count
    for dst, src, nbytes, kind in _MEMCPY.findall(body):
        count = _element_count(nbytes, locals_, set(sizes))
        if "HostToDevice" in kind:
            roles.setdefault(src, set()).add("in")
            if count:
                shapes[src] = count
        elif "DeviceToHost" in kind:
            roles.setdefault(dst, set()).add("out")
            if count:
                shapes[dst] = count
    lines = [
        'name = "auto"',
        'group = "auto"',
        'source = "@SOURCE@"',
        f'entry = "{entry.name}"',
        'kind = "host"',
        'reference_source = "@SOURCE@"',
        f'reference_entry = "{entry.name}"',
    ]
    dtypes: list[str] = []
    args: list[str] = []
    assumed_1d: list[str] = []
    copied = set(shapes)
    if recorded is not None:
        for name, formula in recorded.shapes.items():
            shapes[name] = formula  # elements, not bytes
            copied.discard(name)
            roles[name] = set(recorded.roles.get(name, set()))
    no_copies = not shapes
    from_loops: dict[str, str] = {}
    if no_copies and entry.kind is FunctionKind.CPU_KERNEL:
        # plain C: buffers are indexed by loops over the size parameters; their extents follow
        from_loops = extents_from_loops(text, entry.name, set(sizes))
        if not sizes:
            # shape built in: a buffer no loop bounds (indexed through data the code checks) is bounded as a kernel's
            from_loops.update(_c_extents_from_bounds(model, text, entry.name, [
                p.name for p in entry.params if p.is_pointer and p.name and p.name not in from_loops]))
        shapes.update(from_loops)
        roles.update({name: {"in", "out"} for name in written_buffers(text, entry.name)})
    # kernels with their shape built in, lowered once for the two ways their sizes are found
    module = _lowered(text, model) if sizes and _fixed_shape_kernels(model, entry) else None
    extent = fixed_kernel_extent(model, entry, module) if len(sizes) == 1 and module is not None else None
    solved = _solve_fixed_shape(model, entry, module, sizes, shapes, copied, roles, recorded, recorder) \
        if extent is None and module is not None else []
    if solved:
        # a case per sizes solved, tried in turn; each buffer's length is what the entry's copies reached there,
        # given by a case variable of its own
        shapes = {name: _LENGTH_VARIABLE + name for name in solved[0].lengths}
        roles = {name: set(role) for name, role in solved[0].roles.items()}
        copied = set()
    for p in entry.params:
        if not p.name:
            return f"host entry {entry.name} has an unnamed parameter"
        dtype = _dtype(p)
        if p.is_pointer:
            if dtype is None:
                return f"host entry {entry.name}: buffer '{p.name}' has element type '{p.base_type}' the tests cannot make"
            if p.name not in shapes and len(sizes) == 1 and no_copies:
                shapes[p.name] = sizes[0]  # no copies at all: buffers are passed through, one size for all
                assumed_1d.append(p.name)
            if p.name not in shapes:
                return (
                    f"host entry {entry.name}: the length of buffer '{p.name}' is not visible in a "
                    "cudaMemcpy/hipMemcpy of the entry; give --spec"
                )
            role = roles.get(p.name, set())
            role_name = "inout" if role == {"in", "out"} else ("out" if role == {"out"} else "in")
            dtypes.append(dtype)
            init = _init_for(dtype) if role_name != "out" else "zeros"
            shape = elements_of(shapes[p.name], dtype) if p.name in copied else shapes[p.name]
            args += _buffer_arg(p.name, dtype, shape, role_name, init)
        elif _is_int_scalar(p):
            args += _scalar_arg(p.name, "int32", p.name)
        elif dtype in ("float32", "float64"):
            args += _scalar_arg(p.name, dtype, "2")
        elif _STREAM.match(p.base_type.strip()):
            # the default stream: a null handle, passed as a 64-bit zero
            args += _scalar_arg(p.name, "int64", "0")
        else:
            return f"host entry {entry.name}: parameter '{p.name}' of type '{p.type_text}' is not a buffer or a number"
    fixed = not sizes and bool(shapes) and all(not set(_IDENT.findall(shapes[n])) - {_ELEM, "max"} for n in shapes)
    if not sizes and not fixed:
        return f"host entry {entry.name} takes no integer size parameter to vary"
    lines.append(f"tolerance = {_tolerance(dtypes)}")
    lines.append("")
    if solved:
        cases = "".join(
            "[[cases]]\n" + "".join(f"{name} = {value}\n" for name, value in one.sizes.items())
            + "".join(f"{_LENGTH_VARIABLE}{name} = {one.lengths.get(name, 0)}\n" for name in shapes) + "\n"
            for one in solved)
        spec = "\n".join([*lines[:-1], "cases_are_alternatives = true", "", *args]) + "\n" + cases
        return spec, f"tests built from host entry {entry.name}: {describe_solved(solved)}, random inputs, " \
                     "compared with the source", "solved"
    if extent is not None:
        # kernels with their extent built in (generated code): the entry is right only at that size
        spec = "\n".join(lines + args) + f"\n[[cases]]\n{sizes[0]} = {extent}\n"
        return spec, (f"tests built from host entry {entry.name}: its kernels take no size and guard their "
                      f"threads with '< {extent}', so {sizes[0]} = {extent} (the only size the entry supports), "
                      "random inputs, compared with the source"), "code"
    # sizes of an entry whose kernels have their shape built in and take none: guesses (no guard names them)
    origin: SizeOrigin = "guessed" if sizes and _fixed_shape_kernels(model, entry) else "code"
    # shapes fixed by constants in the code are tested at those shapes: one case
    spec = "\n".join(lines + args) + "\n" + (_cases(sizes, shapes) if sizes else "[[cases]]\n")
    if fixed:
        return spec, (f"tests built from host entry {entry.name}: the shapes its copies fix "
                      f"({', '.join(f'{n}: {shapes[n]}' for n in shapes)}), random inputs, compared with the source"), \
            origin
    how = (f"assumed every buffer has {sizes[0]} elements (no copies in the entry)" if assumed_1d
           else "buffer lengths from the loops that index them" if from_loops
           else "buffer lengths and directions from what its copies touched in a run on the runtime "
                f"({', '.join(f'{n}: {recorded.shapes[n]}' for n in recorded.shapes)})"
           if recorded is not None and recorded.shapes
           else "buffer lengths from its memcpy byte counts")
    reason = (
        f"tests built from host entry {entry.name}: {how}, "
        f"sizes {', '.join(sizes)} varied over 3 cases (scaled down where they multiply), random inputs, "
        "compared with the source"
    )
    return spec, reason, origin


def _c_extents_from_bounds(model: KernelModel, text: str, name: str, buffers: list[str]) -> dict[str, str]:
    """Lengths of ``buffers`` of a plain-C function with its shape built in, from the elements
    :func:`buffer_bounds` says it touches (``idx = indices[i]; if (idx < 0 || idx >= 50) ... else p[idx * 128 +
    j]``: the check bounds the index); those it cannot bound are left out."""
    module = _lowered(text, model) if buffers else None
    fn = None if module is None else next((f for f in module.functions() if f.name == name), None)
    if module is None or fn is None:
        return {}
    try:
        bounds = buffer_bounds(fn, module_constants(module), (1, 1, 1), (1, 1, 1))
    except (RecursionError, ArithmeticError, ValueError):
        return {}
    lengths: dict[str, str] = {}
    for buffer in buffers:
        got = bounds.get(buffer)
        spans = [r for r in (got.read, got.write) if r is not None] if got is not None and got.bounded else []
        if spans and min(r[0] for r in spans) >= 0 and max(r[1] for r in spans) < FIXED_SHAPE_MAX_ELEMENTS:
            lengths[buffer] = str(max(r[1] for r in spans) + 1)
    return lengths


def _lowered(text: str, model: KernelModel) -> A.Module | None:
    try:
        from xpiler_core.frontend.lower import lower_text

        return lower_text(text, model.path, model.dialect)
    except Exception:  # noqa: BLE001 - an unlowerable file gets the usual sizes
        return None


def _solve_fixed_shape(model: KernelModel, entry: Function, module: A.Module, sizes: list[str],
                       shapes: dict[str, str], copied: set[str], roles: dict[str, set[str]],
                       recorded: RecordedShapes | None,
                       recorder: Callable[[], EntryRecorder] | None) -> list[SolvedSizes]:
    """The sizes the entry is written for when its kernels have their shape built in (see :mod:`shape_solve`)."""
    launched = _fixed_shape_kernels(model, entry)
    if not launched or not sizes or recorded is None or recorder is None:
        return []
    buffer_bytes: dict[str, int] = {}
    formulas: dict[str, tuple[str, int]] = {}
    for p in entry.params:
        dtype = _dtype(p)
        if p.is_pointer and p.name and dtype is not None:
            buffer_bytes[p.name] = _DTYPE_BYTES[dtype]
            if p.name in shapes:
                # read from C integer arithmetic: a division there truncates
                formula = _C_DIVISION.sub("//", shapes[p.name].replace(_ELEM, str(_DTYPE_BYTES[dtype])))
                formulas[p.name] = (formula, 1 if p.name in copied else _DTYPE_BYTES[dtype])
    outputs = {name for name, role in roles.items() if "out" in role}
    try:
        return solve_sizes(module, launched, sizes, formulas, outputs, buffer_bytes, recorded, recorder,
                           _pointee_bytes)
    except (RecursionError, ArithmeticError, ValueError, OSError):
        return []  # a kernel too deep or odd to bound: the usual sizes


_C_DIVISION = re.compile(r"(?<!/)/(?!/)")
_LENGTH_VARIABLE = "xp_len_"  # the case variable holding a buffer's length at sizes solved


def _pointee_bytes(pointee: A.Type) -> int | None:
    return None if pointee.pointers else _TYPE_BYTES.get(" ".join(pointee.base.split()))


# Bytes of the types copies are sized with; a type not listed is taken to be the buffer's own element.
_TYPE_BYTES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "int8_t": 1, "uint8_t": 1, "bool": 1, "uchar1": 1, "char1": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "half": 2, "__half": 2, "__nv_bfloat16": 2,
    "uchar2": 2, "char2": 2,
    "int": 4, "unsigned": 4, "unsigned int": 4, "float": 4, "int32_t": 4, "uint32_t": 4, "uchar4": 4, "char4": 4,
    "__half2": 4, "half2": 4, "__nv_bfloat162": 4, "short2": 4, "ushort2": 4,
    "double": 8, "long": 8, "long long": 8, "unsigned long": 8, "unsigned long long": 8, "size_t": 8,
    "int64_t": 8, "uint64_t": 8, "float2": 8, "int2": 8, "uint2": 8, "short4": 8, "ushort4": 8,
    "float3": 12, "int3": 12, "uint3": 12, "float4": 16, "int4": 16, "uint4": 16, "double2": 16, "longlong2": 16,
}
_ELEM = "xp_elem_bytes"  # sizeof of a type not in the table: the buffer's element size
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
                "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1}


def _sizeof_bytes(match: re.Match[str]) -> str:
    inner = " ".join(match.group(0)[match.group(0).index("(") + 1:-1].split())
    size = _TYPE_BYTES.get(inner.replace("const ", "").strip())
    return str(size) if size is not None else _ELEM


def elements_of(byte_count: str, dtype: str) -> str:
    """A copy's byte count as a number of ``dtype`` elements."""
    size = _DTYPE_BYTES.get(dtype, 1)
    if _ELEM in byte_count:
        return byte_count.replace(_ELEM, "1")  # sized with the element's own type
    return f"({byte_count}) // {size}" if size != 1 else byte_count


def _element_count(nbytes: str, locals_: dict[str, str], sizes: set[str]) -> str | None:
    """The byte count of a copy as an expression over the size parameters (``sizeof`` of known types as
    numbers, of other types as :data:`_ELEM`), or None."""
    expr = nbytes.strip()
    for _ in range(4):  # resolve local size variables (bytes = n * sizeof(float)) a few levels deep
        names = set(_IDENT.findall(_SIZEOF.sub("", expr)))
        unresolved = [n for n in names if n in locals_ and n not in sizes]
        if not unresolved:
            break
        for name in unresolved:
            expr = re.sub(rf"\b{name}\b", f"({locals_[name].strip()})", expr)
    expr = _CAST.sub("", _SIZEOF.sub(_sizeof_bytes, expr))
    names = set(_IDENT.findall(expr)) - {_ELEM}
    if not names:
        # a fixed-size copy (a scalar result: sizeof(float)): a constant element count
        return expr if re.fullmatch(rf"(?:[\d\s()*+]|{_ELEM})+", expr) else None
    if not names <= sizes:
        return None
    return expr.replace("/", "//")


def _kernel_spec(model: KernelModel, kernel: Function, text: str) -> tuple[str, str] | str:
    pointer_params = [p for p in kernel.params if p.is_pointer]
    int_params = [p for p in kernel.params if _is_int_scalar(p)]
    other = [p for p in kernel.params if p not in pointer_params and p not in int_params]
    if any(b.dynamic for b in kernel.buffers):
        return f"kernel {kernel.name} uses dynamic shared memory whose size is not derivable; give --spec"
    builtins = set(kernel.builtin_names)
    for f in model.reachable(kernel.name):
        builtins.update(f.builtin_names)
    if any(b.endswith((".y", ".z")) for b in builtins):
        return _multi_dim_kernel_spec(kernel, text)
    if len(int_params) != 1:
        names = ", ".join(p.name or "?" for p in int_params) or "none"
        refusal = (f"kernel {kernel.name} takes integer parameters ({names}): only kernels with one size "
                   "parameter, or whose threads each work on their own guarded global index, get automatic tests; "
                   "give --spec")
        # several sizes (rows, cols): tested like a 2-D kernel when each thread's work is its global index's
        built = _multi_dim_kernel_spec(kernel, text, min_axes=1) if len(int_params) > 1 else refusal
        return refusal if isinstance(built, str) else built
    if not pointer_params:
        return f"kernel {kernel.name} has no buffer parameters to check"
    size = int_params[0].name or "n"
    block = _block_size(model, kernel)
    dtypes: list[str] = []
    lines = [
        'name = "auto"',
        'group = "auto"',
        'source = "@SOURCE@"',
        f'entry = "{kernel.name}"',
        'kind = "kernel"',
        f'grid = ["ceil_div({size}, {block})"]',
        f"block = [{block}]",
        'reference_source = "@SOURCE@"',
        f'reference_entry = "{kernel.name}"',
    ]
    args: list[str] = []
    for p in kernel.params:
        label = str(p.name)  # an unnamed parameter gets the label "None": spec arguments bind by position
        if p in pointer_params:
            dtype = _dtype(p)
            if dtype is None:
                return f"kernel {kernel.name}: buffer '{p.name}' has element type '{p.base_type}' the tests cannot make"
            dtypes.append(dtype)
            role = "in" if p.is_const else "inout"
            init = _init_for(dtype) if p.is_const else "zeros"
            args += _buffer_arg(label, dtype, size, role, init)
        elif p in int_params:
            args += _scalar_arg(label, "int32", size)
        elif p in other:
            dtype = _dtype(p)
            if dtype not in ("float32", "float64"):
                return f"kernel {kernel.name}: parameter '{p.name}' of type '{p.type_text}' is not a buffer or a number"
            args += _scalar_arg(label, dtype, "2")
    lines.append(f"tolerance = {_tolerance(dtypes)}")
    lines.append("")
    spec = "\n".join(lines + args) + "\n" + _cases([size])
    reason = (
        f"tests built from kernel {kernel.name}: assumed 1-D with every buffer of {size} elements, "
        f"block {block}, {size} ∈ {list(CASE_SIZES)}, random inputs, compared with the source"
    )
    return spec, reason


# Blocks a fixed-shape kernel is tested on when no guard fixes its grid: a few, so blocks other than the first
# and the last run, and not a multiple of anything a translation might split the grid by.
FIXED_SHAPE_GRID = 3
# Launches of at most this many threads are bounded thread by thread (exact indices, decided conditions).
FIXED_SHAPE_EXACT_POINTS = 1 << 12
# The most elements a fixed-shape kernel's buffer may span for its test (what the kernel touches at the launch).
FIXED_SHAPE_MAX_ELEMENTS = 1 << 24


def _fixed_shape_kernel_spec(model: KernelModel, kernel: Function, text: str) -> tuple[str, str, SizeOrigin] | str | None:
    """Tests for a kernel with its shape built in (generated code: TVM's ``if (bx * 256 + (tx >> 2) < 1035)
    out[bx * 1024 + tx] = ...``): no integer parameter, one-dimensional launch. The block is the launch's or the
    kernel's ``__launch_bounds__``; the grid is the one its guards stop at (:func:`guard_limits`), or, when no
    guard fixes it, a few blocks (any grid is a launch the kernel accepts); each buffer is as long as the
    elements the kernel touches at that launch (:func:`buffer_bounds`, never fewer). Every buffer starts random:
    nothing says which ones the kernel only reads (TVM marks none ``const``). None: not such a kernel."""
    if any(_is_int_scalar(p) for p in kernel.params) or not any(p.is_pointer for p in kernel.params):
        return None
    builtins = set(kernel.builtin_names)
    for f in model.reachable(kernel.name):
        builtins.update(f.builtin_names)
    if any(b.endswith((".y", ".z")) for b in builtins) or any(b.dynamic for b in kernel.buffers):
        return None
    module = _lowered(text, model)
    fn = None if module is None else next((f for f in module.functions() if f.name == kernel.name), None)
    if module is None or fn is None:
        return None
    constants = module_constants(module)
    block = _block_size(model, kernel)
    if not _block_is_given(model, kernel) and any(b.memory == "shared" for b in kernel.buffers):
        # shared arrays are sized for the block the kernel is written for, which nothing here says
        return (f"kernel {kernel.name} has its shape built in and shared arrays, but neither a launch nor "
                "__launch_bounds__ gives its block size; give --spec")
    origin: SizeOrigin = "code"
    if not any(b.startswith(("blockIdx", "gridDim")) for b in builtins):
        grid, how = 1, "one block (it reads no block index)"
    elif limits := guard_limits(fn, constants).get(0):
        grid, how = max(limits), "the grid its guards stop at"
    else:
        grid, how, origin = FIXED_SHAPE_GRID, f"{FIXED_SHAPE_GRID} blocks (no guard fixes the grid)", "guessed"
    try:
        bounds = buffer_bounds(fn, constants, (grid, 1, 1), (block, 1, 1), exact_points=FIXED_SHAPE_EXACT_POINTS)
    except (RecursionError, ArithmeticError, ValueError):
        return f"kernel {kernel.name}: the elements it touches are not derivable; give --spec"
    spec = _built_in_shape_spec(kernel, bounds, f"at a launch of {grid}x{block}", [
        'kind = "kernel"', f"grid = [{grid}]", f"block = [{block}]", f'reference_entry = "{kernel.name}"'])
    if spec.startswith("kernel "):
        return spec  # why a buffer cannot be sized
    reason = (f"tests built from kernel {kernel.name}, whose shape is built in: block {block}, grid {grid} "
              f"({how}), each buffer as long as what the kernel touches at that launch, random inputs in every "
              "buffer, compared with the source")
    return spec, reason, origin


# two cases of a built-in shape: the same launch on two sets of random inputs
SEEDED_CASES = "[[cases]]\nseed_case = 0\n\n[[cases]]\nseed_case = 1\n"


def _built_in_shape_spec(kernel: Function, bounds: dict[str, BufferBounds], launch: str, how: list[str]) -> str:
    """The spec of a built-in-shape kernel tested against itself: ``how`` (its kind, launch and reference entry
    lines), each buffer as long as the elements ``bounds`` says it touches at the ``launch`` described (``in``
    when never written), random; a floating-point scalar 2; two seeded cases. Or why a buffer cannot be sized
    (a text starting "kernel ")."""
    touched = _touched_buffer_args(kernel, bounds, launch)
    if isinstance(touched, str):
        return touched
    args, dtypes = touched
    lines = ['name = "auto"', 'group = "auto"', 'source = "@SOURCE@"', f'entry = "{kernel.name}"', *how,
             'reference_source = "@SOURCE@"', f"tolerance = {_tolerance(dtypes)}", ""]
    return "\n".join(lines + args) + "\n" + SEEDED_CASES


def _touched_buffer_args(kernel: Function, bounds: dict[str, BufferBounds], launch: str) -> tuple[list[str], list[str]] | str:
    """The arguments of :func:`_built_in_shape_spec` and the buffers' dtypes, or why a buffer cannot be sized."""
    dtypes: list[str] = []
    args: list[str] = []
    for p in kernel.params:
        label = str(p.name)
        if p.is_pointer:
            dtype = _dtype(p)
            if dtype is None:
                return f"kernel {kernel.name}: buffer '{p.name}' has element type '{p.base_type}' the tests cannot make"
            got = bounds.get(label)
            length = 1  # never touched
            if got is not None and not got.bounded:
                return (f"kernel {kernel.name} has its shape built in, but the elements it touches in '{p.name}' are "
                        "not derivable from its indices; give --spec")
            if got is not None and (spans := [r for r in (got.read, got.write) if r is not None]):
                low, high = min(r[0] for r in spans), max(r[1] for r in spans)
                if low < 0 or high + 1 > FIXED_SHAPE_MAX_ELEMENTS:
                    return (f"kernel {kernel.name}: it touches elements {low}..{high} of '{p.name}' {launch}, outside "
                            "what a test can allocate; give --spec")
                length = high + 1
            dtypes.append(dtype)
            role = "in" if got is None or got.write is None else "inout"
            args += _buffer_arg(label, dtype, str(length), role, _init_for(dtype))
        elif _dtype(p) in ("float32", "float64"):
            args += _scalar_arg(label, str(_dtype(p)), "2")
        else:
            return f"kernel {kernel.name}: parameter '{p.name}' of type '{p.type_text}' is not a buffer or a number"
    return args, dtypes


def _bang_kernel_spec(model: KernelModel, kernel: Function, text: str) -> tuple[str, str] | str:
    """Tests for a BANG C kernel file without host code: the source itself, run on the MLU model as a Union1
    job of ``TASKS`` tasks, is the reference; the translation is called through the host entry with the
    kernel's symbol it writes (the same job). Each buffer is as long as the kernel touches on that job
    (:func:`bang_buffer_bounds`: its ``__memcpy`` transfers and indexed accesses); every buffer starts random."""
    from xpiler_core.passes.support.bang_prelude import TASKS

    if any(_is_int_scalar(p) for p in kernel.params):
        names = ", ".join(p.name or "?" for p in kernel.params if _is_int_scalar(p))
        return f"kernel {kernel.name} takes integer parameters ({names}) whose values are not derivable; give --spec"
    module = _lowered(text, model)
    fn = None if module is None else next((f for f in module.functions() if f.name == kernel.name), None)
    if module is None or fn is None:
        return f"kernel {kernel.name} could not be read for its buffers; give --spec"
    bounds = bang_buffer_bounds(fn, module_constants(module), TASKS, BANG_CORES_PER_CLUSTER)
    spec = _built_in_shape_spec(kernel, bounds, f"on a job of {TASKS} tasks", [
        'kind = "host"', f'reference_entry = "{kernel.name}"', 'reference_kind = "kernel"'])
    if spec.startswith("kernel "):
        return spec  # why a buffer cannot be sized
    reason = (f"tests built from kernel {kernel.name}: the source on the MLU model as a Union1 job of {TASKS} "
              "tasks is the reference, each buffer as long as what the kernel touches on that job, random inputs "
              "in every buffer; the translation is called through its host entry with the kernel's symbol")
    return spec, reason


BANG_CORES_PER_CLUSTER = 4  # the Union types' cluster (an MLU370)


def _block_is_given(model: KernelModel, kernel: Function) -> bool:
    """Whether :func:`_block_size` reads the block from the code (a launch or ``__launch_bounds__``)."""
    return _block_size(model, kernel, default=0) != 0


def _block_size(model: KernelModel, kernel: Function, default: int = 256) -> int:
    for site in model.launches:
        if site.kernel == kernel.name:
            block = site.config_expr("block")
            if block is not None and block.text.strip().isdigit():
                return int(block.text.strip())
    if kernel.launch_bounds is not None and kernel.launch_bounds.max_threads.text.strip().isdigit():
        return int(kernel.launch_bounds.max_threads.text.strip())
    return default


def copy_source(src: Path, workdir: Path) -> Path:
    target = workdir / src.name
    shutil.copyfile(src, target)
    return target


_THREAD_INDEX = frozenset({"threadIdx", "blockIdx", "taskId", "coreId", "clusterId"})


def _fixed_shape_kernels(model: KernelModel, entry: Function) -> set[str]:
    """The kernels ``entry`` launches when every one of them takes only buffers (no size, no scalar); else empty."""
    launched = {site.kernel for site in model.launches if site.caller == entry.name and site.resolved}
    kernels = [k for k in model.kernels if k.name in launched]
    if not kernels or any(_is_int_scalar(p) or (not p.is_pointer and _dtype(p) is not None)
                          for k in kernels for p in k.params):
        return set()
    return launched


def fixed_kernel_extent(model: KernelModel, entry: Function, module: A.Module) -> int | None:
    """The element count built into the kernels an entry launches, when they take no integer parameter and
    guard their threads with ``if (index < N)`` (N the largest such literal): generated kernels (TVM and the
    like) hard-code their shape, and their host entry's size parameter is right only at that N. ``module``:
    the file lowered."""
    launched = _fixed_shape_kernels(model, entry)
    if not launched:
        return None
    limits: list[int] = []
    for fn in module.functions():
        if fn.name not in launched:
            continue
        # locals computed from the thread's index (``int idx = blockIdx.x * blockDim.x + threadIdx.x;``)
        indexed = set(_THREAD_INDEX)
        for node in A.walk(fn.body):
            if isinstance(node, A.VarDecl) and node.init is not None and A.free_names(node.init) & indexed:
                indexed.add(node.name)
        for node in A.walk(fn.body):
            if isinstance(node, A.If):
                for cond in A.walk(node.cond):
                    if (isinstance(cond, A.Binary) and cond.op == "<" and (limit := A.const_int(cond.right)) is not None
                            and limit > 0 and A.free_names(cond.left) & indexed):
                        limits.append(limit)
    return max(limits) if limits else None


def _function_ast(text: str, name: str) -> A.Function | None:
    from xpiler_core.frontend.lower import lower_text

    try:
        module = lower_text(text, "<autospec>.c", Dialect.C)
    except Exception:  # noqa: BLE001 - an unlowerable file just gets no loop-derived extents
        return None
    return next((f for f in module.functions() if f.name == name), None)


def written_buffers(text: str, name: str) -> set[str]:
    """Pointer parameters of C function ``name`` written through a subscript (in-out for the tests)."""
    fn = _function_ast(text, name)
    return set() if fn is None else set(A.read_write(fn.body).mem_writes)


def extents_from_loops(text: str, name: str, sizes: set[str]) -> dict[str, str]:
    """Element counts of the pointer parameters of C function ``name``, from the loops that index them.

    For ``p[e]`` inside counted loops starting at a non-negative constant, where ``e`` is built with ``+``
    and ``*`` from loop variables, size parameters and non-negative integer literals (so it grows with every
    variable), the largest index is ``e`` with each loop variable at its last value; the extent is the largest
    such index plus one over all accesses. Buffers indexed any other way are left out (the caller says so).
    """
    fn = _function_ast(text, name)
    if fn is None:
        return {}
    params = {p.name for p in fn.params if isinstance(p, A.Param) and p.name and p.type.pointers}
    found: dict[str, list[str]] = {}
    refused: set[str] = set()

    def spell(e: A.Expr, last: dict[str, str]) -> str | None:
        """``e`` in the spec's expression syntax with loop variables at their last value; None if not monotone."""
        while isinstance(e, A.Cast):
            e = e.operand
        if isinstance(e, A.Name):
            if e.id in last:
                return last[e.id] or None  # "": a local of the block that is not an index expression
            if e.id in sizes:
                return e.id
            return str(constants[e.id]) if e.id in constants else None
        if isinstance(e, A.Literal):
            value = e.int_value
            return str(value) if value is not None and value >= 0 else None
        if isinstance(e, A.Binary) and e.op in ("+", "*"):
            left, right = spell(e.left, last), spell(e.right, last)
            return None if left is None or right is None else f"({left} {e.op} {right})"
        return None

    # locals never assigned after their declaration: those with a constant initializer are constants
    # (``int rows = 16; int out_h = (h - k) / s + 1;``), those from an index expression stand for it in their block
    # (``int index = i * n + j;``)
    assigned: set[str] = set()
    for node in A.walk(fn.body):
        if isinstance(node, A.Assign) and isinstance(node.target, A.Name):
            assigned.add(node.target.id)
        elif isinstance(node, A.Unary) and node.op in ("++", "--", "&") and isinstance(node.operand, A.Name):
            assigned.add(node.operand.id)
    constants: dict[str, int] = {}
    if isinstance(fn.body, A.Block):
        for stmt in fn.body.stmts:
            for decl in stmt.decls if isinstance(stmt, A.DeclStmt) else ():
                if decl.name not in assigned and not decl.dims and decl.init is not None and decl.init_style == "=" \
                        and (value := A.const_int(decl.init, constants)) is not None and value >= 0:
                    constants[decl.name] = value

    def visit(node: A.Node, last: dict[str, str]) -> None:
        if isinstance(node, A.Block):
            scope = dict(last)
            for stmt in node.stmts:
                visit(stmt, scope)
                for decl in stmt.decls if isinstance(stmt, A.DeclStmt) else ():
                    if node is fn.body and decl.name in constants:
                        continue  # the constant's own declaration
                    value = spell(decl.init, scope) if decl.init is not None and decl.init_style == "=" \
                        and not decl.dims and decl.name not in assigned else None
                    scope[decl.name] = value or ""  # a shadowing declaration hides what the name meant outside
            return
        if isinstance(node, A.For):
            view = A.loop_view(node, scoped=True)  # this walk scopes names itself: inner loops may reuse `i`
            if view is not None:
                start = A.const_int(view.start)
                stop = spell(view.stop, last)
                if start is not None and start >= 0 and stop is not None:
                    visit(node.body, {**last, view.var: f"({stop} - 1)"})
                    return
            if isinstance(node.init, A.DeclStmt):
                # a loop not counted this way: the variables it declares are no index expression inside it
                last = {**last, **{d.name: "" for d in node.init.decls}}
        if isinstance(node, A.Index) and isinstance(node.base, A.Name) and node.base.id in params:
            top = spell(node.index, last)
            if top is None:
                refused.add(node.base.id)
            else:
                found.setdefault(node.base.id, []).append(f"{top} + 1")
        for child in A.children(node):
            visit(child, last)

    visit(fn.body, {})
    return {name: f"max(1, {', '.join(dict.fromkeys(exprs))})"
            for name, exprs in found.items() if name not in refused}


def _with_shim(body: str, fn: Function) -> str:
    """The spec ``body`` testing ``fn`` (C++ linkage) through ``xp_entry_<name>``, an extern "C" forwarder."""
    shim_name, shim = shim_for(fn)
    body = body.replace(f'entry = "{fn.name}"', f'entry = "{shim_name}"')
    lines = body.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("tolerance"))
    lines.insert(at, f"entry_shim = '''{shim}'''")
    return "\n".join(lines)


#: Sizes for multi-dimensional kernels: small (a 2-D case is the product), none a multiple of the block.
MULTI_DIM_SIZES = (33, 50, 71)


def _multi_dim_kernel_spec(kernel: Function, text: str, min_axes: int = 2) -> tuple[str, str] | str:
    """Tests for a kernel whose threads each work on their own global index (any block shape gives the same
    result): 2-D/3-D, or 1-D with several sizes (``min_axes=1``). The grid comes from the guards, buffer
    lengths from the largest index each buffer is accessed at with every global index and loop variable at its
    last value (indices of sums and products of non-negative terms only: that value is the largest)."""
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.passes.support.launch import AGNOSTIC_BLOCKS, block_size_agnostic, infer_grid

    refusal = f"kernel {kernel.name} uses a 2-D/3-D launch; its grid and buffer shapes are not derivable; give --spec"
    try:
        module = lower_text(text, "<autospec>.cu", Dialect.CUDA)
    except Exception:  # noqa: BLE001 - unlowerable: no derived tests
        return refusal
    fn = next((f for f in module.functions() if f.name == kernel.name), None)
    axes = block_size_agnostic(fn, module) if fn is not None else 0
    if fn is None or axes < min_axes:
        return refusal
    block = [A.lit(b) for b in AGNOSTIC_BLOCKS[axes]]
    grid = infer_grid(fn, block)
    sizes = [p.name for p in kernel.params if _is_int_scalar(p) and p.name]
    if grid is None or not sizes:
        return refusal
    grid_text = [_spell_int(g, set(sizes)) for g in grid]
    if any(g is None for g in grid_text):
        return refusal
    extents = _kernel_extents(fn, set(sizes))
    dtypes: list[str] = []
    args: list[str] = []
    for p in kernel.params:
        label = str(p.name)
        if p.is_pointer:
            dtype = _dtype(p)
            if dtype is None or p.name not in extents:
                return refusal + (f" (buffer '{p.name}')" if dtype is not None else "")
            dtypes.append(dtype)
            role = "in" if p.is_const else "inout"
            args += _buffer_arg(label, dtype, extents[p.name], role, _init_for(dtype) if p.is_const else "zeros")
        elif _is_int_scalar(p):
            args += _scalar_arg(label, "int32", label)
        elif _dtype(p) in ("float32", "float64"):
            args += _scalar_arg(label, str(_dtype(p)), "2")
        else:
            return f"kernel {kernel.name}: parameter '{p.name}' of type '{p.type_text}' is not a buffer or a number"
    lines = [
        'name = "auto"', 'group = "auto"', 'source = "@SOURCE@"', f'entry = "{kernel.name}"', 'kind = "kernel"',
        f"grid = [{', '.join(repr(g) for g in grid_text)}]".replace("'", '"'),
        f"block = [{', '.join(str(b) for b in AGNOSTIC_BLOCKS[axes])}]",
        'reference_source = "@SOURCE@"', f'reference_entry = "{kernel.name}"',
        f"tolerance = {_tolerance(dtypes)}", "",
    ]
    cases: list[str] = []
    for i in range(len(MULTI_DIM_SIZES)):
        cases += ["[[cases]]", *(f"{n} = {MULTI_DIM_SIZES[(i + j) % len(MULTI_DIM_SIZES)]}"
                                 for j, n in enumerate(sizes)), ""]
    spec = "\n".join(lines + args) + "\n" + "\n".join(cases)
    reason = (f"tests built from kernel {kernel.name}: {axes}-D, block {AGNOSTIC_BLOCKS[axes]}, grid from its "
              f"guards, buffer lengths from its indices, sizes {', '.join(sizes)} ∈ {list(MULTI_DIM_SIZES)}, "
              "random inputs, compared with the source")
    return spec, reason


def _spell_int(e: A.Expr, names: set[str], defs: dict[str, A.Expr] | None = None, depth: int = 0) -> str | None:
    """``e`` in the spec's expression syntax (``/`` is integer division), or None."""
    while isinstance(e, A.Cast):
        e = e.operand
    if isinstance(e, A.Name):
        if e.id in names:
            return e.id
        if defs and e.id in defs and depth < 8:
            return _spell_int(defs[e.id], names, defs, depth + 1)
        return None
    if isinstance(e, A.Literal):
        value = e.int_value
        return None if value is None else str(value)
    if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/"):
        left, right = _spell_int(e.left, names, defs, depth), _spell_int(e.right, names, defs, depth)
        if left is None or right is None:
            return None
        return f"({left} {'//' if e.op == '/' else e.op} {right})"
    return None


def _kernel_extents(fn: A.Function, sizes: set[str]) -> dict[str, str]:
    """Buffer lengths of a kernel whose threads are indexed by guarded global indices (see
    :func:`_multi_dim_kernel_spec`): each global index at its guard bound minus one, loops at their last value."""
    from xpiler_core.passes.support.ast_support import scalar_writes
    from xpiler_core.passes.support.launch import AXES, global_index_on

    written = scalar_writes(fn.body)
    defs = {n.name: n.init for n in A.walk(fn.body)
            if isinstance(n, A.VarDecl) and n.init is not None and n.name not in written}
    last: dict[str, str] = {}
    for n in A.walk(fn.body):  # guards: index < bound
        if isinstance(n, A.Binary) and n.op in ("<", ">="):
            idx, bound = n.left, n.right
            while isinstance(idx, A.Cast):
                idx = idx.operand
            target = defs.get(idx.id) if isinstance(idx, A.Name) else idx
            spelled = _spell_int(bound, sizes, defs)
            if target is not None and spelled is not None and any(global_index_on(target, a) for a in AXES):
                last[idx.id if isinstance(idx, A.Name) else f"@{id(idx)}"] = f"({spelled} - 1)"
    found: dict[str, list[str]] = {}
    refused: set[str] = set()
    pointers = {p.name for p in fn.params if isinstance(p, A.Param) and p.name and p.type.pointers}

    def spell(e: A.Expr, env: dict[str, str]) -> str | None:
        while isinstance(e, A.Cast):
            e = e.operand
        if isinstance(e, A.Name):
            if e.id in env:
                return env[e.id]
            if e.id in sizes:
                return e.id
            return spell(defs[e.id], env) if e.id in defs else None
        if isinstance(e, A.Literal):
            value = e.int_value
            return str(value) if value is not None and value >= 0 else None
        if isinstance(e, A.Binary) and e.op in ("+", "*"):
            left, right = spell(e.left, env), spell(e.right, env)
            return None if left is None or right is None else f"({left} {e.op} {right})"
        return None

    def visit(node: A.Node, env: dict[str, str]) -> None:
        if isinstance(node, A.For) and (view := node.canonical()) is not None:
            start, stop = A.const_int(view.start), spell(view.stop, env)
            if start is not None and start >= 0 and stop is not None:
                visit(node.body, {**env, view.var: f"({stop} - 1)"})
                return
        if isinstance(node, A.Index) and isinstance(node.base, A.Name) and node.base.id in pointers:
            top = spell(node.index, env)
            if top is None:
                refused.add(node.base.id)
            else:
                found.setdefault(node.base.id, []).append(f"{top} + 1")
        for child in A.children(node):
            visit(child, env)

    visit(fn.body, last)
    return {name: f"max(1, {', '.join(dict.fromkeys(exprs))})" for name, exprs in found.items() if name not in refused}
