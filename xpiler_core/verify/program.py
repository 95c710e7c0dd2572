"""Whole-program verification: the source program and the translated program, built and run the same way.

A file with ``main`` is verified as the program it is. The source is built for the SIMT-on-CPU runtime
(CUDA at warp 32, HIP at 64) and the translation for its target (HIP/CUDA on the runtime at the target's
warp size, CPU C++ natively, BANG C on the MLU model); both run in a scratch copy of the source's folder,
with the same arguments and standard input, under time, CPU and memory limits, and are compared:

* the exit status;
* standard output, line by line: lines that carry timings, addresses or device names are ignored (a
  default rule set, extended by ``[compare] ignore`` in ``xpiler.toml``), lines that differ between two runs
  of the source itself are ignored (they depend on time or on a random seed), numbers compare within the
  tolerance (``atol``/``rtol``), the rest as text;
* the files the programs write, by content (numbers within the tolerance for text files);
* a program that prints its own verdict (``PASS``/``FAIL``, ``Test passed``, ``Result = PASS``, …) is
  judged by it: the translation must reach the same verdict.

If the source program itself does not build, crashes, times out, exits with a failure or fails its own
check on the runtime, the report says so and nothing is blamed on the translation; nor when the translation's
verdict differs and the source, run again, does not reach its first verdict either.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
import resource
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect
from xpiler_core.progress import Cancelled, CancelToken
from xpiler_core.project import BuildSettings, ProjectConfig
from xpiler_core.runtime import children
from xpiler_core.verify.harness import OTHER_SCHEDULES, UNINITIALIZED

DEFAULT_TIMEOUT_S = 120.0
SOURCE_RERUNS = 2  # runs of the source again before a different verdict is blamed on the translation
PROGRAM_MEMORY_BYTES = 16 * 1024**3
MAX_WORKDIR_BYTES = 64 * 1024**2  # a bigger source folder is not copied (the programs run in an empty one)
MAX_STREAM_CHARS = 2_000_000
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-3

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b", re.IGNORECASE)
_PASS = re.compile(r"\b(PASS(ED)?|SUCCESS(FUL)?)\b|\b(test|tests|result|verification|check|validation)s?\b[^\n]*"
                   r"\b(pass(ed)?|succeeded|successful|correct|ok)\b", re.IGNORECASE)
# "unsuccessful" in the spellings programs print it ("uncessfull", "unsucessful")
_FAIL = re.compile(r"\b(FAIL(ED|URE)?|INCORRECT|MISMATCH(ES)?|un\w*ces+ful+)\b|\b(test|tests|result|verification|"
                   r"check|validation)s?\b[^\n]*\b(fail(ed|s)?|incorrect|wrong)\b", re.IGNORECASE)
_NEGATED_FAIL = re.compile(r"\b(0|no|zero)\s+(errors?|failures?|mismatch(es)?)\b", re.IGNORECASE)


@dataclass(frozen=True)
class CopyBack:
    """One device-to-host copy of a run: its byte count, the element type of its destination as the host code
    declared it ('f' float, 'd' double, 'i' integer, 'p' pointer, 'b' other), and its data (None past the record's
    limit)."""

    size: int
    element: str
    data: bytes | None
    freed: bool = False  # a device buffer as it was when freed or at exit (programs that copy nothing back)
    unchanged: bool = False  # freed holding what the host last put there (zeros, a copy): no evidence of kernels


@dataclass
class ProgramRun:
    """One build and run of a program."""

    built: bool
    build_log: str = ""
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    files: dict[str, bytes] = field(default_factory=dict)  # files created or changed, relative path → content
    timed_out: bool = False
    seconds: float = 0.0
    command: list[str] = field(default_factory=list)
    copies: list[CopyBack] = field(default_factory=list)  # the device-to-host copies, in order (when recorded)

    def failure(self) -> str:
        """Why this run is not a normal run of the program ("" when it is)."""
        if not self.built:
            first = next((line for line in self.build_log.splitlines() if "error" in line), "")
            return "does not build" + (f": {first.strip()}" if first else "")
        if self.timed_out:
            return f"did not finish within the time limit ({self.seconds:.0f} s)"
        if self.exit_code is not None and self.exit_code < 0:
            return f"was killed by signal {-self.exit_code}" + _runtime_line(self.stderr)
        if self.exit_code not in (0, None):
            return f"exits with status {self.exit_code}" + _runtime_line(self.stderr)
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {"built": self.built, "build_log": self.build_log[-4000:], "exit_code": self.exit_code,
                "stdout": self.stdout[-8000:], "stderr": self.stderr[-4000:],
                "files": {k: hashlib.sha256(v).hexdigest() for k, v in self.files.items()},
                "timed_out": self.timed_out, "seconds": round(self.seconds, 3), "command": self.command,
                "copies_back": [{"bytes": c.size, "element": c.element, "freed": c.freed,
                                 "sha256": hashlib.sha256(c.data).hexdigest() if c.data is not None else None}
                                for c in self.copies[:64]]}


def _runtime_line(stderr: str) -> str:
    for line in reversed(stderr.splitlines()):
        if line.startswith("xpiler: ") or "error" in line.lower():
            return f" ({line.strip()[:300]})"
    return ""


@dataclass
class ProgramReport:
    source: ProgramRun
    candidate: ProgramRun | None
    matched: bool
    source_failed: bool
    reason: str
    verdict: str | None = None  # the program's own verdict ("PASS"/"FAIL" line), when it prints one
    lines_compared: int = 0
    lines_ignored: int = 0
    args: list[str] = field(default_factory=list)
    files_compared: int = 0
    copies_compared: int = 0  # device-to-host copies whose data agreed (programs that print nothing to compare)
    reference: str = "runtime"  # where the source ran: the SIMT runtime, or "gpu" (--reference gpu)

    @property
    def nothing_compared(self) -> bool:
        """Agreed on the exit status alone: no verdict line, no output line (timing lines aside), no file."""
        return (self.matched and self.verdict is None and self.lines_compared == 0 and self.files_compared == 0
                and self.copies_compared == 0)

    def summary(self) -> str:
        where = "on this machine's GPU" if self.reference == "gpu" else "on the runtime"
        if self.source_failed:
            return f"the source program {self.reason} {where}"
        if self.nothing_compared:
            return (f"the programs exit alike but print and write nothing to compare ({self.lines_ignored} timing "
                    "line(s) ignored)")
        ran = " (the source ran on this machine's GPU)" if self.reference == "gpu" else ""
        if self.matched and self.copies_compared and not self.lines_compared and not self.verdict:
            n = self.copies_compared
            what = (f"the {n} device buffer{'' if n == 1 else 's'} the kernels wrote agree{'s' if n == 1 else ''} as "
                    "freed or at exit (they copy nothing back)"
                    if _judged_by_frees(self.source) else
                    f"the data of the {n} device-to-host cop{'y' if n == 1 else 'ies'} they make agree")
            return (f"the programs agree: same exit status, {what} (they print nothing else to compare; "
                    f"{self.lines_ignored} timing line(s) ignored){ran}")
        if self.matched:
            how = f"both print '{self.verdict}'" if self.verdict else f"{self.lines_compared} output line(s) agree"
            return f"the programs agree: same exit status, {how} ({self.lines_ignored} timing line(s) ignored){ran}"
        return f"the programs differ: {self.reason}{ran}"

    def to_dict(self) -> dict[str, Any]:
        return {"matched": self.matched, "source_failed": self.source_failed, "reason": self.reason,
                "verdict": self.verdict, "lines_compared": self.lines_compared, "lines_ignored": self.lines_ignored,
                "files_compared": self.files_compared, "copies_compared": self.copies_compared,
                "reference": self.reference,
                "args": self.args, "source": self.source.to_dict(),
                "candidate": self.candidate.to_dict() if self.candidate is not None else None}


# ---------------------------------------------------------------------------------------------- build


def build_program(text: str, dialect: Dialect, workdir: Path, *, warp_size: int, display_name: str,
                  build: BuildSettings | None) -> tuple[Path | None, str, list[str]]:
    """An executable of a whole program for this machine: (path or None, build log, command)."""
    if dialect is Dialect.BANG:
        from xpiler_core.runtime.bang.build import build_bang, format_build_errors

        bang = build_bang(text, path=display_name, shared=False)
        if not bang.ok or bang.output is None:
            return None, format_build_errors(bang), bang.command
        exe = workdir / "program-bang"
        shutil.copy2(bang.output, exe)
        return exe, "", bang.command
    if build is not None and build.device == "gpu":  # --reference gpu: the source program on this machine's GPU
        from xpiler_core.verify.gpu_reference import build_gpu_library, require_gpu

        if dialect is not Dialect.CUDA:
            raise XpilerError(f"--reference gpu runs CUDA sources; this one is {dialect.value}", display_name)
        require_gpu(display_name)
        gpu = build_gpu_library(text, workdir, display_name=display_name, build=build, executable=True)
        return gpu.library, gpu.log, gpu.command
    from xpiler_core.runtime.build import build_library

    result = build_library(text, dialect, workdir, warp_size=warp_size, display_name=display_name,
                           cplusplus_c=dialect is Dialect.C, build=build, executable=True)
    return result.library, result.log, result.command


# ---------------------------------------------------------------------------------------------- run


def _snapshot(folder: Path) -> dict[str, tuple[int, float]]:
    out: dict[str, tuple[int, float]] = {}
    for path in folder.rglob("*"):
        if path.is_file():
            stat = path.stat()
            out[str(path.relative_to(folder))] = (stat.st_size, stat.st_mtime)
    return out


def _folder_size(folder: Path, limit: int, dest: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not _skipped_folder(Path(root) / d, dest)]
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                continue
            if total > limit:
                return total
    return total


def _skipped_folder(path: Path, dest: Path) -> bool:
    """A folder of a program's folder not copied for its runs: hidden ones, caches, the scratch roots of
    xpiler runs, and the copy's own destination or a folder holding it (a program in ``/tmp`` copied into
    ``/tmp/xpiler-session-*/...`` would copy itself without end)."""
    if path.name.startswith((".", "xpiler-session-")) or path.name == "__pycache__":
        return True
    try:
        real, target = path.resolve(), dest.resolve()
    except OSError:
        return True
    return real == target or target.is_relative_to(real) or real.is_relative_to(target)


def scratch_copy(source_folder: Path, dest: Path) -> None:
    """A copy of the program's folder to run in: regular files and links as links; hidden folders, scratch
    folders, sockets, pipes and devices are left out, and an oversized folder is not copied."""
    dest.mkdir(parents=True, exist_ok=True)
    if not source_folder.is_dir() or _folder_size(source_folder, MAX_WORKDIR_BYTES, dest) > MAX_WORKDIR_BYTES:
        return

    def left_out(folder: str, names: list[str]) -> set[str]:
        out: set[str] = set()
        for name in names:
            path = Path(folder) / name
            try:
                mode = path.lstat().st_mode
            except OSError:
                out.add(name)
                continue
            if stat.S_ISDIR(mode):
                if _skipped_folder(path, dest):
                    out.add(name)
            elif name.startswith(".") or not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                out.add(name)
        return out

    def copy_present(src: str, dst: str) -> None:
        try:
            shutil.copy2(src, dst)
        except FileNotFoundError:
            pass  # removed since the folder was listed (another program's temporary file in a shared folder)

    try:
        shutil.copytree(source_folder, dest, dirs_exist_ok=True, symlinks=True, ignore=left_out,
                        copy_function=copy_present)
    except shutil.Error as exc:  # entries removed while copying (a shared folder such as /tmp) are not missed
        kept = [e for e in exc.args[0] if isinstance(e, tuple) and os.path.lexists(e[0])]
        if kept:
            raise shutil.Error(kept) from None


def run_executable(exe: Path, workdir: Path, args: list[str], stdin_text: str | None, timeout_s: float,
                   cancel: CancelToken | None = None, threads: int | None = None,
                   argv0: str | None = None, runtime_env: dict[str, str] | None = None,
                   memory_bytes: int = PROGRAM_MEMORY_BYTES, copyback: Path | None = None) -> ProgramRun:
    """Run ``exe`` in ``workdir``; ``argv0``: the name the program sees as ``argv[0]`` (default: its path);
    ``runtime_env``: settings of the runtime for this run (``XPILER_DEVICE_FILL``, ...); ``memory_bytes``: its
    address-space limit (unlimited for a program on a CUDA GPU, whose context maps more than any limit);
    ``copyback``: a file (outside ``workdir``) where the runtime, or a CPU translation built with the recorder,
    writes the data of each device-to-host copy (read back into the run's ``copies``)."""
    before = _snapshot(workdir)
    env = dict(os.environ) | (runtime_env or {})
    if copyback is not None:
        copyback.unlink(missing_ok=True)
        env["XPILER_COPYBACK"] = str(copyback)
    env.setdefault("OMP_NUM_THREADS", str(threads or os.cpu_count() or 1))
    started = time.monotonic()
    proc = children.Popen([argv0 or str(exe), *args], executable=str(exe), cwd=workdir, env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          memory_bytes=memory_bytes, wall_seconds=timeout_s)
    timed_out = False
    stdin_bytes = (stdin_text or "").encode()
    deadline = started + timeout_s
    stdout_b, stderr_b = b"", b""
    while True:
        try:
            stdout_b, stderr_b = proc.communicate(stdin_bytes, timeout=min(0.25, max(0.01, deadline - time.monotonic())))
            break
        except subprocess.TimeoutExpired:
            stdin_bytes = b""  # already sent
            cancelled = cancel is not None and cancel.cancelled
            if not cancelled and time.monotonic() < deadline:
                continue
            proc.kill()
            stdout_b, stderr_b = proc.communicate()
            if cancelled:
                raise Cancelled("cancelled") from None
            timed_out = True
            break
    seconds = time.monotonic() - started
    after = _snapshot(workdir)
    changed = {name for name, stamp in after.items() if before.get(name) != stamp}
    files: dict[str, bytes] = {}
    for name in sorted(changed)[:64]:
        try:
            files[name] = (workdir / name).read_bytes()[:MAX_STREAM_CHARS]
        except OSError:
            continue
    copies = read_copy_backs(copyback) if copyback is not None else []
    return ProgramRun(True, exit_code=None if timed_out else proc.returncode,
                      stdout=stdout_b.decode("utf-8", errors="replace")[:MAX_STREAM_CHARS],
                      stderr=stderr_b.decode("utf-8", errors="replace")[:MAX_STREAM_CHARS], files=files,
                      timed_out=timed_out, seconds=seconds, command=[exe.name, *args], copies=copies)


@cache
def copyback_recorder() -> str:
    """What the verifier's build puts before a CPU translation: the runtime's copy-back recorder
    (``runtime/include/xpiler/copyback.h``) behind the prelude's ``XP_COPY_BACK`` hook (kind 2: device to host) and
    its ``XP_ALLOCATED``/``XP_HOST_WROTE``/``XP_FREED`` hooks (blocks start zeroed, as the runtime's do)."""
    header = (resources.files("xpiler_core.runtime") / "include" / "xpiler" / "copyback.h").read_text(encoding="utf-8")
    return (f"{header}\n#define XP_COPY_BACK(d, n, kind, type) "
            "((kind) == 2 ? ::xpiler::record_copy_back(d, n, ::xpiler::copy_type<type>()) : (void)0)\n"
            "#define XP_ALLOCATED(p, n, type) ::xpiler::copyback_alloc(p, n, true, ::xpiler::copy_type<type>())\n"
            "#define XP_HOST_WROTE(d, n) ::xpiler::copyback_host_write(d, n)\n"
            "#define XP_FREED(p, type) ::xpiler::copyback_free(p, ::xpiler::copy_type<type>())\n")


def read_copy_backs(path: Path) -> list[CopyBack]:
    """The copies a run recorded ("copyback N T" and N bytes, or "copyback N T -" past the record's limit; "freed"
    for a device buffer at its free); a record cut short (the program was killed mid-write) ends at its last whole
    copy."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    copies: list[CopyBack] = []
    at = 0
    while at < len(data):
        end = data.find(b"\n", at)
        if end < 0:
            break
        header = data[at:end].split()
        if len(header) < 3 or header[0] not in (b"copyback", b"freed") or not header[1].isdigit():
            break
        n, element, freed = int(header[1]), header[2].decode("ascii", errors="replace"), header[0] == b"freed"
        flags = set(header[3:])
        if b"-" in flags:
            copies.append(CopyBack(n, element, None, freed, b"u" in flags))
            at = end + 1
        elif end + 1 + n <= len(data):
            copies.append(CopyBack(n, element, data[end + 1:end + 1 + n], freed, b"u" in flags))
            at = end + 1 + n
        else:
            break
    return copies


# ---------------------------------------------------------------------------------------------- compare


def own_verdict(stdout: str) -> str | None:
    """"FAIL" when the program reports a failed self-check, "PASS" when it reports a passed one, else None."""
    failed = passed = False
    for line in stdout.splitlines():
        if _FAIL.search(line) and not _NEGATED_FAIL.search(line):
            failed = True
        elif _PASS.search(line):
            passed = True
    return "FAIL" if failed else "PASS" if passed else None


def _numbers_match(a: str, b: str, atol: float, rtol: float) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return a == b
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= atol + rtol * abs(x)


def lines_match(a: str, b: str, atol: float, rtol: float) -> bool:
    """Two output lines agree: the same text between numbers, numbers within the tolerance."""
    if a == b:
        return True
    numbers_a, numbers_b = _NUMBER.findall(a), _NUMBER.findall(b)
    if len(numbers_a) != len(numbers_b) or _NUMBER.sub("#", a).split() != _NUMBER.sub("#", b).split():
        return False
    return all(_numbers_match(x, y, atol, rtol) for x, y in zip(numbers_a, numbers_b, strict=True))


_BARE_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*\w{0,3}")  # `0.069396`, `12.5 ms`


def _is_table_header(line: str) -> bool:
    """A line of column labels (``Routine    Bandwidth (GB/s)``): fields apart by two spaces or a tab, and no
    number (a line with numbers is data: a device line ``... at device 0: name   with array size 16384`` must
    not mask the numbers of the results under it)."""
    return len(re.split(r"\s{2,}|\t", line.strip())) >= 2 and _NUMBER.search(line) is None


def _kept_lines(text: str, patterns: list[re.Pattern[str]]) -> tuple[list[str], int]:
    """The lines compared, and how many were ignored. The rows under an ignored header of columns (a table of
    timings or bandwidths, up to the next blank line) are compared by their text, their numbers masked; a bare
    number on the line after an ignored label that ends in ':' (``GPU Time in seconds:`` then ``0.0693``) is
    that label's value, ignored too."""
    kept: list[str] = []
    ignored = 0
    timing_table = False
    announced = False  # an ignored line that ends in ':' announces its value on the next line
    for line in text.splitlines():
        if not line.strip():
            timing_table = False
            continue
        if any(p.search(line) for p in patterns) or (announced and _BARE_NUMBER.fullmatch(line.strip())):
            ignored += 1
            timing_table = _is_table_header(line)
            announced = line.rstrip().endswith(":")
            continue
        announced = False
        kept.append(_NUMBER.sub("#", line).rstrip() if timing_table else line.rstrip())
    return kept, ignored


def first_difference(a: list[str], b: list[str], atol: float, rtol: float,
                     unstable: set[int] | None = None) -> tuple[int, str, str] | None:
    for i in range(max(len(a), len(b))):
        if unstable and i in unstable:
            continue
        x = a[i] if i < len(a) else "<no line>"
        y = b[i] if i < len(b) else "<no line>"
        if not lines_match(x, y, atol, rtol):
            return i, x, y
    return None


def _judging(config: ProjectConfig | None) -> tuple[float, float, list[re.Pattern[str]]]:
    """The tolerances and the ignored-line patterns a comparison of program runs uses."""
    atol = config.atol if config is not None and config.atol is not None else DEFAULT_ATOL
    rtol = config.rtol if config is not None and config.rtol is not None else DEFAULT_RTOL
    patterns = [re.compile(p) for p in (config.ignore_patterns if config is not None else ProjectConfig().ignore_patterns)]
    return atol, rtol, patterns


def _unstable_lines(first: list[str], again: list[str], atol: float, rtol: float) -> set[int]:
    """The lines two runs of the same program print differently (time, a random seed): not compared."""
    return {i for i in range(max(len(first), len(again)))
            if i >= len(first) or i >= len(again) or not lines_match(first[i], again[i], atol, rtol)}


def _difference_the_source_keeps(source: ProgramRun, first: list[str], other: list[str], patterns: Any,
                                 atol: float, rtol: float, rerun_source: Any
                                 ) -> tuple[tuple[int, str, str] | None, set[int]]:
    """The first line where ``other`` differs from the source's ``first`` lines, leaving out lines that differ
    between runs of the source itself under the other schedules (one thread; blocks reversed): those depend on
    time, a seed or the order atomics land in. A bare time under a "Time in seconds:" line can agree across two
    runs by chance, so each difference found is checked against another run. Also the lines left out."""
    difference = first_difference(first, other, atol, rtol)
    unstable: set[int] = set()
    for k in range(SOURCE_RERUNS if rerun_source is not None else 0):
        if difference is None:
            break
        again: ProgramRun = rerun_source(OTHER_SCHEDULES[k % len(OTHER_SCHEDULES)])
        if again.failure() or again.exit_code != source.exit_code:
            continue  # cut short (timed out, crashed): its missing lines are not lines that vary
        again_lines, _ = _kept_lines(again.stdout, patterns)
        unstable |= _unstable_lines(first, again_lines, atol, rtol)
        difference = first_difference(first, other, atol, rtol, unstable)
    return difference, unstable


def compare_runs(source: ProgramRun, candidate: ProgramRun, config: ProjectConfig | None,
                 rerun_source: Any = None) -> ProgramReport:
    """Judge the candidate run against the source run (see the module docstring)."""
    atol, rtol, patterns = _judging(config)
    why = candidate.failure()
    if why and candidate.exit_code != source.exit_code:
        return ProgramReport(source, candidate, False, False, f"the translated program {why}")
    if candidate.exit_code != source.exit_code:
        return ProgramReport(source, candidate, False, False,
                             f"exit status {candidate.exit_code}, the source's is {source.exit_code}")
    verdict = own_verdict(source.stdout)
    src_lines, ignored = _kept_lines(source.stdout, patterns)
    cand_lines, _ = _kept_lines(candidate.stdout, patterns)
    if verdict is not None:
        got = own_verdict(candidate.stdout)
        if got != verdict:
            # before blaming the translation: does the source reach the same verdict when run again? (a check
            # that reads uninitialized or out-of-bounds memory, a race or the clock can change it)
            for k in range(SOURCE_RERUNS if rerun_source is not None else 0):
                rerun: ProgramRun = rerun_source(OTHER_SCHEDULES[k % len(OTHER_SCHEDULES)])
                if rerun.failure() or rerun.exit_code != source.exit_code:
                    continue  # a rerun that did not run through (a spin-wait on one thread) says nothing
                second = own_verdict(rerun.stdout)
                if second != verdict:
                    return ProgramReport(source, candidate, False, True,
                                         f"reaches different verdicts when run again ({verdict}, then {second}): its "
                                         "check depends on something besides its inputs (uninitialized or "
                                         "out-of-bounds memory, a race, the clock)", verdict, len(src_lines), ignored)
            return ProgramReport(source, candidate, False, False,
                                 f"the source program prints {verdict}, the translation {got or 'no verdict'}",
                                 verdict, len(src_lines), ignored)
        return ProgramReport(source, candidate, True, False, "", verdict, len(src_lines), ignored)
    difference, unstable = _difference_the_source_keeps(source, src_lines, cand_lines, patterns, atol, rtol,
                                                        rerun_source)
    if difference is not None:
        i, want, got = difference
        return ProgramReport(source, candidate, False, False,
                             f"output line {i + 1} differs: expected '{want[:200]}', got '{got[:200]}'", None,
                             len(src_lines), ignored + len(unstable))
    for name, data in source.files.items():
        other = candidate.files.get(name)
        if other is None:
            return ProgramReport(source, candidate, False, False, f"the translated program does not write {name}")
        if other != data and not _file_contents_match(data, other, atol, rtol):
            return ProgramReport(source, candidate, False, False, f"the file {name} differs")
    report = ProgramReport(source, candidate, True, False, "", None, len(src_lines) - len(unstable),
                           ignored + len(unstable), files_compared=len(source.files))
    if report.nothing_compared and source.copies:
        return judged_by_copies(report, atol, rtol, rerun_source)
    return report


def _judged_by_frees(run: ProgramRun) -> bool:
    """Whether a run is judged by its freed device buffers: it copies nothing back."""
    return all(c.freed for c in run.copies)


def _judged_copies(run: ProgramRun, freed: bool) -> list[CopyBack]:
    """The copies back, or the buffers freed with what the kernels wrote: one freed as the host left it (an input
    copied in, zeros) agrees whatever the kernels compute, and a translation may not allocate it at all (an input
    read in place on the CPU, ``device_mirrors``)."""
    return [c for c in run.copies if c.freed == freed and not (freed and c.unchanged)]


def judged_by_copies(report: ProgramReport, atol: float, rtol: float, rerun_source: Any) -> ProgramReport:
    """A program that prints and writes nothing to compare, judged by the data it copies back to the host, or,
    when it copies nothing back, by its device buffers as they are when freed or at exit (what its kernels computed). A
    copy whose data changes when the source runs again under another schedule (blocks in reverse order, one
    thread) is not compared: the source allows it to differ."""
    source, candidate = report.source, report.candidate
    assert candidate is not None
    freed = _judged_by_frees(source)
    wanted, got = _judged_copies(source, freed), _judged_copies(candidate, freed)
    what = "device buffer" if freed else "copy"
    unstable: set[int] = set()
    difference = copies_difference(wanted, got, atol, rtol, unstable, what)
    if difference is not None and rerun_source is not None:
        again: ProgramRun = rerun_source(OTHER_SCHEDULES[-1])
        again_copies = _judged_copies(again, freed)
        if not again.failure() and len(again_copies) == len(wanted):
            unstable = {i for i, (x, y) in enumerate(zip(wanted, again_copies, strict=True))
                        if copies_difference([x], [y], atol, rtol, set()) is not None}
            difference = copies_difference(wanted, got, atol, rtol, unstable, what)
    if difference is not None:
        where = "the device buffers, as freed or at exit, differ" if freed else "the data copied back to the host differs"
        return ProgramReport(source, candidate, False, False, f"{where}: {difference}", None, 0, report.lines_ignored)
    report.copies_compared = sum(1 for i, c in enumerate(wanted) if c.data is not None and i not in unstable)
    return report


def _as_numbers(data: bytes, element: str) -> Any:
    import numpy as np

    dtype = {"f": np.float32, "d": np.float64}.get(element)
    if dtype is None or len(data) % np.dtype(dtype).itemsize:
        return None
    return np.frombuffer(data, dtype=dtype)


def copies_difference(source: list[CopyBack], candidate: list[CopyBack], atol: float, rtol: float,
                      skipped: set[int], what: str = "copy") -> str | None:
    """Where the translation's device-to-host copies first differ from the source's (None: they agree). Float
    and double data agree within the tolerance (NaN with NaN); other data byte for byte."""
    import numpy as np

    if len(source) != len(candidate):
        if what == "copy":
            return f"the source makes {len(source)} device-to-host copies, the translation {len(candidate)}"
        return (f"the source frees {len(source)} device buffers its kernels wrote, the translation "
                f"{len(candidate)}")
    for i, (want, got) in enumerate(zip(source, candidate, strict=True)):
        where = f"{what} {i + 1} of {len(source)}"
        if i in skipped:
            continue
        if want.size != got.size:
            return f"{where} moves {got.size} bytes, the source's {want.size}"
        if want.data is None or got.data is None or want.data == got.data or "p" in (want.element, got.element):
            continue  # (addresses: another run's allocations lie elsewhere)
        element = want.element if want.element == got.element else "b"
        a, b = _as_numbers(want.data, element), _as_numbers(got.data, element)
        if a is None or b is None:
            at = next(k for k in range(want.size) if want.data[k] != got.data[k])
            return f"{where} ({want.size} bytes) differs from byte {at} on"
        with np.errstate(invalid="ignore", over="ignore"):
            close = (np.abs(a.astype(np.float64) - b) <= atol + rtol * np.abs(a.astype(np.float64))) | (a == b)
        close |= np.isnan(a) & np.isnan(b)
        if not close.all():
            k = int(np.argmin(close))
            kind = "float" if element == "f" else "double"
            return f"{where} ({a.size} {kind}s): element {k} is {float(b[k]):.9g}, the source's {float(a[k]):.9g}"
    return None


def _file_contents_match(a: bytes, b: bytes, atol: float, rtol: float) -> bool:
    try:
        text_a, text_b = a.decode("utf-8"), b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    lines_a, lines_b = text_a.splitlines(), text_b.splitlines()
    return len(lines_a) == len(lines_b) and all(lines_match(x, y, atol, rtol) for x, y in zip(lines_a, lines_b, strict=True))


def time_scale() -> float:
    """How much slower this process runs programs than a whole machine would: a tree migration's worker given
    1/N of the cores (``XPILER_TIME_SCALE``) gets N times the default wall-clock limit, so a program's verdict
    does not depend on how many files run beside it. A limit the user gives is kept as given."""
    try:
        return max(1.0, float(os.environ.get("XPILER_TIME_SCALE", "1")))
    except ValueError:
        return 1.0


def run_settings(config: ProjectConfig | None) -> tuple[list[str], str | None, float]:
    """The program's arguments, standard input text and time limit from its project settings."""
    args = list(config.program_args) if config is not None else []
    stdin_text: str | None = None
    if config is not None and config.stdin:
        stdin_file = Path(config.stdin)
        stdin_text = stdin_file.read_text(encoding="utf-8", errors="replace") if stdin_file.is_file() else config.stdin
    timeout = (config.timeout_s if config is not None and config.timeout_s else None) or DEFAULT_TIMEOUT_S * time_scale()
    return args, stdin_text, timeout


def run_failure(run: ProgramRun) -> str:
    """Why a run is not a successful run of the program ("" when it is), its own FAIL verdict included."""
    why = run.failure()
    if own_verdict(run.stdout) == "FAIL" and (not why or (run.built and not run.timed_out and (run.exit_code or 0) > 0)):
        why = "fails its own check"  # it printed FAIL (and exited non-zero for it): say that, not the status
    return why


def run_program(text: str, path: str, dialect: Dialect, *, config: ProjectConfig | None, build: BuildSettings | None,
                warp_size: int, cancel: CancelToken | None = None) -> ProgramRun:
    """Build a whole program for the runtime (CUDA/HIP/C; BANG on the MLU model) and run it once in a scratch
    copy of its folder, with its project's arguments, standard input and limits."""
    args, stdin_text, timeout = run_settings(config)
    with tempfile.TemporaryDirectory(prefix="xpiler-program-") as tmp:
        root = Path(tmp)
        exe, log, command = build_program(text, dialect, root / "build", warp_size=warp_size,
                                          display_name=Path(path).name, build=build)
        if exe is None:
            return ProgramRun(False, log, command=command)
        scratch = root / "run"
        scratch_copy(Path(path).resolve().parent, scratch)
        on_gpu = build is not None and build.device == "gpu"
        return run_executable(exe, scratch, args, stdin_text, timeout, cancel,
                              memory_bytes=resource.RLIM_INFINITY if on_gpu else PROGRAM_MEMORY_BYTES)


def program_name(source_path: str) -> str:
    """``argv[0]`` of every run of a comparison: what the user runs in the source's folder (``./name``). A
    program that prints its own name (a usage line, a vendor sample's banner) prints the same on both sides."""
    return f"./{Path(source_path).stem}"


def fresh_workdir(root: Path, folder: Path) -> Path:
    """The working folder of every run of a comparison: one path (``root/work/<folder's name>``), so a program
    that prints where it runs prints the same thing on both sides. A previous run's folder is moved aside
    first (its written files were read already)."""
    work = root / "work" / folder.name
    if work.exists():
        work.rename(Path(tempfile.mkdtemp(prefix="run-done-", dir=root)) / folder.name)
    work.parent.mkdir(parents=True, exist_ok=True)
    scratch_copy(folder, work)
    return work


def _compare_programs(source_text: str, source_path: str, source_dialect: Dialect, candidate_text: str,
                      target: Dialect, *, config: ProjectConfig | None, source_build: BuildSettings | None,
                      candidate_build: BuildSettings | None, source_warp: int, target_warp: int,
                      cancel: CancelToken | None = None) -> ProgramReport:
    args, stdin_text, timeout = run_settings(config)
    folder = Path(source_path).resolve().parent
    with tempfile.TemporaryDirectory(prefix="xpiler-program-") as tmp:
        root = Path(tmp)
        exe, log, command = build_program(source_text, source_dialect, root / "build-source", warp_size=source_warp,
                                          display_name=Path(source_path).name, build=source_build)
        if exe is None:
            run = ProgramRun(False, log, command=command)
            return ProgramReport(run, None, False, True, run.failure(), args=args)

        name = program_name(source_path)

        on_gpu = source_build is not None and source_build.device == "gpu"
        records = itertools.count()

        def run_source(schedule: dict[str, str] | None = None) -> ProgramRun:
            return run_executable(exe, fresh_workdir(root, folder), args, stdin_text, timeout, cancel, argv0=name,
                                  runtime_env=schedule,
                                  memory_bytes=resource.RLIM_INFINITY if on_gpu else PROGRAM_MEMORY_BYTES,
                                  copyback=root / f"copyback-source-{next(records)}")

        source = run_source()
        why = run_failure(source)
        if why:
            return ProgramReport(source, None, False, True, why, own_verdict(source.stdout), args=args)
        if cancel is not None:
            cancel.check()
        display = "translation" + (".cpp" if target is Dialect.C else target.suffix)
        if target is Dialect.C:  # the runtime records its copies back itself; a CPU translation's build (never
            # the output the user gets) has the runtime's recorder in front
            candidate_text = f'{copyback_recorder()}#line 1 "{display}"\n{candidate_text}'
        cand_exe, cand_log, cand_command = build_program(
            candidate_text, target, root / "build-candidate", warp_size=target_warp, display_name=display,
            build=candidate_build)
        if cand_exe is None:
            run = ProgramRun(False, cand_log, command=cand_command)
            return ProgramReport(source, run, False, False, f"the translated program {run.failure()}", args=args)
        candidate = run_executable(cand_exe, fresh_workdir(root, folder), args, stdin_text, timeout, cancel,
                                   argv0=name, copyback=root / "copyback-candidate")
        report = compare_runs(source, candidate, config, run_source)
        if report.matched and not on_gpu:
            # agreeing is not enough when the source's own output depends on memory nothing wrote (the poisoned
            # run is the runtime's device heap: a GPU reference has none)
            poisoned = run_executable(exe, fresh_workdir(root, folder), args, stdin_text, timeout, cancel, argv0=name,
                                      runtime_env={"XPILER_DEVICE_FILL": "poison", "XPILER_SHARED_FILL": "zero"})
            defect = uninitialized_read(source, poisoned, run_source, config)
            if defect is not None:
                report = ProgramReport(source, candidate, False, True, defect, report.verdict)
        report.args = args
        return report


def compare_programs(source_text: str, source_path: str, source_dialect: Dialect, candidate_text: str,
                     target: Dialect, *, config: ProjectConfig | None, source_build: BuildSettings | None,
                     candidate_build: BuildSettings | None, source_warp: int, target_warp: int,
                     cancel: CancelToken | None = None) -> ProgramReport:
    """Build and run the source program and the translated one; see the module docstring. The report says
    where the source ran (the runtime, or this machine's GPU under --reference gpu)."""
    report = _compare_programs(source_text, source_path, source_dialect, candidate_text, target, config=config,
                               source_build=source_build, candidate_build=candidate_build, source_warp=source_warp,
                               target_warp=target_warp, cancel=cancel)
    report.reference = source_build.device if source_build is not None else "runtime"
    return report


def uninitialized_read(source: ProgramRun, poisoned: ProgramRun, rerun_source: Any,
                       config: ProjectConfig | None) -> str | None:
    """The source run again with other bytes in its fresh device memory and shared arrays prints something else
    at a line (or reaches another verdict) where a plain second run agrees with the first: it reads memory it
    never wrote."""
    if poisoned.failure() or poisoned.exit_code != source.exit_code:
        return None  # judged where the source runs normally
    atol, rtol, patterns = _judging(config)
    first, _ = _kept_lines(source.stdout, patterns)
    other, _ = _kept_lines(poisoned.stdout, patterns)
    # a line that varies between runs of the source (the order atomics land in) is not the poison's doing
    difference, _ = _difference_the_source_keeps(source, first, other, patterns, atol, rtol, rerun_source)
    if difference is None:
        return None
    i, want, got = difference
    return (f"{UNINITIALIZED}: its output line {i + 1} changes with what freshly allocated device memory or "
            f"unwritten shared memory holds ('{want[:120]}', and '{got[:120]}' with other bytes there) — a GPU "
            "returns whatever that memory last held")
