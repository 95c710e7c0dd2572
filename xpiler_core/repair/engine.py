"""Repair driver: failing candidate → tiny examples → localization → sketches → z3 → stitch → re-verify.

``repair_candidate`` is the one entry point (CLI, pipeline, language server). It never raises on user
input: anything it cannot model is an honest ``refused``/``unrepaired`` result with a message. A repair is
reported only after the stitched text passes the *full* spec cases on the real harness; a solution that
fits the tiny examples but fails the full cases is counted in ``false_repairs`` and never returned.

Speed and reach (each sketch gets seconds, so the right suspect is reached within the budget):

* Outputs the kernel never reads back are *observed*: stores are logged and become position constraints
  (``observe.py``) instead of symbolic memory.
* Kernels whose threads do not interact (no shared memory, barriers, atomics, warp operations) are encoded
  on a *thread sample* drawn from the concrete run: threads that stored wrong values or faulted, threads
  that stored nothing, and threads that were right (which must keep storing). A model that fits the sample
  but not the whole example brings that example in with every thread.
* When the symbolic encoding is refused (a hole inside a floating-point accumulation, a division by the
  hole), the sketch is solved by *learning*: z3 proposes the closest model, the sampled threads run
  concretely with it, and every wrong thread adds a clause that its hole evaluations must not all take
  the same values again (``_learned_clauses``).
* Two rounds over the suspects: affine/comparison holes first within a small distance of the original
  (the edit a one-site bug calls for; no over-fitted formula first), then without that cap. Wide holes that
  must be learned wait until the other suspects of the round had their turn.
* A swap is *searched concretely* (``search_concretely``: stitched, run on the small examples under a time
  and loop-iteration cap, then on the full spec cases): one run settles it. Where threads interact (shared
  memory, atomics) there is no thread sample and a symbolic run covers every thread: swaps go first there,
  and the nearest completions of names and constants are searched concretely before any encoding.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import z3

from xpiler_core import ast as A
from xpiler_core.diagnostics import Span, XpilerError
from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.progress import CancelToken, ProgressFn
from xpiler_core.repair import examples as EX
from xpiler_core.repair import observe as OB
from xpiler_core.repair import sketch as SK
from xpiler_core.repair import trace as TR
from xpiler_core.repair.interp import (
    Buffer,
    Choice,
    Infeasible,
    Ite,
    ObservedRead,
    Program,
    StepLimit,
    TimeLimit,
    Unsupported,
    _zb,
    and_,
    not_,
    or_,
    run_kernel,
)
from xpiler_core.repair.suspects import (
    FunctionSites,
    Site,
    collect,
    get_at,
    implicated_statements,
    iter_int_sites,
)
from xpiler_core.runtime.sandbox import is_timeout
from xpiler_core.verify.harness import ExpectationStore, SpecReport, run_spec
from xpiler_core.verify.spec import KernelSpec, load_spec

_log = logging.getLogger(__name__)

MAX_EXAMPLE_THREADS = 3072
SKETCH_SECONDS = 4.0  # interpretation time one sketch may take
SOLVER_SECONDS = 6.0
PASSING_PER_LAUNCH = 2  # small cases tried per launch shape while none has failed yet
THREAD_STEPS_MIN = 12000  # a bug that shortens loops (`rv < 5` → `rv >= 5`) left the concrete runs short
THREAD_STEPS_FACTOR = 4
CAP_FIRST_ROUND = 2  # distance to the original an affine/comparison hole may move in the first round
LEARN_ROUNDS = 64  # concrete runs one sketch may learn from when its symbolic encoding is refused
LEARN_SECONDS = 6.0
# Completions of one sketch run concretely when it cannot be encoded and no thread sample exists, by hole kind.
CONCRETE_TRIES = {"const": 2, "rename": 3, "swap": 1, "compare": 6, "affine": 4}
ITERATIONS_MIN = 256  # iterations one loop of a concretely searched candidate may run ...
ITERATIONS_FACTOR = 4  # ... or this many times the most any loop ran in the failing concrete runs
# Interpretation time of one concretely searched candidate on the small examples: this many times what the
# failing candidate took on them, at least the minimum (a bug that ends threads early makes its run short).
CONCRETE_RUN_FACTOR = 2.0
CONCRETE_RUN_SECONDS_MIN = 1.5
CONCRETE_TIMEOUT_MIN = 3.0  # seconds a candidate checked on the harness may run (at least)
MAX_HOST_SUSPECTS = 24  # holes in host code (screened on the harness only)
MAX_PLAUSIBLE_VALUES = 10  # values run for a constant searched concretely
POOL_SIZE = 160  # completions one pooled selector program holds
POOL_SECONDS = 8.0  # enumerating the completions to pool
UNDECIDED = -1  # _first_misfit: the small cases did not finish in the time given
HEAVY_EXAMPLE_SECONDS = 2.0  # interpretation time of the examples above which candidates go to the harness
SAME_OUTCOME_LIMIT = 48  # hole values after which a wrong thread that never changes is deemed out of reach


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


REPAIR_CHOICE_VARIABLE = "XPILER_REPAIR_CHOICE"
# Read once per run (a function-local static is initialized once, thread-safely); -1 when unset: the original.
_CHOICE_FUNCTION = (
    "#include <stdlib.h>\n"
    "static inline int xp_repair_choice_from_env() {{ const char* s = getenv(\"{var}\"); return s ? atoi(s) : -1; }}\n"
    "static inline int xp_repair_choice() {{ static const int choice = xp_repair_choice_from_env(); return choice; }}\n"
)


def _span_key(edit: SK.Edit) -> tuple[int, int]:
    return edit.span.start_byte, edit.span.end_byte


def _selector_text(text: str, completions: Sequence[Sequence[SK.Edit]], dialect: Dialect) -> str | None:
    """One program text holding every completion: each edited span becomes ``(xp_repair_choice() == k ? (new_k)
    : ... (old))`` over the completions ``k`` that edit it (a completion leaves the spans it does not edit as
    they are). None when two edited spans overlap without being the same (then they are built apart) or the
    dialect has no C++ to spell it in."""
    if dialect not in (Dialect.CUDA, Dialect.HIP) or not completions:
        return None
    by_span: dict[tuple[int, int], list[tuple[int, SK.Edit]]] = {}
    for k, completion in enumerate(completions):
        for edit in completion:
            by_span.setdefault(_span_key(edit), []).append((k, edit))
    spans = sorted(by_span)
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False)):
        return None  # overlapping edits
    merged = []
    for span in spans:
        arms = "".join(f"xp_repair_choice() == {k} ? ({edit.new}) : " for k, edit in by_span[span])
        first = by_span[span][0][1]
        merged.append(SK.Edit(first.span, first.old, f"({arms}({first.old}))"))
    return _CHOICE_FUNCTION.format(var=REPAIR_CHOICE_VARIABLE) + apply_edits(text, merged)


def _disjoint_groups(entries: Sequence[tuple[list[SK.Edit], str]], size: int) -> list[list[tuple[list[SK.Edit], str]]]:
    """``entries`` (completions with their texts) in groups, in order, whose edited spans are each the same as or
    apart from every other span of the group (one selector program per group), at most ``size`` each."""
    groups: list[tuple[list[tuple[list[SK.Edit], str]], set[tuple[int, int]]]] = []
    for entry in entries:
        spans = {_span_key(e) for e in entry[0]}
        for members, taken in groups:
            if len(members) < size and all(a == b or a[1] <= b[0] or b[1] <= a[0] for a in spans for b in taken):
                members.append(entry)
                taken |= spans
                break
        else:
            groups.append(([entry], set(spans)))
    return [members for members, _ in groups]


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

    expectations: ExpectationStore = {}  # the reference's outputs, asked again by every candidate's run

    def verify(candidate: str, judged: KernelSpec = spec) -> SpecReport:
        return run_spec(
            judged, candidate_text=candidate, candidate_dialect=dialect, candidate_entry=entry,
            candidate_kind=kind, warp_size=warp_size, seed=seed, cancel=cancel, expectations=expectations,
        )

    if initial_report is None and budget.left() <= 0:
        return done("unrepaired", f"the repair budget ({budget_s:g} s) was spent before its first run")
    # the candidate's first run, each case limited by the budget too (a mutant that loops would otherwise hold
    # the spec's whole time limit per case)
    report = initial_report or verify(
        text, dataclasses.replace(spec, timeout_s=min(spec.timeout_s, max(1.0, budget.left()))))
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
    samples: dict[int, ThreadSample] = {}
    sampling = kind == "kernel" and _independent(prog)
    # CUDA/HIP host code runs for real, recorded, once per example; the interpreter replays the record and runs
    # the kernels it launched (repair's model covers kernel code only)
    recorded = kind == "host" and dialect in (Dialect.CUDA, Dialect.HIP)

    def record_example(ex: EX.Example) -> None:
        run = TR.record_host_run(spec, text, dialect, entry, warp_size, ex.inputs, ex.case)
        if isinstance(run, str):
            raise Unsupported(run)
        ex.host_run = run

    try:
        chosen, writers, missing, faults = _choose_examples(
            spec, prog, entry, kind, seed, budget, samples if sampling else None,
            record_example if recorded else None,
        )
    except Unsupported as exc:
        # A construct the interpreter does not model (tensor-core fragments): nothing can be localized or
        # encoded, but the candidate runs on the harness, so completions are screened there alone.
        if not report.cases or any(is_timeout(c.error) for c in report.cases):
            return done("refused", f"repair does not model this kernel: {exc}")
        harness_only = str(exc)
        _log.debug("the interpreter does not model this kernel (%s): candidates run on the harness only", exc)
        chosen, writers, missing, faults = [], set(), set(), set()
    except (StepLimit, XpilerError) as exc:
        return done("unrepaired", f"could not run small examples: {exc}")
    else:
        harness_only = ""
    if not chosen and not harness_only:
        return done("unrepaired", "no small case reproduces the failure; repair needs one to learn from")
    result.examples = [ex.case for ex in chosen]

    # Examples too big for the interpreter (a shape built into the kernel leaves nothing to shrink): when the
    # chosen examples take longer to interpret than the full cases take on the real harness, no symbolic
    # encoding is tried (it is slower still) and candidates are screened on the harness directly.
    # The harness's build is shared by the completions of a sketch, so its runs of the cases are what one more
    # completion costs there. An example the interpreter's step budget stopped, where the compiled candidate
    # ran to the end on the harness, is too big to interpret, not a loop that never ends.
    interpreted = sum(ex.seconds for ex in chosen)
    harness_runs = sum(c.seconds for c in report.cases)
    ran_to_end = bool(report.cases) and not any(is_timeout(c.error) for c in report.cases)
    heavy = bool(harness_only) or interpreted > max(harness_runs, HEAVY_EXAMPLE_SECONDS) and (
        ran_to_end or not any(ex.ran_out for ex in chosen))
    if heavy:
        _log.debug("examples take %.1f s to interpret (the harness runs the cases in %.1f s): candidates run on "
                   "the harness", interpreted, harness_runs)

    # 2. Localization and ranked sketches: in the entry, or for a host entry in the kernels and device
    # functions it launches and calls first (where the outputs are computed), then in the host code.
    # A hole in a statement the failing examples never ran cannot change their outputs: skip those sites.
    ran = prog.executed
    interacting = kind == "kernel" and not sampling  # threads share memory or atomics: no thread sample
    owner: dict[int, A.Function] = {}  # sketch → the function its holes go in
    sketches = []
    if harness_only:
        targets = [f for f in _reachable(prog, fn) if f.is_kernel or f.is_device] if kind == "host" else [fn]
    elif recorded:
        # the kernels the recorded runs launched, and what they call: the host code itself ran for real
        launched = [prog.functions[op.kernel] for ex in chosen if ex.host_run is not None
                    for op in ex.host_run.record.launches if op.kernel in prog.functions]
        targets = list({id(f): f for k in launched for f in _reachable(prog, k)}.values())
    else:
        targets = [fn] if kind == "kernel" else _reachable(prog, fn)
    for target in targets:
        fs = collect(target, prog.macros)
        for sk in _rank_sketches(fs, prog, src, writers | faults, missing, faults, interacting=interacting,
                                 on_harness=heavy):
            if harness_only or not sk.site.stmt or id(get_at(target, sk.site.stmt)) in ran:
                owner[id(sk)] = target
                sketches.append(sk)
    sketches = sketches[:max_suspects]
    # Host code ran for real and the interpreter replays its record, so a hole there cannot be encoded or run
    # on the small examples: its completions are screened on the harness (a launch of an invalid shape, a
    # short copy). After the kernels' suspects, or alone when the failing runs launched nothing.
    host_holes: set[int] = set()
    if recorded or harness_only and kind == "host":
        host_sketches = []
        for target in (f for f in _reachable(prog, fn) if not f.is_kernel and not f.is_device):
            for sk in _rank_sketches(collect(target, prog.macros), prog, src, set(), set(), set()):
                if sk.kind in CONCRETE_TRIES:
                    owner[id(sk)] = target
                    host_holes.add(id(sk))
                    host_sketches.append(sk)
        sketches += host_sketches[:MAX_HOST_SUSPECTS]
    if progress is not None:
        progress(0.92, f"repair: {len(sketches)} suspects on {len(chosen)} small cases")

    # 3. Solve each sketch; stitch; re-verify.
    # Two rounds: first every suspect with at most CAP_FIRST_ROUND units of change in its affine/comparison
    # hole (the small edit a single-site bug calls for, and no over-fitted formula found first), then the
    # affine/comparison holes again without the cap.
    # Candidates checked directly on the real harness (see search_concretely) get a tighter time limit, so a
    # candidate that never ends costs seconds, not the spec's whole timeout.
    screen_spec = dataclasses.replace(spec, timeout_s=min(spec.timeout_s, max(CONCRETE_TIMEOUT_MIN, 4 * report.seconds)))
    tried: set[str] = {text}  # stitched texts already checked on the harness
    iteration_cap = max(ITERATIONS_MIN, ITERATIONS_FACTOR * max(prog.loop_iters.values(), default=0))
    run_seconds = max(CONCRETE_RUN_SECONDS_MIN, CONCRETE_RUN_FACTOR * sum(ex.seconds for ex in chosen))
    searched: set[int] = set()  # sketches searched concretely within the first round's cap
    def nearest(sk: SK.Sketch, cap: int | None, limit: int, after_cap: bool) -> Iterator[z3.ModelRef]:
        """The sketch's completions closest to the original first (at most ``4 * limit + 8`` models; a constant
        tries the values a person would have meant, ``_plausible_values``, not only the nearest).
        ``after_cap``: the first round tried those within ``CAP_FIRST_ROUND``."""
        if sk.kind == "const":
            for value in _plausible_values(sk, text, [ex.case for ex in chosen]):
                pinned = z3.Solver()
                pinned.add(*sk.constraints, sk.variables[0] == value)
                if pinned.check() == z3.sat:
                    yield pinned.model()
            return
        opt = z3.Optimize()
        opt.set("timeout", int(max(0.5, min(SOLVER_SECONDS, budget.left())) * 1000))
        opt.add(*sk.constraints)
        if cap is not None:
            opt.add(sk.objective <= cap)
        elif after_cap:
            opt.add(sk.objective > CAP_FIRST_ROUND)
        opt.minimize(sk.objective)
        if sk.tiebreak is not None:
            opt.minimize(sk.tiebreak)  # lexicographic: after the distance
        for _ in range(4 * limit + 8):
            if budget.left() <= 0 or opt.check() != z3.sat:
                return
            model = opt.model()
            opt.add(z3.Or([v != model.eval(v, model_completion=True) for v in sk.variables]))
            yield model

    def search_concretely(sk: SK.Sketch, cap: int | None, limit: int) -> RepairResult | None:
        """Enumerate the sketch's completions closest to the original first, each stitched and run concretely
        (the small examples on the interpreter, then the full spec cases on the real harness): for holes the
        symbolic encoding refuses in kernels whose threads interact (no thread sample to learn from), and for
        finite holes (a swap) where one run settles the question. A hole in host code goes to the harness
        alone."""
        on_harness = heavy or id(sk) in host_holes
        after_cap = cap is None and id(sk) in searched
        if cap is not None:
            searched.add(id(sk))
        limit = _concrete_limit(sk.kind, limit)
        checked = 0
        batch: list[tuple[z3.ModelRef, list[SK.Edit], str]] = []  # on the harness: completions built as one
        pooled_models = pool_models.pop(id(sk), None)
        models = pooled_models[1] if pooled_models is not None and pooled_models[0] == cap and not after_cap \
            else nearest(sk, cap, limit, after_cap)
        for model in models:
            if checked >= limit or budget.left() <= 0:
                break
            edits = sk.decode(model)
            repaired = apply_edits(text, edits) if edits else text
            if repaired in tried:
                continue
            tried.add(repaired)
            checked += 1
            if on_harness and edits:
                batch.append((model, edits, repaired))
                continue
            # The small examples on the interpreter first (no build); the harness only for what fits them.
            # A candidate whose loop never ends is stopped by time and by an iteration cap far above what any
            # loop ran concretely (a per-thread step cap from the failing run would be too tight: the bug may
            # end threads early).
            bad = None if heavy else _first_misfit(
                spec, repaired, path, dialect, entry, kind, chosen, prog.warp_size,
                time.monotonic() + min(run_seconds, max(0.0, budget.left())), iteration_cap)
            if bad == UNDECIDED:
                # it outran the time the failing run took to interpret (a fix may do far more work than a bug
                # that skipped it): the harness decides, under its screening time limit
                _log.debug("  candidate %s: undecided on the small cases in %.1f s", [(e.old, e.new) for e in edits],
                           run_seconds)
                bad = None
            if bad is not None:
                _log.debug("  candidate %s: misfit on small case %s", [(e.old, e.new) for e in edits], bad)
                continue
            full = screen(repaired, edits)
            if full.passed:
                return accept(sk, model, edits, repaired, full)
            result.false_repairs += 1  # it fit the small examples but not the full cases
        return screen_batch(sk, batch) if batch else None

    def screen(candidate: str, edits: list[SK.Edit], env: dict[str, str] | None = None) -> SpecReport:
        """A candidate on the full cases under the screening time limit."""
        full = run_spec(
            screen_spec, candidate_text=candidate, candidate_dialect=dialect, candidate_entry=entry,
            candidate_kind=kind, warp_size=warp_size, seed=seed, cancel=cancel, candidate_env=env,
            expectations=expectations,
        )
        _log.debug("  candidate %s: %s", [(e.old, e.new) for e in edits], "passes" if full.passed else "fails")
        return full

    # First-round completions of every suspect screened on the harness, built as few programs (completions whose
    # edits do not overlap share one): the build is most of a harness run, a completion's run a fraction of it.
    pooled: dict[str, tuple[str, int]] = {}  # completion's text → (the program holding it, its choice there)
    broken: set[str] = set()  # pooled programs that do not build (a completion they cannot spell)
    # per suspect, the cap its completions were enumerated under and the enumeration (resumed, not redone)
    pool_models: dict[int, tuple[int | None, Iterator[z3.ModelRef]]] = {}

    def pool(todo: Sequence[SK.Sketch]) -> None:
        entries: list[tuple[list[SK.Edit], str]] = []
        seen = {text}
        until = time.monotonic() + POOL_SECONDS
        for sk in todo:
            if time.monotonic() > until:
                break  # the rest are built per suspect
            if not (heavy or id(sk) in host_holes) or sk.kind not in CONCRETE_TRIES:
                continue
            limit = _concrete_limit(sk.kind, 1 if sk.kind == "swap" else CONCRETE_TRIES[sk.kind])
            cap = CAP_FIRST_ROUND if sk.kind in ("affine", "compare") else None
            taken = 0
            enumeration = nearest(sk, cap, limit, False)
            consumed: list[z3.ModelRef] = []
            pool_models[id(sk)] = (cap, itertools.chain(consumed, enumeration))
            for model in enumeration:
                consumed.append(model)
                edits = sk.decode(model)
                repaired = apply_edits(text, edits) if edits else text
                if taken >= limit:
                    break
                if repaired in seen or not edits:
                    continue
                seen.add(repaired)
                taken += 1
                entries.append((edits, repaired))
        for group in _disjoint_groups(entries, POOL_SIZE):
            selector = _selector_text(text, [edits for edits, _ in group], dialect)
            if selector is not None:
                pooled.update({repaired: (selector, k) for k, (_, repaired) in enumerate(group)})

    def screen_batch(sk: SK.Sketch, batch: list[tuple[z3.ModelRef, list[SK.Edit], str]]) -> RepairResult | None:
        """Completions of one sketch built once, as one program that takes the completion to run from its
        environment (one build instead of one per completion: the build is most of a harness run) — the pooled
        program that holds them when there is one —, each run on the full cases nearest first; the one that
        passes is checked again as the plain text it stands for."""
        own = _selector_text(text, [edits for _, edits, _ in batch], dialect)
        for k, (model, edits, repaired) in enumerate(batch):
            if budget.left() <= 0:
                return None
            selector, choice = pooled.get(repaired, (own, k))
            if selector in broken:
                selector, choice = own, k
            if selector is not None:
                chosen_run = screen(selector, edits, {REPAIR_CHOICE_VARIABLE: str(choice)})
                if chosen_run.build_error:
                    broken.add(selector)  # a completion it cannot spell (an lvalue of two types): one by one
                    if selector is own:
                        own = None
                elif not chosen_run.passed:
                    continue
            full = screen(repaired, edits)
            if full.passed:
                return accept(sk, model, edits, repaired, full)
        return None

    def accept(sk: SK.Sketch, model: z3.ModelRef, edits: list[SK.Edit], repaired: str, full: SpecReport) -> RepairResult:
        tidied = [SK.tidy(text, e) for e in edits]
        if tidied != edits and budget.left() > 0:  # the same value, spelled as a person would: checked again
            tidy_text = apply_edits(text, tidied)
            tidy_report = verify(tidy_text)
            if tidy_report.passed:
                edits, repaired, full = tidied, tidy_text, tidy_report
        result.edits = [RepairEdit(e.span, e.old, e.new) for e in edits]
        result.text, result.sketch, result.report = repaired, sk.kind, full
        result.model = sk.describe(model)
        first = result.edits[0]
        return done("repaired", f"`{first.old}` → `{first.new}` ({sk.kind} hole) passes all {len(full.cases)} cases")

    # Sketches whose symbolic encoding was refused, so they are solved by learning from concrete runs of the
    # sampled threads. Wide holes (affine, comparison) learn slowly: in a round they wait until every other
    # suspect has had its turn (``deferred``); finite holes (a constant, a name) learn at once.
    refused: set[int] = set()
    costly: list[SK.Sketch] = []  # sketches whose encoding ran out of time
    deferred: list[SK.Sketch] = []
    presearched: set[int] = set()  # finite sketches whose nearest completions were run concretely

    def attempt(sk: SK.Sketch, cap: int | None, defer: bool = False) -> RepairResult | None:
        if id(sk) not in refused and id(sk) not in presearched:
            result.suspects_tried += 1
        _log.debug("suspect %d: %s hole at %s `%s` (%.1f s left)", result.suspects_tried, sk.kind, sk.site.path,
                   src.of(sk.site.node)[:60], budget.left())
        if sk.kind == "swap":
            return search_concretely(sk, None, 1)  # one candidate: running it is cheaper than encoding it
        if heavy or id(sk) in host_holes:
            # the nearest completions on the harness (the affine/comparison ones within the round's cap)
            tries = CONCRETE_TRIES.get(sk.kind, 0)
            return search_concretely(sk, cap, tries) if tries else None
        if interacting and sk.kind in ("rename", "const") and id(sk) not in presearched:
            # Threads interact: an encoding runs every thread symbolically (seconds, often refused), a
            # concrete run of the nearest completions costs a fraction of that. Constants still get their
            # encoding, once the round's other suspects had their turn (a far value, such as a halved
            # stride, needs the solver).
            presearched.add(id(sk))
            got = search_concretely(sk, None, CONCRETE_TRIES[sk.kind])
            if got is not None or sk.kind == "rename":
                return got
            if defer:
                deferred.append(sk)
                return None
        # Counterexample-guided: encode the smallest failing example, add another only when a model
        # fits the encoded ones but not it (cheaper than encoding every example for every suspect).
        deadline = time.monotonic() + min(SKETCH_SECONDS, budget.left())
        caps_hit: list[int] = []
        learn = False  # constraints learned from concrete runs of the sampled threads (see _learned_clauses)
        try:
            if id(sk) in refused:
                raise Unsupported("refused before")
            constraints = _encode(spec, prog, owner[id(sk)], entry, kind, sk, chosen[:1], deadline, samples,
                                  caps_hit=caps_hit)
        except (Unsupported, StepLimit) as exc:
            _log.debug("  not encoded: %s: %s", type(exc).__name__, exc)
            if isinstance(exc, TimeLimit):
                costly.append(sk)
            if samples.get(0) is None:
                # Interacting threads: no sample to learn from. Finite holes (a name, a constant) are searched
                # concretely, nearest first; the wide affine/comparison spaces would cost a run per model.
                tries = CONCRETE_TRIES.get(sk.kind, 0) if cap is not None or sk.kind not in ("affine", "compare") else 0
                return search_concretely(sk, cap, tries) if tries else None
            refused.add(id(sk))
            if defer and sk.kind in ("affine", "compare"):
                deferred.append(sk)
                return None
            learn, constraints = True, []
        except (Infeasible, z3.Z3Exception, RecursionError) as exc:
            _log.debug("  not encoded: %s: %s", type(exc).__name__, exc)
            return None
        capped_loop = any(hits > 0 for hits in caps_hit)
        if constraints is None or not learn and capped_loop and not _satisfiable(sk, constraints, budget):
            # a loop the hole controls was cut at its cap (the failing run, which a bug may cut short, sets
            # it): the fix may lie past the cap, so the nearest completions are run instead
            _log.debug("  no hole value fits%s", " within the loop cap" if capped_loop else "")
            if capped_loop and cap is not None and sk.kind in CONCRETE_TRIES:
                return search_concretely(sk, cap, CONCRETE_TRIES[sk.kind])
            return None
        encoded = 1
        exact: set[int] = set()  # examples encoded with every thread (after a sampled encoding misled)
        opt = z3.Optimize()
        opt.set("timeout", int(max(0.5, min(SOLVER_SECONDS, budget.left())) * 1000))
        opt.add(*sk.constraints, *constraints)
        if cap is not None:
            opt.add(sk.objective <= cap)
        opt.minimize(sk.objective)
        tries, rounds = 0, 0
        learn_on = [0]
        histories: dict[int, dict[int, tuple[str, set[str]]]] = {}
        learn_deadline = time.monotonic() + min(LEARN_SECONDS, max(0.0, budget.left()))
        while tries < 4:  # a few models per sketch: examples or the full cases may reject one
            if budget.left() <= 0 or opt.check() != z3.sat:
                _log.debug("  no (further) model")
                break
            model = opt.model()
            if learn:
                rounds += 1
                clauses: list[Any] | None = []
                for k in learn_on:
                    more_clauses = _learned_clauses(
                        spec, prog, owner[id(sk)], entry, kind, sk, model, chosen[k], samples[k], histories.setdefault(k, {})
                    )
                    if more_clauses is None or clauses is None:
                        clauses = None
                        break
                    clauses += more_clauses
                if clauses is None or rounds > LEARN_ROUNDS or time.monotonic() > learn_deadline:
                    _log.debug("  learning stopped after %d rounds", rounds)
                    break
                if clauses:
                    opt.add(*clauses)
                    continue
            tries += 1
            edits = sk.decode(model)
            if not edits:
                break
            repaired = apply_edits(text, edits)
            if repaired in tried:  # another suspect's search already ran this very text, and it failed
                opt.add(z3.Or([v != model.eval(v, model_completion=True) for v in sk.variables]))
                continue
            bad = _first_misfit(spec, repaired, path, dialect, entry, kind, chosen, prog.warp_size,
                                time.monotonic() + max(0.0, budget.left()))
            bad = 0 if bad == UNDECIDED else bad  # the repair's own budget ran out
            _log.debug("  model %s: misfit on small case %s", [(e.old, e.new) for e in edits], bad)
            if bad is not None:
                if learn:
                    if samples.get(bad) is not None and bad not in learn_on:
                        learn_on.append(bad)  # learn from that example's sampled threads too
                    else:
                        opt.add(z3.Or([v != model.eval(v, model_completion=True) for v in sk.variables]))
                elif bad >= encoded and encoded < len(chosen):
                    try:
                        more = _encode(
                            spec, prog, owner[id(sk)], entry, kind, sk, chosen[encoded:bad + 1], deadline + SKETCH_SECONDS, samples,
                            first=encoded,
                        )
                    except (Unsupported, StepLimit, Infeasible, z3.Z3Exception, RecursionError):
                        break
                    if more is None:
                        break
                    encoded = bad + 1
                    opt.add(*more)
                elif samples.get(bad) is not None and bad not in exact:
                    # The model fits the sampled threads only: encode that example with every thread.
                    exact.add(bad)
                    try:
                        more = _encode(
                            spec, prog, owner[id(sk)], entry, kind, sk, [chosen[bad]], time.monotonic() + SKETCH_SECONDS, {}
                        )
                    except (Unsupported, StepLimit, Infeasible, z3.Z3Exception, RecursionError):
                        break
                    if more is None:
                        break
                    opt.add(*more)
                else:
                    opt.add(z3.Or([v != model.eval(v, model_completion=True) for v in sk.variables]))
                continue
            full = verify(repaired)
            tried.add(repaired)
            if full.passed:
                return accept(sk, model, edits, repaired, full)
            result.false_repairs += 1
            opt.add(z3.Or([v != model.eval(v, model_completion=True) for v in sk.variables]))
        return None

    only_note = f" (run on the harness alone: the interpreter does not model {harness_only})" if harness_only else ""
    capped = [sk for sk in sketches if sk.kind in ("affine", "compare")]
    capped_ids = {id(sk) for sk in capped}
    pool(sketches)
    for cap, round_ in ((CAP_FIRST_ROUND, sketches), (None, capped)):
        deferred.clear()
        for defer, todo in ((True, round_), (False, deferred)):
            queue = list(todo)
            swaps_first = False
            while queue:
                if costly and not swaps_first:
                    # an encoding ran out of its seconds: the examples are costly to run symbolically, and a
                    # swap costs one concrete run, so the swaps left go before the next encoding
                    swaps_first = True
                    queue.sort(key=lambda item: item.kind != "swap")
                sk = queue.pop(0)
                if budget.left() <= 0:
                    return done("unrepaired", f"time budget ({budget_s:.0f} s) spent after {result.suspects_tried} "
                                f"suspects{only_note}")
                got = attempt(sk, cap if id(sk) in capped_ids else None, defer)
                if got is not None:
                    return got
    return done("unrepaired", f"no single-expression repair found among {result.suspects_tried} suspects{only_note}")


def _concrete_limit(kind: str, limit: int) -> int:
    """Completions of a hole run concretely: a constant runs its plausible values (``_plausible_values``)."""
    return MAX_PLAUSIBLE_VALUES if kind == "const" else limit


def _plausible_values(sk: SK.Sketch, text: str, cases: Sequence[dict[str, Any]]) -> list[int]:
    """Values to run for a constant, most plausible first: one off, twice and half (a stride, a block size, a
    byte count), the nearest powers of two, then the sizes of the failing cases and the other integer literals
    of the file (an extent mixed up with another), nearest first."""
    old = sk.site.node.int_value if isinstance(sk.site.node, A.Literal) else None
    if old is None:
        return []
    near = [old - 1, old + 1, old * 2, *([old // 2] if old % 2 == 0 else [])]
    if old > 0:
        below = 1 << (old.bit_length() - 1)
        near += [below if below != old else below // 2, below * 2]
    sizes = {int(v) for case in cases for v in case.values() if isinstance(v, int)}
    literals = {int(m) for m in re.findall(r"(?<![\w.])(\d+)(?![\w.])", text)}
    others = sorted((sizes | literals) - {old}, key=lambda v: abs(v - old))
    return [v for v in dict.fromkeys([*near, *others]) if v >= 0 and v != old][:MAX_PLAUSIBLE_VALUES]


def _satisfiable(sk: SK.Sketch, constraints: list[Any], budget: _Budget) -> bool:
    solver = z3.Solver()
    solver.set("timeout", int(max(0.5, min(SOLVER_SECONDS, budget.left())) * 1000))
    solver.add(*sk.constraints, *constraints)
    return solver.check() != z3.unsat


def _run(spec: KernelSpec, prog: Program, entry: str, kind: str, ex: EX.Example) -> dict[str, Buffer]:
    prog.steps = 0
    prog.obligations = []
    if ex.host_run is not None:
        return TR.replay(prog, ex.host_run, EX.stored_args(spec, ex.inputs))
    return run_kernel(prog, entry, EX.stored_args(spec, ex.inputs), ex.shape, kind)


def _choose_examples(
    spec: KernelSpec, prog: Program, entry: str, kind: str, seed: int, budget: _Budget,
    samples: dict[int, ThreadSample] | None = None,
    record_example: Callable[[EX.Example], None] | None = None,
) -> tuple[list[EX.Example], set[int], set[str], set[int]]:
    """The smallest case that shows the failure, plus one larger case (so coefficients generalize).

    ``samples`` (when given) receives the thread sample of each chosen example (see ``ThreadSample``).
    Returns the examples, the statements that wrote bad elements, the outputs with bad elements nobody
    wrote, and the statements that faulted (an out-of-bounds access ended the run)."""
    prog.instrument = True
    chosen: list[EX.Example] = []
    writers: set[int] = set()
    missing: set[str] = set()
    faults: set[int] = set()
    passed: dict[Any, int] = {}
    total = 0
    try:
        for i, case in enumerate(EX.tiny_cases(spec, MAX_EXAMPLE_THREADS)):
            if budget.left() <= 0 or len(chosen) >= 2:
                break
            try:
                ex = EX.make_example(spec, case, i, seed)
            except EX.ReferenceFailed:
                continue
            if total + ex.threads > 2 * MAX_EXAMPLE_THREADS:
                continue
            if record_example is not None:
                record_example(ex)
            # Cases of one launch shape whose sizes also compare alike (which is larger) count as one situation.
            names = sorted(case)
            order = tuple((case[a] > case[b]) - (case[a] < case[b]) for i, a in enumerate(names) for b in names[i + 1:])
            launch = (ex.shape.grid, ex.shape.block, order)
            if not chosen and passed.get(launch, 0) >= PASSING_PER_LAUNCH:
                continue  # sizes this launch already ran right: look for the failure in a larger launch
            started = time.monotonic()
            try:
                buffers = _run_sampling(spec, prog, entry, kind, ex, len(chosen), samples)
                ok, w, m = _outputs_match(spec, ex, buffers)
            except Infeasible:
                ok, w, m = False, set(), set()
                faults |= {prog.last_stmt} if prog.last_stmt else set()
            except StepLimit:
                # the candidate does not finish: the loop that ran longest is where the failure is; the
                # iterations it ran are no measure of how long a repaired one may run
                hot = prog.hot_loop
                if hot is None or hot not in prog.loop_stmts:
                    raise
                ok, w, m = False, set(), set()
                faults.add(prog.loop_stmts[hot])
                prog.loop_iters.pop(hot, None)
                ex.ran_out = True
            ex.seconds = time.monotonic() - started
            if not ok:
                chosen.append(ex)
                writers |= w
                missing |= m
                total += ex.threads
            elif chosen and len(chosen) < 2:
                chosen.append(ex)  # a passing larger case still constrains the hole
                total += ex.threads
            else:
                passed[launch] = passed.get(launch, 0) + 1
    finally:
        prog.instrument = False
    if samples is not None:
        for i in [k for k in samples if k >= len(chosen)]:
            del samples[i]
    return chosen, writers, missing, faults


def _run_sampling(
    spec: KernelSpec, prog: Program, entry: str, kind: str, ex: EX.Example, index: int,
    samples: dict[int, ThreadSample] | None,
) -> dict[str, Buffer]:
    """A concrete run; with ``samples``, outputs are logged first so the run also yields a thread sample."""
    samples_wanted = samples is not None and ex.threads >= MIN_THREADS_TO_SAMPLE and len(ex.expected) == 1
    if not samples_wanted:
        return _run(spec, prog, entry, kind, ex)
    assert samples is not None
    samples.pop(index, None)
    (name,) = ex.expected
    prog.observe = frozenset(ex.expected)
    prog.faulted = set()
    try:
        buffers = _run(spec, prog, entry, kind, ex)
    except ObservedRead:
        return _run(spec, prog, entry, kind, ex)
    finally:
        prog.observe = frozenset()
        faulted, prog.faulted = prog.faulted, None
    buf = buffers[name]
    samples[index] = _sample_from_log(spec, ex, buf, faulted)
    if faulted or OB.replay(buf) is None:
        return _run(spec, prog, entry, kind, ex)  # a thread faulted: rerun plainly for its localization
    return buffers


def _rank_sketches(
    fs: FunctionSites, prog: Program, src: SK.SourceText, writers: set[int], missing: set[str],
    faults: set[int] | None = None, interacting: bool = False, on_harness: bool = False,
) -> list[SK.Sketch]:
    levels: dict[Any, int] = {}
    implicated, n_direct = implicated_statements(fs, writers, missing, faults or set(), levels)
    # Bucket 0: writers of bad elements, the statements that fed them through memory, their guards and
    # loops; bucket 1: declarations they read; bucket 2: the rest. Inside a bucket cheap holes go first, and
    # among holes of one kind those nearest (in data-flow steps) to the statements that wrote bad elements.
    # When threads interact (shared memory, atomics) there is no thread sample, so a swap costs one concrete
    # run while any encoded hole runs every thread symbolically: swaps go first there.
    rank = {p: (0 if i < n_direct else 1) for i, p in enumerate(implicated)}
    out: list[tuple[tuple[int, ...], SK.Sketch]] = []
    kind_order = {"compare": 0, "const": 1, "swap": -1 if interacting else 2, "loop": 3, "affine": 4}

    def loop_head(site: Site) -> bool:
        """Holes in loop conditions make the whole loop hole-dependent: the costliest to encode, so they go
        later (on the harness a completion costs one run wherever its hole is)."""
        return not on_harness and bool(site.stmt) and isinstance(get_at(fs.fn, site.stmt), (A.For, A.While))

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
        in_loop_head = loop_head(site)
        for sk in made:
            # (Where threads interact a swap or a name is run concretely: a loop header costs it nothing extra.)
            order = kind_order["loop"] if in_loop_head and not (interacting and sk.kind == "swap") else kind_order[sk.kind]
            # A comparison hole also covers its right operand and operator: try it before its operands.
            out.append(((stmt_rank, order, 0, levels.get(site.stmt, 0), 0 if sk.kind == "compare" else size), sk))
    for site in iter_int_sites(fs):
        if site.node.span is None:
            continue
        stmt_rank = rank.get(site.stmt, 2)
        size = sum(1 for _ in A.walk(site.node))
        if size > 40:
            continue
        if isinstance(site.node, A.Literal):
            # Within an order: literal constants (few), then renames, then affine holes of names. A literal
            # that initializes a declaration the implicated statements read (``int stride = 48;``, read by a
            # guard and an index) is one cheap hole that changes all of them: it goes with the implicated
            # statements' own constants, after them (farther in data-flow steps), before their renames.
            literal_rank = 0 if stmt_rank == 1 else stmt_rank
            out.append(((literal_rank, kind_order["const"], 0, levels.get(site.stmt, 0), size), SK.const_sketch(site)))
        else:
            renamed = SK.rename_sketch(site, fs, prog.macros) if isinstance(site.node, A.Name) else None
            in_loop_head = loop_head(site)
            if renamed is not None:  # a one-unknown hole: before the affine hole of the same name
                order = kind_order["loop"] if in_loop_head and not interacting else kind_order["const"]
                out.append(((stmt_rank, order, 1, levels.get(site.stmt, 0), size), renamed))
            order = kind_order["loop"] if in_loop_head else (kind_order["affine"] if size > 2 else kind_order["const"])
            out.append(((stmt_rank, order, 2, levels.get(site.stmt, 0), size), SK.affine_sketch(site, fs, prog.macros, src)))
    out.sort(key=lambda t: t[0])
    return [sk for _, sk in out]


def _encode(
    spec: KernelSpec, prog: Program, fn: A.Function, entry: str, kind: str, sk: SK.Sketch, chosen: list[EX.Example],
    deadline: float | None = None, samples: dict[int, ThreadSample] | None = None, first: int = 0,
    caps_hit: list[int] | None = None,
) -> list[Any] | None:
    """The constraints under which the holed function gives every example's expected outputs (None: no hole
    value can). ``caps_hit`` receives how often a hole-controlled loop was cut at its cap."""
    holed, evaluators = SK.install(fn, sk)
    sprog = Program(prog.module, {**prog.functions, fn.name: holed}, prog.macros, evaluators,
                    global_decls=prog.global_decls)
    sprog.bounds = sk.bounds
    sprog.deadline = deadline
    sprog.warp_size = prog.warp_size
    sprog.loop_iters = prog.loop_iters  # loops the hole controls may run as long as they did concretely
    # A hole can turn a finite loop into an endless one (a bound never reached): stop a thread that runs
    # far longer than the longest thread of the concrete runs.
    sprog.thread_step_cap = max(THREAD_STEPS_MIN, THREAD_STEPS_FACTOR * prog.thread_steps_seen)
    constraints: list[Any] = []
    for i, ex in enumerate(chosen, start=first):
        sample = (samples or {}).get(i)
        if sample is not None:
            sprog.observe, sprog.threads = frozenset(ex.expected), sample.threads
            try:
                buffers = _run(spec, sprog, entry, kind, ex)
                cs = _sampled_constraints(spec, ex, buffers, sample)
            except (ObservedRead, OB.TooSymbolic):
                cs = None
                sample = None
            finally:
                sprog.threads = None
            if sample is not None:
                if cs is None:
                    return None
                constraints += cs + sprog.obligations
                continue
        # Outputs are observed (stores logged, see observe.py) unless the kernel reads them back.
        sprog.observe = frozenset(ex.expected)
        try:
            buffers = _run(spec, sprog, entry, kind, ex)
            cs = _observed_constraints(spec, ex, buffers)
        except (ObservedRead, OB.TooSymbolic):
            sprog.observe = frozenset()
            buffers = _run(spec, sprog, entry, kind, ex)
            cs = _output_constraints(spec, ex, buffers)
        if caps_hit is not None:
            caps_hit.append(sprog.loop_caps_hit)
        if cs is None:
            return None
        constraints += cs + sprog.obligations
    return constraints


@dataclass
class ThreadSample:
    """Threads of one example that stand for all of them (kernels whose threads do not interact).

    From a concrete run of the candidate: threads that stored only reference values (``good``), stored a
    wrong value or out of bounds (``bad``), or stored nothing (``silent``); ``missing`` are positions that
    need a value nobody stored correctly."""

    threads: frozenset[int]
    good: frozenset[int]
    missing: tuple[int, ...]
    output: str


SAMPLE_GOOD = 16
SAMPLE_BAD = 12
SAMPLE_SILENT = 12
MIN_THREADS_TO_SAMPLE = 128


def _reachable(prog: Program, entry: A.Function) -> list[A.Function]:
    """The functions ``entry`` launches or calls (directly or through one another), in the order first met,
    then ``entry`` itself."""
    seen = [entry.name]
    stack = [entry]
    while stack:
        f = stack.pop(0)
        for n in A.walk(f.body):
            name = n.kernel.id if isinstance(n, A.Launch) and isinstance(n.kernel, A.Name) else (
                n.callee if isinstance(n, A.Call) else None)
            if name and name in prog.functions and name not in seen:
                seen.append(name)
                stack.append(prog.functions[name])
    return [prog.functions[n] for n in seen[1:]] + [entry]


def _independent(prog: Program) -> bool:
    """No shared memory, barriers, atomics or warp operations: each thread's stores depend on itself only."""
    for f in prog.functions.values():
        for n in A.walk(f):
            if isinstance(n, A.VarDecl) and n.is_shared:
                return False
            if isinstance(n, A.Call) and n.callee and (
                A.is_barrier(n) or n.callee.startswith(("atomic", "__shfl", "__sync", "__ballot", "__any", "__all",
                                                        "__activemask", "__match", "__reduce"))
            ):
                return False
            if isinstance(n, A.Opaque):
                return False
    return True


