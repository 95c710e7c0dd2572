"""Bad input to the frontend and to `xpiler inspect`: a clear diagnostic or error, never a traceback or a hang."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpiler_core.cli import main
from xpiler_core.diagnostics import Severity, XpilerError
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.model import build_model, load_model_bytes
from xpiler_core.frontend.source import MAX_SOURCE_BYTES, decode_source, parse_text

LOCATED = re.compile(r"^(?P<file>.+):(?P<line>\d+):(?P<col>\d+): error: (?P<message>.+)$", re.MULTILINE)


def inspect(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["inspect", str(path), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.cu"
    path.write_bytes(b"")
    code, _, err = inspect(path, capsys)
    assert code != 0
    match = LOCATED.search(err)
    assert match and match["file"] == str(path) and (match["line"], match["col"]) == ("1", "1")
    assert "empty" in match["message"]
    model = build_model(parse_text("", "empty.cu"))
    assert model.functions == [] and [d.code for d in model.diagnostics] == ["input.empty"]


def test_whitespace_only_file_is_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "blank.c"
    path.write_text("\n  \n\t\n")
    code, _, err = inspect(path, capsys)
    assert code != 0 and "empty" in err


def test_binary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kernel.cu"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 4)
    code, out, err = inspect(path, capsys)
    assert code != 0 and out == ""
    match = LOCATED.search(err)
    assert match and "binary" in match["message"]
    assert "Traceback" not in err


def test_invalid_utf8_points_at_the_bad_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.cu"
    path.write_bytes(b"__global__ void k(float* x) {\n  x[0] = 1; // caf\xe9\n}\n")
    code, _, err = inspect(path, capsys)
    assert code != 0
    match = LOCATED.search(err)
    assert match and "UTF-8" in match["message"]
    assert (match["line"], match["col"]) == ("2", "19")  # the 0xe9 byte: line 2, column 19


def test_file_over_the_size_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "huge.cu"
    line = b"__device__ float f(float x) { return x * 2.0f + 1.0f; } // padding padding padding\n"
    with path.open("wb") as handle:
        handle.write(line * (20 * 1024 * 1024 // len(line) + 1))
    assert path.stat().st_size > 20 * 1024 * 1024
    code, out, err = inspect(path, capsys)
    assert code != 0 and out == ""
    match = LOCATED.search(err)
    assert match and "limit" in match["message"] and str(MAX_SOURCE_BYTES) in match["message"]
    # Text handed over directly (as the server does) is not parsed either: one diagnostic, no exception.
    model = build_model(parse_text(path.read_text(), str(path)))
    assert model.functions == [] and [d.code for d in model.diagnostics] == ["input.too-large"]


@pytest.mark.parametrize("balanced", [True, False])
def test_100k_nested_parentheses(tmp_path: Path, capsys: pytest.CaptureFixture[str], balanced: bool) -> None:
    depth = 100_000
    expression = "(" * depth + "x" + (")" * depth if balanced else "")
    source = f"__global__ void k(int* out, int x) {{\n  out[0] = {expression};\n}}\n"
    model = build_model(parse_text(source, "deep.cu"))
    deep = [d for d in model.diagnostics if d.code == "unsupported.deep-nesting"]
    assert len(deep) == 1
    assert deep[0].span.start_line == 1 and "100001" in deep[0].message
    if balanced:
        assert [f.name for f in model.functions] == ["k"]
    else:
        assert any(d.severity is Severity.ERROR and d.code.startswith("syntax.") for d in model.diagnostics)
    json.dumps(model.to_dict())  # serializing must not recurse into the nesting either
    path = tmp_path / "deep.cu"
    path.write_text(source)
    code, out, err = inspect(path, capsys)
    assert "nested" in out and "Traceback" not in err
    assert code == (0 if balanced else 1)


def test_truncated_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = "__global__ void scale(float* x, int n) {\n  int i = threadIdx.x;\n  if (i < n) {\n    x[i] *= 2.0f;\n"
    path = tmp_path / "truncated.cu"
    path.write_text(source)
    code, out, err = inspect(path, capsys)
    assert code != 0
    errors = LOCATED.findall(err)
    assert errors, err
    assert all(file == str(path) for file, *_ in errors)
    assert [(line, col) for _, line, col, message in errors if "unexpected end of file" in message] == [("5", "1")]
    assert "'{' '{' opened at 1:40, 3:14" in err  # both unclosed braces, where they were opened
    assert "kernel scale" in out  # the model still shows what it could read
    model = build_model(parse_text(source, "truncated.cu"))
    assert model.has_errors and model.kernels[0].builtin_names == ["threadIdx.x"]
    assert model.kernels[0].span.end_byte == len(source.encode())  # ends where the file ends


def test_missing_file_and_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = inspect(tmp_path / "nope.cu", capsys)
    assert code != 0 and LOCATED.search(err) and "cannot read" in err
    code, _, err = inspect(tmp_path, capsys)
    assert code != 0 and LOCATED.search(err)


def test_console_script_prints_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bin.cu"
    path.write_bytes(b"\x00\x01\x02")
    result = subprocess.run(
        [sys.executable, "-m", "xpiler_core", "inspect", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert LOCATED.search(result.stderr)


_TOKENS = [
    "__global__", "__device__", "__shared__", "extern", "template", "<", ">", "typename", "T", "void", "float",
    "int", "k", "(", ")", "{", "}", "[", "]", ";", ",", "*", "&", "=", "<<<", ">>>", "threadIdx", ".", "x",
    "__syncthreads", "__shfl_down_sync", "atomicAdd", "asm", "volatile", '"mov;"', "#pragma omp for\n",
    "__launch_bounds__", "hipLaunchKernelGGL", "HIP_DYNAMIC_SHARED", "__nram__", "__mlu_global__",
    "__mlu_func__", "taskId", '"C"', "[=]", "nvcuda::wmma::", "\n", " ", "#if X\n", "#endif\n", "//", "/*", "*/",
    "__restrict__", "const", "0x1f", "'", "\\",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=400), dialect=st.sampled_from(list(Dialect)))
def test_arbitrary_text_never_raises(text: str, dialect: Dialect) -> None:
    model = build_model(parse_text(text, "fuzz" + dialect.suffix, dialect))
    json.dumps(model.to_dict())
    for diagnostic in model.diagnostics:
        assert diagnostic.severity in Severity


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tokens=st.lists(st.sampled_from(_TOKENS), max_size=120), dialect=st.sampled_from(list(Dialect)))
def test_kernel_like_token_soup_never_raises(tokens: list[str], dialect: Dialect) -> None:
    text = " ".join(tokens)
    parsed = parse_text(text, "soup" + dialect.suffix, dialect)
    model = build_model(parsed)
    json.dumps(model.to_dict())
    # Incremental edits on the same soup must not raise either.
    if parsed.data:
        middle = len(parsed.data) // 2
        build_model(parsed.edit(middle, middle, "}"))


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_decode_or_fail_with_location(data: bytes) -> None:
    try:
        text = decode_source(data, "bytes.cu")
    except XpilerError as error:
        assert error.format().startswith("bytes.cu:")
        return
    model = load_model_bytes(data, "bytes.cu")
    assert model.path == "bytes.cu"
    assert text.encode("utf-8") == data
