"""Repair driver: failing candidate → tiny examples → localization → sketches → z3 → stitch → re-verify.

``repair_candidate`` is the one entry point (CLI, pipeline, language server). It never raises on user
input: anything it cannot model is an honest ``refused``/``unrepaired`` result with a message. A repair is
reported only after the stitched text passes the *full* spec cases on the real harness; a solution that
fits the tiny examples but fails the full cases is counted in ``false_repairs`` and never returned.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import z3

from xpiler_core import ast as A
from xpiler_core.diagnostics import Span, XpilerError
from xpiler_core.frontend.dialect import Dialect, detect_dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.progress import CancelToken, ProgressFn
from xpiler_core.repair import examples as EX
from xpiler_core.repair import sketch as SK
from xpiler_core.repair.interp import (
    Buffer,
    Choice,
    Infeasible,
    Ite,
    Program,
    StepLimit,
    Unsupported,
    _zb,
    not_,
    run_kernel,
)
from xpiler_core.repair.suspects import FunctionSites, collect, get_at, implicated_statements, iter_int_sites
from xpiler_core.verify.harness import SpecReport, run_spec
from xpiler_core.verify.spec import KernelSpec, load_spec

MAX_EXAMPLE_THREADS = 3072
SKETCH_SECONDS = 4.0  # interpretation time one sketch may take
SOLVER_SECONDS = 6.0


@dataclass
class RepairEdit:
    span: Span
    old: str
    new: str

    def to_dict(self) -> dict[str, Any]:
        return {"span": self.span.to_dict(), "old": self.old, "new": self.new}


@dataclass
class RepairResult:
    status: str  # "repaired" | "not-needed" | "unrepaired" | "refused"
    message: str
    edits: list[RepairEdit] = field(default_factory=list)
    text: str | None = None  # the repaired candidate
    sketch: str | None = None  # hole kind of the accepted repair
    model: dict[str, Any] = field(default_factory=dict)
    suspects_tried: int = 0
    false_repairs: int = 0  # solutions that fit the small examples but failed the full cases (rejected)
    examples: list[dict[str, int]] = field(default_factory=list)
    seconds: float = 0.0
    report: SpecReport | None = None  # full re-verification of the repaired text

    @property
    def repaired(self) -> bool:
        return self.status == "repaired"

    def to_manifest(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message,
            "edits": [e.to_dict() for e in self.edits],
            "sketch": self.sketch,
            "model": self.model,
            "suspects_tried": self.suspects_tried,
            "false_repairs": self.false_repairs,
            "examples": self.examples,
            "seconds": round(self.seconds, 3),
        }


def apply_edits(text: str, edits: Sequence[RepairEdit | SK.Edit]) -> str:
    data = text.encode("utf-8")
    for e in sorted(edits, key=lambda e: e.span.start_byte, reverse=True):
        data = data[: e.span.start_byte] + e.new.encode("utf-8") + data[e.span.end_byte :]
    return data.decode("utf-8")


def _outputs_match(spec: KernelSpec, ex: EX.Example, buffers: dict[str, Buffer]) -> tuple[bool, set[int], set[str]]:
    """Concrete comparison; returns (ok, writer statement ids of bad elements, outputs with unwritten bad ones)."""
    ok, writers, missing = True, set(), set()
    for name in ex.expected:
        atol, rtol = EX.tolerance(spec, name)
        exp = EX.expected_flat(spec, ex, name)
        buf = buffers[name]
        for k, (g, e) in enumerate(zip(buf.data, exp, strict=False)):
            if not EX.close(g, e, atol, rtol):
                ok = False
                w = buf.writers.get(k) if buf.writers is not None else None
                if w is None:
                    missing.add(name)
                else:
                    writers.add(w)
    return ok, writers, missing


def _output_constraints(spec: KernelSpec, ex: EX.Example, buffers: dict[str, Buffer]) -> list[Any] | None:
    """Constraints that make every output element equal the reference; None when impossible."""
    out: list[Any] = []
    for name in ex.expected:
        atol, rtol = EX.tolerance(spec, name)
        exp = EX.expected_flat(spec, ex, name)
        for v, e in zip(buffers[name].data, exp, strict=False):
            f = _matches(v, float(e), atol, rtol, {})
            if f is False:
                return None
            if f is not True:
                out.append(f)
    return out


def _matches(v: Any, e: float, atol: float, rtol: float, memo: dict[int, Any]) -> Any:
    """Python bool or z3 formula: the (possibly hole-dependent) value ``v`` is close to ``e``."""
    if isinstance(v, Ite):
        key = id(v)
        if key not in memo:
            a, b = _matches(v.then, e, atol, rtol, memo), _matches(v.else_, e, atol, rtol, memo)
            if isinstance(a, bool) and isinstance(b, bool):
                memo[key] = a if a == b else (v.cond if a else not_(v.cond))
            else:
                memo[key] = z3.If(_zb(v.cond), _zb(a), _zb(b))
        return memo[key]
    if isinstance(v, Choice):
        bad = [c.cond for c in v.cases if not EX.close(c.value, e, atol, rtol)]
        if any(c is True for c in bad):
            return False
        return True if not bad else z3.And([z3.Not(c) for c in bad])
    if isinstance(v, z3.ArithRef):
        return False if e != int(e) else v == int(e)
    if isinstance(v, z3.BoolRef):
        return v == bool(e)
    return EX.close(v, e, atol, rtol)


class _Budget:
    def __init__(self, seconds: float, cancel: CancelToken | None) -> None:
        self.deadline = time.monotonic() + seconds
        self.cancel = cancel

    def left(self) -> float:
        if self.cancel is not None:
            self.cancel.check()
        return self.deadline - time.monotonic()


def repair_candidate(
    text: str,
    path: str,
    spec_or_source: KernelSpec | str | Path,
    *,
    dialect: Dialect | None = None,
    entry: str | None = None,
    kind: str | None = None,
    warp_size: int | None = None,
    budget_s: float = 30.0,
    max_suspects: int = 60,
    seed: int = 0,
    initial_report: SpecReport | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> RepairResult:
    """Try to repair a candidate that fails its spec by changing one small expression.

    ``spec_or_source`` is a loaded spec or the path of a ``spec.toml``. The candidate runs with the spec's
    arguments (``entry``/``kind``/``dialect`` default to the spec's). Returns a :class:`RepairResult`
    whose edits (byte spans in ``text``) turn it into text that passes every spec case.
    """
    started = time.monotonic()
    budget = _Budget(budget_s, cancel)
    spec = spec_or_source if isinstance(spec_or_source, KernelSpec) else load_spec(Path(spec_or_source))
    dialect = dialect or detect_dialect(text, path)
    entry = entry or spec.entry
    kind = kind or spec.kind
    result = RepairResult("unrepaired", "")

    def done(status: str, message: str) -> RepairResult:
        result.status, result.message = status, message
        result.seconds = time.monotonic() - started
        return result

    def verify(candidate: str) -> SpecReport:
        return run_spec(
            spec, candidate_text=candidate, candidate_dialect=dialect, candidate_entry=entry,
            candidate_kind=kind, warp_size=warp_size, seed=seed, cancel=cancel,
        )

    report = initial_report or verify(text)
    if report.passed:
        return done("not-needed", "the candidate already passes its tests")
    if report.build_error:
        return done("refused", "the candidate does not build; repair needs a running candidate")
    module = lower_text(text, path, dialect)
    prog = Program.of(module)
    prog.warp_size = warp_size or (64 if dialect is Dialect.HIP else 32)
    fn = prog.functions.get(entry)
    if fn is None or kind != "kernel" and kind != "host":
        return done("refused", f"entry '{entry}' is not a function the repair interpreter models")
    src = SK.SourceText(text)

    # 1. Tiny examples on which the candidate (interpreted) disagrees with the reference.
    try:
        chosen, writers, missing = _choose_examples(spec, prog, entry, kind, seed, budget)
    except Unsupported as exc:
        return done("refused", f"repair does not model this kernel: {exc}")
    except (StepLimit, XpilerError) as exc:
        return done("unrepaired", f"could not run small examples: {exc}")
    if not chosen:
        return done("unrepaired", "no small case reproduces the failure; repair needs one to learn from")
    result.examples = [ex.case for ex in chosen]

    # 2. Localization and ranked sketches.
    fs = collect(fn, prog.macros)
    # A hole in a statement the failing examples never ran cannot change their outputs: skip those sites.
    ran = prog.executed
    sketches = [
        sk for sk in _rank_sketches(fs, prog, src, writers, missing)
        if not sk.site.stmt or id(get_at(fn, sk.site.stmt)) in ran
    ][:max_suspects]
    if progress is not None:
        progress(0.92, f"repair: {len(sketches)} suspects on {len(chosen)} small cases")

    # 3. Solve each sketch; stitch; re-verify.
    for sk in sketches:
        if budget.left() <= 0:
            return done("unrepaired", f"time budget ({budget_s:.0f} s) spent after {result.suspects_tried} suspects")
        result.suspects_tried += 1
        # Counterexample-guided: encode the smallest failing example, add another only when a model
        # fits the encoded ones but not it (cheaper than encoding every example for every suspect).
        deadline = time.monotonic() + min(SKETCH_SECONDS, budget.left())
        try:
            constraints = _encode(spec, prog, fn, entry, kind, sk, chosen[:1], deadline)
        except (Unsupported, StepLimit, Infeasible, z3.Z3Exception, RecursionError):
            continue
        if constraints is None:
            continue
        encoded = 1
        opt = z3.Optimize()
        opt.set("timeout", int(max(0.5, min(SOLVER_SECONDS, budget.left())) * 1000))
        opt.add(*sk.constraints, *constraints)
        opt.minimize(sk.objective)
        for _ in range(4):  # a few models per sketch: examples or the full cases may reject one
            if budget.left() <= 0 or opt.check() != z3.sat:
                break
            model = opt.model()
            edits = sk.decode(model)
            if not edits:
                break
            repaired = apply_edits(text, edits)
            bad = _first_misfit(spec, repaired, path, dialect, entry, kind, chosen, prog.warp_size)
            if bad is not None:
                if bad >= encoded and encoded < len(chosen):
                    try:
                        more = _encode(spec, prog, fn, entry, kind, sk, chosen[encoded:bad + 1], deadline + SKETCH_SECONDS)
                    except (Unsupported, StepLimit, Infeasible, z3.Z3Exception, RecursionError):
                        break
                    if more is None:
                        break
                    encoded = bad + 1
                    opt.add(*more)
                else:
                    opt.add(z3.Or([v != model.eval(v, model_completion=True) for v in sk.variables]))
                continue
            full = verify(repaired)
            if full.passed:
                result.edits = [RepairEdit(e.span, e.old, e.new) for e in edits]
                result.text, result.sketch, result.report = repaired, sk.kind, full
                result.model = sk.describe(model)
                first = result.edits[0]
                return done("repaired", f"`{first.old}` → `{first.new}` ({sk.kind} hole) passes all {len(full.cases)} cases")
            result.false_repairs += 1
            opt.add(z3.Or([v != model.eval(v, model_completion=True) for v in sk.variables]))
    return done("unrepaired", f"no single-expression repair found among {result.suspects_tried} suspects")


def _run(spec: KernelSpec, prog: Program, entry: str, kind: str, ex: EX.Example) -> dict[str, Buffer]:
    prog.steps = 0
    prog.obligations = []
    return run_kernel(prog, entry, EX.stored_args(spec, ex.inputs), ex.shape, kind)


def _choose_examples(
    spec: KernelSpec, prog: Program, entry: str, kind: str, seed: int, budget: _Budget
) -> tuple[list[EX.Example], set[int], set[str]]:
    """The smallest case that shows the failure, plus one larger case (so coefficients generalize)."""
    prog.instrument = True
    chosen: list[EX.Example] = []
    writers: set[int] = set()
    missing: set[str] = set()
    total = 0
    try:
        for i, case in enumerate(EX.tiny_cases(spec, MAX_EXAMPLE_THREADS)):
            if budget.left() <= 0 or len(chosen) >= 2:
                break
            ex = EX.make_example(spec, case, i, seed)
            if total + ex.threads > 2 * MAX_EXAMPLE_THREADS:
                continue
            try:
                buffers = _run(spec, prog, entry, kind, ex)
                ok, w, m = _outputs_match(spec, ex, buffers)
            except Infeasible:
                ok, w, m = False, {prog.last_stmt} if prog.last_stmt else set(), set()
            if not ok:
                chosen.append(ex)
                writers |= w
                missing |= m
                total += ex.threads
            elif chosen and len(chosen) < 2:
                chosen.append(ex)  # a passing larger case still constrains the hole
                total += ex.threads
    finally:
        prog.instrument = False
    return chosen, writers, missing


def _rank_sketches(
    fs: FunctionSites, prog: Program, src: SK.SourceText, writers: set[int], missing: set[str]
) -> list[SK.Sketch]:
    implicated, n_direct = implicated_statements(fs, writers, missing)
    # Bucket 0: writers of bad elements, the statements that fed them through memory, their guards and
    # loops; bucket 1: declarations they read; bucket 2: the rest. Inside a bucket cheap holes go first.
    rank = {p: (0 if i < n_direct else 1) for i, p in enumerate(implicated)}
    out: list[tuple[tuple[int, ...], SK.Sketch]] = []
    kind_order = {"compare": 0, "const": 1, "swap": 2, "loop": 3, "affine": 4}
    for site in fs.sites:
        if site.node.span is None:
            continue
        stmt_rank = rank.get(site.stmt, 2)
        size = sum(1 for _ in A.walk(site.node))
        made: list[SK.Sketch] = []
        try:
            if isinstance(site.node, A.Binary) and site.node.op in SK.COMPARISONS and site.ctx in ("cond", "cmp"):
                made.append(SK.compare_sketch(site, fs, prog.macros, src))
            made += SK.swap_sketches(site, src)
        except (AssertionError, ValueError):
            pass
        # Holes in loop conditions make the whole loop hole-dependent: the costliest, so they go later.
        in_loop_head = isinstance(get_at(fs.fn, site.stmt), (A.For, A.While)) if site.stmt else False
        for sk in made:
            order = kind_order["loop"] if in_loop_head else kind_order[sk.kind]
            out.append(((stmt_rank, order, size), sk))
    for site in iter_int_sites(fs):
        if site.node.span is None:
            continue
        stmt_rank = rank.get(site.stmt, 2)
        size = sum(1 for _ in A.walk(site.node))
        if size > 40:
            continue
        if isinstance(site.node, A.Literal):
            out.append(((stmt_rank, kind_order["const"], size), SK.const_sketch(site)))
        else:
            in_loop_head = isinstance(get_at(fs.fn, site.stmt), (A.For, A.While)) if site.stmt else False
            order = kind_order["loop"] if in_loop_head else (kind_order["affine"] if size > 2 else kind_order["const"])
            out.append(((stmt_rank, order, size), SK.affine_sketch(site, fs, prog.macros, src)))
    out.sort(key=lambda t: t[0])
    return [sk for _, sk in out]


def _encode(
    spec: KernelSpec, prog: Program, fn: A.Function, entry: str, kind: str, sk: SK.Sketch, chosen: list[EX.Example],
    deadline: float | None = None,
) -> list[Any] | None:
    holed, evaluators = SK.install(fn, sk)
    sprog = Program(prog.module, {**prog.functions, entry: holed}, prog.macros, evaluators)
    sprog.bounds = sk.bounds
    sprog.deadline = deadline
    sprog.warp_size = prog.warp_size
    constraints: list[Any] = []
    for ex in chosen:
        buffers = _run(spec, sprog, entry, kind, ex)
        cs = _output_constraints(spec, ex, buffers)
        if cs is None:
            return None
        constraints += cs + sprog.obligations
    return constraints


def _first_misfit(
    spec: KernelSpec, text: str, path: str, dialect: Dialect, entry: str, kind: str, chosen: list[EX.Example],
    warp_size: int,
) -> int | None:
    """Index of the first small example the stitched text (re-lowered, run concretely) gets wrong."""
    try:
        prog = Program.of(lower_text(text, path, dialect))
        prog.warp_size = warp_size
    except Exception:  # noqa: BLE001 - a stitched text we cannot even lower is simply not a repair
        return 0
    for i, ex in enumerate(chosen):
        try:
            ok, _, _ = _outputs_match(spec, ex, _run(spec, prog, entry, kind, ex))
        except (Unsupported, Infeasible, StepLimit):
            ok = False
        if not ok:
            return i
    return None


def summarize(result: RepairResult) -> str:
    lines = [f"repair: {result.status}: {result.message} ({result.seconds:.1f} s)"]
    for e in result.edits:
        lines.append(f"  line {e.span.start_line + 1}: `{e.old}` → `{e.new}`")
    return "\n".join(lines)


__all__ = ["RepairEdit", "RepairResult", "apply_edits", "repair_candidate", "summarize"]