def _spread(items: list[int], k: int) -> list[int]:
    if len(items) <= k:
        return items
    return [items[round(j * (len(items) - 1) / (k - 1))] for j in range(k)]


def _sample_from_log(spec: KernelSpec, ex: EX.Example, buf: Buffer, faulted: set[int]) -> ThreadSample:
    assert buf.events is not None
    name = buf.name
    atol, rtol = EX.tolerance(spec, name)
    exp = EX.expected_flat(spec, ex, name)
    n = len(exp)
    bad: set[int] = set(faulted)
    stored: set[int] = set()
    right: set[int] = set()
    for _, off, value, tid in buf.events:
        stored.add(tid)
        if isinstance(off, int) and 0 <= off < n and EX.close(value, exp[off], atol, rtol):
            right.add(off)
        else:
            bad.add(tid)
    good = sorted(stored - bad)
    silent = sorted(set(range(ex.threads)) - stored - bad)
    missing = tuple(p for p in range(n) if p not in right and not EX.close(buf.data[p], exp[p], atol, rtol))
    threads = set(_spread(sorted(bad), SAMPLE_BAD)) | set(_spread(good, SAMPLE_GOOD))
    threads |= set(_spread(silent, SAMPLE_SILENT if missing else 4))
    return ThreadSample(frozenset(threads), frozenset(good) & frozenset(threads), missing, name)


