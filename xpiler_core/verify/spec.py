"""Kernel test specs (TOML): what to build, how to call it, what inputs to feed, what to compare with.

The format is documented in ARCHITECTURE.md and README.md ("Kernel test spec"). Loading validates every
field and reports problems as :class:`XpilerError` with the spec's file name (and the line of the key
where it can be found), never as a traceback.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import XpilerError, toml_error
from xpiler_core.dialect import Dialect, detect_dialect

DTYPES = {
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "bool",
}
ROLES = {"in", "out", "inout", "scalar"}
INIT_KINDS = {"normal", "uniform", "randint", "zeros", "ones", "arange", "value", "empty"}
_INIT = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*$", re.S)


@dataclass
class ArgSpec:
    name: str
    dtype: str
    role: str
    shape: list[str | int] = field(default_factory=list)
    init: str = "normal"
    value: str | int | float | None = None
    atol: float | None = None  # per-output tolerance override (extension)
    rtol: float | None = None

    @property
    def is_buffer(self) -> bool:
        return self.role != "scalar"

    @property
    def is_output(self) -> bool:
        return self.role in ("out", "inout")


@dataclass
class KernelSpec:
    name: str
    path: Path  # the spec file
    source: Path
    entry: str
    kind: str = "kernel"
    group: str = ""
    grid: list[str | int] = field(default_factory=lambda: [1])
    block: list[str | int] = field(default_factory=lambda: [1])
    shared_bytes: str | int = 0
    reference: str | None = None  # "ref.py:function"
    reference_source: Path | None = None
    reference_entry: str | None = None
    reference_kind: str | None = None
    atol: float = 1e-5
    rtol: float = 1e-5
    features: list[str] = field(default_factory=list)
    args: list[ArgSpec] = field(default_factory=list)
    cases: list[dict[str, int]] = field(default_factory=list)
    dialect: Dialect | None = None  # from the source (content, then suffix) when not given
    warp_size: int | None = None
    timeout_s: float = 60.0
    # C++ appended to the program under test and to the reference source before they are built: an
    # ``extern "C"`` function named ``entry`` that forwards to a host function with C++ linkage
    entry_shim: str | None = None
    # the cases are alternative sizes, in order of preference (sizes solved for kernels whose shape is built
    # in): the tests stop after the first case the source runs clean at
    cases_are_alternatives: bool = False

    def source_text(self) -> str:
        return _read(self.source, self.path)

    def source_dialect(self) -> Dialect:
        if self.dialect is not None:
            return self.dialect
        return detect_dialect(self.source_text(), str(self.source))

    def parse_init(self, arg: ArgSpec) -> tuple[str, list[str]]:
        return parse_init(arg.init, self.path)


def _read(path: Path, spec_path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise XpilerError(f"cannot read {path}: {exc.strerror}", str(spec_path)) from None


def parse_init(init: str, spec_path: Path | str = "<spec>") -> tuple[str, list[str]]:
    m = _INIT.match(init)
    if m is None or m.group(1) not in INIT_KINDS:
        raise XpilerError(
            f"unknown init {init!r} (use one of {', '.join(sorted(INIT_KINDS))})", str(spec_path)
        )
    params = [p.strip() for p in (m.group(2) or "").split(",") if p.strip()]
    return m.group(1), params


def _line_of(text: str, key: str) -> int:
    m = re.search(rf"^\s*{re.escape(key)}\s*=", text, re.M)
    return text.count("\n", 0, m.start()) if m else 0


def _require(table: dict[str, Any], key: str, kind: type | tuple[type, ...], path: Path, text: str) -> Any:
    if key not in table:
        raise XpilerError(f"missing required key '{key}'", str(path))
    value = table[key]
    if not isinstance(value, kind):
        raise XpilerError(
            f"'{key}' has the wrong type ({type(value).__name__})", str(path), _line_of(text, key)
        )
    return value


# What ``xpiler spec init`` writes where the code does not determine a value.
PLACEHOLDER = "FILL_ME"


def load_spec(path: str | Path) -> KernelSpec:
    """Read and validate a spec file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise XpilerError(f"cannot read spec: {exc.strerror}", str(p)) from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise toml_error(exc, str(p), "invalid TOML") from None
    for number, line_text in enumerate(text.splitlines()):
        column = line_text.find(PLACEHOLDER)
        if column >= 0 and not line_text.lstrip().startswith("#"):
            key = line_text.split("=")[0].strip()
            raise XpilerError(
                f"'{key}' is still {PLACEHOLDER}: the drafted spec needs the value the code does not say",
                str(p), number, column,
            )
    return spec_from_table(table, p, text)