def _sampled_constraints(
    spec: KernelSpec, ex: EX.Example, buffers: dict[str, Buffer], sample: ThreadSample
) -> list[Any] | None:
    """The sampled threads store reference values; threads that were right keep storing; some missing
    position gets a store."""
    buf = buffers[sample.output]
    assert buf.events is not None
    atol, rtol = EX.tolerance(spec, sample.output)
    exp = EX.expected_flat(spec, ex, sample.output)
    out = OB.store_constraints(buf, exp, atol, rtol, lambda v, e, a=atol, r=rtol: _matches(v, e, a, r, {}), cover=False)
    if out is None:
        return None
    stores: dict[int, Any] = {}
    fill: Any = False
    missing = set(sample.missing)
    for pc, off, _, tid in buf.events:
        stores[tid] = or_(stores.get(tid, False), pc)
        if missing:
            if isinstance(off, int):
                hit: Any = off in missing
            else:
                hit = z3.Or([off == p for p in sample.missing[:64]])
            fill = or_(fill, and_(pc, hit))
    for tid in sample.good:
        keep = stores.get(tid, False)
        if keep is False:
            return None
        if keep is not True:
            out.append(_zb(keep))
    if missing:
        if fill is False:
            return None
        if fill is not True:
            out.append(_zb(fill))
    return out


def _learned_clauses(
    spec: KernelSpec, prog: Program, fn: A.Function, entry: str, kind: str, sk: SK.Sketch, model: z3.ModelRef,
    ex: EX.Example, sample: ThreadSample, history: dict[int, tuple[str, set[str]]],
) -> list[Any] | None:
    """Run the sampled threads concretely with the model's hole; for each thread that goes wrong, a clause
    that its hole evaluations must not all produce the same values again.

    Why: a hole inside a floating-point accumulation (a load index in a reduction loop) makes symbolic
    values multiply; concretely, each run is cheap and a wrong thread rules out every model that gives its
    hole the same values, not just this one. Returns [] when the sampled threads all look right, None when
    a wrong thread never evaluated the hole (no hole value can fix it)."""
    seen: dict[int, list[tuple[Any, Any]]] = {}

    def concrete(ev: Any) -> Any:
        def run(th: Any) -> Any:
            term = ev(th)
            if isinstance(term, (bool, int)):
                return term
            value = model.eval(_zb(term) if isinstance(term, bool) else term, model_completion=True)
            seen.setdefault(th.tid, []).append((term, value))
            if z3.is_int_value(value):
                return value.as_long()
            if z3.is_true(value) or z3.is_false(value):
                return z3.is_true(value)
            raise Unsupported("hole value is neither an integer nor a truth value")
        return run

    holed, evaluators = SK.install(fn, sk)
    cprog = Program(prog.module, {**prog.functions, fn.name: holed}, prog.macros,
                    {i: concrete(ev) for i, ev in evaluators.items()}, global_decls=prog.global_decls)
    cprog.warp_size = prog.warp_size
    cprog.thread_step_cap = max(THREAD_STEPS_MIN, THREAD_STEPS_FACTOR * prog.thread_steps_seen)
    cprog.observe, cprog.threads, cprog.faulted = frozenset(ex.expected), sample.threads, set()
    try:
        buf = _run(spec, cprog, entry, kind, ex)[sample.output]
    except StepLimit:
        # This model makes a thread run far longer than any did concretely (a loop it never ends): rule it
        # out and go on learning.
        return [z3.Or([v != model.eval(v, model_completion=True) for v in sk.variables])]
    except (ObservedRead, Unsupported, z3.Z3Exception) as exc:
        _log.debug("  learning: concrete run failed: %s: %s", type(exc).__name__, exc)
        return None
    assert buf.events is not None
    atol, rtol = EX.tolerance(spec, sample.output)
    exp = EX.expected_flat(spec, ex, sample.output)
    wrong: set[int] = set(cprog.faulted)
    stored: set[int] = set()
    filled = False
    missing = set(sample.missing)
    for _, off, value, tid in buf.events:
        stored.add(tid)
        if not (isinstance(off, int) and 0 <= off < len(exp) and EX.close(value, exp[off], atol, rtol)):
            wrong.add(tid)
        elif off in missing:
            filled = True
    wrong |= {t for t in sample.good if t not in stored}

    def differ(tids: set[int]) -> Any:
        pairs = [(t, v) for tid in sorted(tids) for t, v in seen.get(tid, [])]
        return z3.Or([t != v for t, v in pairs]) if pairs else None

    stores: dict[int, list[str]] = {}
    for _, off, value, tid in buf.events:
        stores.setdefault(tid, []).append(f"{off}:{value}")
    for tid in sorted(wrong):
        # A wrong thread that stores the same values under different hole values: the hole does not reach
        # what is wrong there, so no value of it will fix the thread.
        # (Several distinct hole values, not two: nearby values can agree on a tiny example.)
        holes = str([v for _, v in seen.get(tid, [])])
        outcome = str(stores.get(tid, [])) + str(tid in cprog.faulted)
        old = history.get(tid)
        if old is None or old[0] != outcome:
            history[tid] = (outcome, {holes})
        else:
            old[1].add(holes)
            if len(old[1]) >= SAME_OUTCOME_LIMIT:
                _log.debug("  learning: thread %d stores the same under %d hole values", tid, len(old[1]))
                return None
    clauses: list[Any] = []
    for tid in sorted(wrong):
        c = differ({tid})
        if c is not None:  # a thread wrong without evaluating the hole: the others still teach something
            clauses.append(c)
    if missing and not filled:
        c = differ(set(sample.threads))
        if c is not None:
            clauses.append(c)
    if (wrong or (missing and not filled)) and not clauses:
        _log.debug("  learning: wrong threads that never evaluated the hole")
        return None  # wrong, and not because of the hole: no value of it helps
    return clauses