def spec_from_table(table: dict[str, Any], path: Path, text: str = "") -> KernelSpec:
    base = path.parent
    source = base / _require(table, "source", str, path, text)
    entry = _require(table, "entry", str, path, text)
    kind = table.get("kind", "kernel")
    if kind not in ("kernel", "host"):
        raise XpilerError(f"kind must be 'kernel' or 'host', not {kind!r}", str(path), _line_of(text, "kind"))
    tolerance = table.get("tolerance", {})
    if not isinstance(tolerance, dict):
        raise XpilerError(
            "tolerance must be a table { atol = ..., rtol = ... }", str(path), _line_of(text, "tolerance")
        )
    args: list[ArgSpec] = []
    for i, raw in enumerate(table.get("args", [])):
        if not isinstance(raw, dict) or "name" not in raw or "dtype" not in raw:
            raise XpilerError(f"args[{i}] needs at least name and dtype", str(path))
        role = raw.get("role", "in")
        dtype = raw["dtype"]
        if role not in ROLES:
            raise XpilerError(f"args[{i}] ({raw['name']}): role must be one of {sorted(ROLES)}", str(path))
        if dtype not in DTYPES:
            raise XpilerError(f"args[{i}] ({raw['name']}): unknown dtype {dtype!r}", str(path))
        shape = raw.get("shape", [])
        if role != "scalar" and not shape:
            raise XpilerError(f"args[{i}] ({raw['name']}): buffers need a shape", str(path))
        if role == "scalar" and "value" not in raw:
            raise XpilerError(f"args[{i}] ({raw['name']}): scalars need a value", str(path))
        init = raw.get("init", "zeros" if role == "out" else "normal")
        parse_init(init, path)
        args.append(
            ArgSpec(
                name=raw["name"],
                dtype=dtype,
                role=role,
                shape=list(shape),
                init=init,
                value=raw.get("value"),
                atol=raw.get("atol"),
                rtol=raw.get("rtol"),
            )
        )
    cases = table.get("cases", [])
    if not cases:
        cases = [{}]
    ref_source = table.get("reference_source")
    if "reference" not in table and ref_source is None:
        raise XpilerError("the spec needs a 'reference' (ref.py:function) or a 'reference_source'", str(path))
    dialect = table.get("dialect")
    return KernelSpec(
        name=table.get("name", path.stem),
        path=path,
        source=source,
        entry=entry,
        kind=kind,
        group=table.get("group", ""),
        grid=list(table.get("grid", [1])),
        block=list(table.get("block", [1])),
        shared_bytes=table.get("shared_bytes", 0),
        reference=table.get("reference"),
        reference_source=base / ref_source if ref_source else None,
        reference_entry=table.get("reference_entry"),
        reference_kind=table.get("reference_kind"),
        atol=float(tolerance.get("atol", 1e-5)),
        rtol=float(tolerance.get("rtol", 1e-5)),
        features=list(table.get("features", [])),
        args=args,
        cases=[dict(c) for c in cases],
        dialect=Dialect(dialect) if dialect else None,
        warp_size=table.get("warp_size"),
        timeout_s=float(table.get("timeout_s", 60.0)),
        entry_shim=table.get("entry_shim"),
        cases_are_alternatives=bool(table.get("cases_are_alternatives", False)),
    )


def spec_beside(path: str) -> str | None:
    """The kernel test spec (TOML) next to ``path`` whose ``source`` names this file: ``<stem>.toml`` first,
    then ``spec.toml``, then any other. The CLI, the editor and the tuner all use the spec a user keeps there."""
    source = Path(path)
    folder = source.parent
    if not folder.is_dir():
        return None
    seen: set[Path] = set()
    for candidate in [folder / f"{source.stem}.toml", folder / "spec.toml", *sorted(folder.glob("*.toml"))]:
        if candidate in seen or not candidate.is_file():
            continue
        seen.add(candidate)
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        named = data.get("source")
        if isinstance(named, str) and (folder / named).resolve() == source.resolve():
            return str(candidate)
    return None