def _observed_constraints(spec: KernelSpec, ex: EX.Example, buffers: dict[str, Buffer]) -> list[Any] | None:
    out: list[Any] = []
    for name in ex.expected:
        buf = buffers[name]
        atol, rtol = EX.tolerance(spec, name)
        exp = EX.expected_flat(spec, ex, name)
        cs: list[Any] | None = None
        if buf.events is not None and any(not isinstance(off, int) for _, off, _, _ in buf.events):
            cs = OB.store_constraints(buf, exp, atol, rtol, lambda v, e, a=atol, r=rtol: _matches(v, e, a, r, {}))
            if cs is None:
                return None  # the store log shows no hole value can put the reference in place
        elif buf.events is not None:
            cs = OB.replay(buf)  # addresses do not depend on the hole: plain store semantics
            more = _buffer_constraints(buf, exp, atol, rtol) if cs is not None else None
            if cs is None or more is None:
                return None
            cs += more
        else:
            cs = _buffer_constraints(buf, exp, atol, rtol)
            if cs is None:
                return None
        out += cs
    return out


def _buffer_constraints(buf: Buffer, exp: Any, atol: float, rtol: float) -> list[Any] | None:
    out: list[Any] = []
    for v, e in zip(buf.data, exp, strict=False):
        f = _matches(v, float(e), atol, rtol, {})
        if f is False:
            return None
        if f is not True:
            out.append(f)
    return out


def _first_misfit(
    spec: KernelSpec, text: str, path: str, dialect: Dialect, entry: str, kind: str, chosen: list[EX.Example],
    warp_size: int, deadline: float | None = None, iteration_cap: int | None = None,
) -> int | None:
    """Index of the first small example the stitched text (re-lowered, run concretely) gets wrong.

    ``iteration_cap`` (iterations of any one loop): a stitched loop that runs past it is a misfit, not a hang.
    A run past ``deadline`` (``time.monotonic()``) is ``UNDECIDED``."""
    try:
        prog = Program.of(lower_text(text, path, dialect))
        prog.warp_size = warp_size
        prog.deadline = deadline
        prog.iteration_cap = iteration_cap
    except Exception:  # noqa: BLE001 - a stitched text we cannot even lower is simply not a repair
        return 0
    for i, ex in enumerate(chosen):
        try:
            ok, _, _ = _outputs_match(spec, ex, _run(spec, prog, entry, kind, ex))
        except TimeLimit:
            return UNDECIDED
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
