"""Hierarchical auto-tuning, streamed: the public entry points ``tune`` (callback) and ``tune_stream``
(iterator).

Phases, all within one budget of measured trials and seconds:
1. the plan's untuned translation is verified and timed against itself (the reference of every speedup, and
   the noise the machine shows now);
2. intra-pass search of the plan's own parameters: loop binding (OpenMP schedule, threads, collapse, SIMD,
   ISA, the serial threshold), the declared parameters of the plan's other passes, the block size where we
   choose the launch, and the compile flags;
3. MCTS over inserted structural pass sequences, each action's parameters searched in place;
4. the best few are re-timed against the untuned translation, in the same rounds, with more rounds; the
   winner's confidence interval must lie above 1, else the untuned translation stays the answer (1.0x).
Every candidate is compiled (with its flags) and run on all the spec's cases before its time counts. A
candidate replaces the best so far only when it beats it beyond the noise (paired interval, same rounds).
"""

from __future__ import annotations

import os
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.passes import get_pass
from xpiler_core.progress import Cancelled, CancelToken, ProgressFn, report
from xpiler_core.project import ProjectConfig
from xpiler_core.tune.config import Config, Step, freeze
from xpiler_core.tune.cpu_problem import Action, CpuTuningProblem, open_problem
from xpiler_core.tune.load import machine_load
from xpiler_core.tune.mcts import mcts
from xpiler_core.tune.measure import MeasureSettings, clearly_faster, paired_speedup, speedup_interval
from xpiler_core.tune.records import TrialRecord, sha256_text
from xpiler_core.tune.search import search_params

DEFAULT_BUDGET_S = 60.0
DEFAULT_TRIALS = 48
# Moves of the plan search tried first when the budget may not reach them all: parallelism (an OpenMP team on a
# busy or small machine can cost more than the loop), then the knobs that change the code the compiler emits
# for every loop (flags, ISA).
SCALE_SHARE = 0.15  # of the budget, at most, for finding a timing case larger than the spec's test cases
PROBE_SHARE = 0.25  # of the budget, at most, for finding the plan parameters that change the output
FIRST_MOVES = (".threads", ".min_parallel", "flags.", ".isa", ".collapse")


@dataclass
class TuneOptions:
    target: Dialect = Dialect.C
    spec_path: str | None = None
    budget_s: float = DEFAULT_BUDGET_S
    max_trials: int = DEFAULT_TRIALS
    seed: int = 0
    binding_share: float = 0.5  # of the trial budget, for the plan's own parameters (binding, flags, block …)
    max_depth: int = 3
    settings: MeasureSettings = field(default_factory=MeasureSettings)
    project: ProjectConfig | None = None  # -I/-D/--std on top of compile_commands.json / xpiler.toml


@dataclass
class TuneEvent:
    """One progress event. ``kind``: start | trial | best | phase | done."""

    kind: str
    message: str
    trials: int  # trials so far: measured in this run + answered from the records (``resumed``)
    elapsed_s: float
    fraction: float
    config: str | None = None
    verified: bool | None = None
    latency_s: float | None = None
    speedup: float | None = None
    best_config: str | None = None
    best_latency_s: float | None = None
    best_speedup: float | None = None
    baseline_latency_s: float | None = None
    resumed: int = 0
    noise: float | None = None  # half-width of the untuned-vs-itself interval (0.05: ±5 %)
    best_interval: tuple[float, float] | None = None  # confidence interval of the best's paired speedup

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Candidate:
    config: Config
    description: str
    verified: bool
    latency_s: float | None
    speedup: float
    text_sha256: str


@dataclass
class TuneResult:
    source_path: str
    target: Dialect
    baseline_latency_s: float
    best: Candidate
    best_text: str
    candidates: list[Candidate]  # verified ones, fastest first
    trials_measured: int
    trials_resumed: int
    seconds: float
    case: dict[str, int]
    machine: str
    confirmed: bool  # the best beat the untuned translation beyond the noise in the final re-timing
    baseline_text: str = ""
    measured_spec: Any = None  # the KernelSpec whose case was timed (with launch-shape arguments if added)
    case_index: int = 0
    noise: float = 0.0  # half-width of the untuned-vs-itself paired interval at the start (0.05: ±5 %)
    best_interval: tuple[float, float] | None = None  # confidence interval of the best's confirmed speedup
    flags: tuple[str, ...] = ()  # compile flags of the best, beyond the default build
    load_average: float = 0.0  # of the machine when tuning started
    loaded: bool = False  # other tasks held cores around the final re-timing: thread-count wins not crowned
    load: str = ""  # what the load probe saw (other runnable tasks), start and re-timing
    baseline_config: Config | None = None  # the untuned configuration (the plan's own parameters)


class _Budget:
    def __init__(self, problem: CpuTuningProblem, max_trials: int, budget_s: float, cancel: CancelToken | None,
                 clock: Callable[[], float] = time.monotonic, started: float | None = None) -> None:
        self.problem, self.max_trials, self.cancel, self.clock = problem, max_trials, cancel, clock
        self.started = clock() if started is None else started  # the tune call's start: opening counts too
        self.deadline = self.started + budget_s
        self.budget_s = budget_s
        self.trial_seconds: list[float] = []  # measured trials (build, verify, time), for the next one's estimate

    def measured(self, seconds: float) -> None:
        self.trial_seconds.append(seconds)

    def next_trial_s(self) -> float:
        """What the next measured trial may take: the longest of the last five measured (trial times swing
        with what the candidate builds and with the machine's load)."""
        return max(self.trial_seconds[-5:], default=0.0)

    def spent(self) -> int:
        # Trials answered from the records count as spent: a re-run with the same options replays the same
        # search without measuring anything; a larger budget continues where the last run stopped.
        return self.problem.trials_measured + self.problem.trials_resumed

    def exhausted(self) -> bool:
        if self.cancel is not None:
            self.cancel.check()
        # a budget is a budget: no trial starts that would be expected to end past the deadline, keeping about
        # one trial's time for re-timing the finalists (which is slower on a busy machine)
        return self.spent() >= self.max_trials or self.clock() + 2 * self.next_trial_s() >= self.deadline

    def fraction(self) -> float:
        by_trials = self.spent() / max(1, self.max_trials)
        by_time = (self.clock() - self.started) / max(1e-6, self.budget_s)
        return min(0.95, max(by_trials, by_time))


def find_spec_for(path: str) -> str | None:
    """A kernel test spec next to ``path`` whose ``source`` is this file."""
    from xpiler_core.verify.spec import spec_beside

    return spec_beside(path)


def tune(
    text: str,
    path: str,
    options: TuneOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    on_event: Callable[[TuneEvent], None] | None = None,
) -> TuneResult:
    """Tune ``text`` for ``options.target``; events go to ``on_event`` as they happen."""
    if options.target is not Dialect.C:
        raise XpilerError(
            f"tuning for {options.target.value} is not measured here: this machine has no "
            f"{options.target.value} device, and xpiler does not claim latencies it cannot measure; tune --to cpu",
            path,
        )
    source = detect_dialect(text, path)
    if source not in (Dialect.CUDA,):
        raise XpilerError(f"tuning for the CPU starts from CUDA source; this file is {source.value}", path)
    from xpiler_core.verify.spec import load_spec

    spec_path = options.spec_path or find_spec_for(path)
    if spec_path is None:
        raise XpilerError("tuning needs a kernel test spec (its cases are the inputs that are timed): pass --spec "
                          "SPEC.toml or put one next to the source", path)
    spec = load_spec(spec_path)
    started = time.monotonic()
    rng = random.Random(options.seed)
    emit = on_event or (lambda event: None)
    problem, tmp = open_problem(text, path, spec, seed=options.seed, settings=options.settings, cancel=cancel,
                                project=options.project)
    try:
        return _run(problem, options, rng, started, emit, progress, cancel)
    finally:
        tmp.cleanup()


def _run(problem: CpuTuningProblem, options: TuneOptions, rng: random.Random, started: float,
         emit: Callable[[TuneEvent], None], progress: ProgressFn | None, cancel: CancelToken | None) -> TuneResult:
    budget = _Budget(problem, options.max_trials, options.budget_s, cancel, started=started)
    best: dict[str, Any] = {"config": problem.baseline, "speedup": 1.0, "latency": None, "interval": None}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0

    def noise() -> float:
        lo, hi = problem.noise
        return round(max(1 - lo, hi - 1, 0.0), 4)

    def event(kind: str, message: str, record: TrialRecord | None = None, config: Config | None = None) -> None:
        fraction = budget.fraction()
        report(progress, fraction, message)
        emit(TuneEvent(
            kind, message, budget.spent(), round(time.monotonic() - started, 3), fraction,
            config=config.describe() if config else None, verified=record.verified if record else None,
            latency_s=record.latency_s if record else None, speedup=record.speedup if record else None,
            best_config=best["config"].describe(), best_latency_s=best["latency"], best_speedup=best["speedup"],
            baseline_latency_s=problem.baseline_stats.median_s if problem.baseline_stats else None,
            resumed=problem.trials_resumed, noise=noise(), best_interval=best["interval"],
        ))

    report(progress, 0.0, "verifying and timing the untuned translation")
    # a test-sized case is scaled up for timing within a share of the budget (what wins at the test size can
    # lose many times over at the sizes the kernel runs at)
    baseline = problem.start(deadline=budget.started + SCALE_SHARE * budget.budget_s)
    best["latency"] = baseline.median_s
    load_start = machine_load()
    scaled = f" (the spec's largest case x{problem.scaled_by}: its test sizes are too small to tune for)" \
        if problem.scaled_by > 1 else ""
    event("start", f"untuned: {baseline.median_s * 1e6:.1f} us on case {problem.spec.cases[problem.case_index]}{scaled} "
                   f"(noise ±{noise() * 100:.0f} %, load average {load:.1f}, {load_start.describe()})")

    def score(config: Config) -> float | None:
        """The candidate's speedup over the untuned translation (0 when it fails). One that does not beat the
        best so far beyond the noise scores no higher than it, so the searches never prefer a noise win."""
        if budget.exhausted():
            return None
        trial_started = time.monotonic()
        record, measured = problem.evaluate(config)
        if measured:
            budget.measured(time.monotonic() - trial_started)
        if record is None:
            return None
        if not (record.verified and record.latency_s):
            event("trial", f"trial {budget.spent()}: failed {config.describe()}", record, config)
            return 0.0
        if problem.beats_incumbent(record):
            problem.promote(config, record)
            interval = record.extra.get("speedup_interval")
            best.update(config=config, speedup=record.speedup, latency=record.latency_s,
                        interval=(float(interval[0]), float(interval[1])) if interval else None)
            event("best", f"best so far {record.speedup:.2f}x: {config.describe()}", record, config)
            return record.speedup
        event("trial", f"trial {budget.spent()}: {record.speedup:.2f}x {config.describe()}", record, config)
        return min(record.speedup, best["speedup"])

    # phase 2: the plan's own parameters (loop binding, other plan passes, block size, compile flags)
    defaults = problem.plan_defaults()
    # probing which parameters change the output renders the translation per choice: a share of the budget
    space = problem.live_plan_space(stop=lambda: budget.exhausted() or budget.fraction() >= PROBE_SHARE,
                                    first=FIRST_MOVES)
    event("phase", f"searching the plan's parameters ({', '.join(space) or 'nothing to tune'})")
    quota = max(1, int(options.max_trials * options.binding_share))
    found = search_params(space, {k: v for k, v in defaults.items() if k in space},
                          lambda p: score(problem.config_for({**defaults, **p})),
                          quota, rng, budget.spent, budget.exhausted, first=FIRST_MOVES)
    base = best["config"] if best["config"] is not problem.baseline else problem.config_for(
        {**defaults, **found.best})

    # phase 3: MCTS over inserted structural sequences on top of that
    class Adapter:
        def actions(self, steps: tuple[Step, ...]) -> list[Action]:
            return sorted(problem.actions(steps, base.plan), key=lambda a: (a.name, a.target))

        def expand(self, steps: tuple[Step, ...], action: Action) -> tuple[Step, float] | None:
            at = Config(steps, base.binding, base.plan, base.flags)
            pass_space = problem.live_space(at, action, stop=budget.exhausted)
            defaults = {k: v for k, v in _defaults(action.name).items() if k in pass_space}

            def point(p: dict[str, Any]) -> float | None:
                step = Step(action.name, freeze({**dict(action.target), **p}))
                return score(Config((*steps, step), base.binding, base.plan, base.flags))

            out = search_params(pass_space, defaults, point, 4, rng, budget.spent, budget.exhausted)
            if out.evaluated == 0:
                return None
            return Step(action.name, freeze({**dict(action.target), **out.best})), normalized(out.score)

        def rollout_step(self, steps: tuple[Step, ...], action: Action) -> Step:
            return Step(action.name, action.target)

        def reward(self, steps: tuple[Step, ...]) -> float:
            return normalized(score(Config(steps, base.binding, base.plan, base.flags)) or 0.0)

    root_record = problem.evaluate(base)[0]
    root_speedup = root_record.speedup if root_record and root_record.verified and root_record.speedup > 0 else 1.0

    def normalized(speedup: float) -> float:
        """UCT wants bounded rewards: speedup relative to the root sequence, clipped to [0, 2], halved."""
        return min(2.0, speedup / root_speedup) / 2

    if not budget.exhausted():
        event("phase", "searching pass sequences (MCTS)")
        mcts(Adapter(), 0.5, rng, budget.exhausted, max_depth=options.max_depth,
             priority=lambda action: get_pass(action.name).INFO.search_priority)

    # phase 4: confirm the finalists against the untuned translation, all in the same rounds
    report(progress, 0.96, "re-timing the best candidates")
    verified = _verified_candidates(problem)
    finalists = [best["config"]] if best["config"] is not problem.baseline else []
    finalists += [c.config for c in verified if c.config not in finalists][: 3 - len(finalists)]
    winner: Candidate | None = None
    interval: tuple[float, float] | None = None
    confirm_baseline_s: float | None = None  # the untuned latency timed in the winner's own rounds
    load_confirm = machine_load()
    if load_confirm.busy and time.monotonic() + 1.0 < budget.deadline:
        # re-measure after a pause rather than time against a neighbour (when the budget has the second)
        event("phase", f"the machine is busy ({load_confirm.describe()}): waiting a second before re-timing")
        time.sleep(1.0)
        load_confirm = machine_load()
    loaded = False
    if finalists:
        results = problem.confirm(finalists)
        load_after = machine_load()
        loaded = load_confirm.busy or load_after.busy
        ranked = sorted(results, key=lambda r: -paired_speedup(r[1], r[2]))
        for config, base_stats, cand in ranked:
            if loaded and changes_parallelism(config, problem.baseline):
                event("phase", f"not crowned while the machine is busy ({load_after.describe()}): "
                               f"{config.describe_changes(problem.baseline)}")
                continue
            if clearly_faster(base_stats, cand, margin=0.0):
                text = problem.render(config) or ""
                winner = Candidate(config, config.describe(), True, cand.median_s,
                                   paired_speedup(base_stats, cand), sha256_text(text))
                interval = speedup_interval(base_stats, cand)
                confirm_baseline_s = base_stats.median_s
                break
    confirmed = winner is not None
    # untuned and tuned latencies are reported from the same rounds, so their ratio is the paired speedup's
    # neighbour rather than a comparison across minutes of changing machine load
    if confirm_baseline_s is not None:
        baseline_latency = confirm_baseline_s
    else:
        baseline_latency = problem.baseline_stats.median_s if problem.baseline_stats else float("nan")
    if winner is None:
        winner = Candidate(problem.baseline, problem.baseline.describe(), True, baseline_latency, 1.0,
                           sha256_text(problem.baseline_text))
    best.update(config=winner.config, speedup=winner.speedup, latency=winner.latency_s)
    best_text = problem.render(winner.config) or problem.baseline_text
    winner_record = problem.records.get(winner.text_sha256) or TrialRecord(
        winner.config.as_dict(), winner.text_sha256, True, winner.latency_s, baseline_latency, 1.0)
    if confirmed:
        winner_record.speedup, winner_record.latency_s = winner.speedup, winner.latency_s
    problem.records.put_best(winner_record)
    result = TuneResult(
        source_path=problem.path, target=Dialect.C, baseline_latency_s=baseline_latency, best=winner,
        best_text=best_text, candidates=verified, trials_measured=problem.trials_measured,
        trials_resumed=problem.trials_resumed, seconds=time.monotonic() - started,
        case=dict(problem.spec.cases[problem.case_index]), machine=problem.records.machine, confirmed=confirmed,
        baseline_text=problem.baseline_text, measured_spec=problem.spec, case_index=problem.case_index,
        noise=noise(), best_interval=interval, flags=winner.config.flags, load_average=load,
        baseline_config=problem.baseline, loaded=loaded,
        load=f"start: {load_start.describe()}; re-timing: {load_confirm.describe()}",
    )
    shown = f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""
    event("done", f"best {winner.speedup:.2f}x{shown} ({'confirmed' if confirmed else 'untuned kept'}): "
                  f"{winner.description}")
    report(progress, 1.0, "done")
    return result


# loop-binding parameters that decide how many cores a candidate uses: a comparison of them on a busy machine
# measures the neighbour
PARALLEL_KNOBS = ("threads", "min_parallel", "collapse", "schedule")


def changes_parallelism(config: Config, base: Config) -> bool:
    before, after = dict(base.binding), dict(config.binding)
    return any(before.get(k) != after.get(k) for k in PARALLEL_KNOBS)


def _defaults(name: str) -> dict[str, Any]:
    from xpiler_core.passes import get_pass

    return get_pass(name).INFO.defaults()


def _verified_candidates(problem: CpuTuningProblem) -> list[Candidate]:
    seen = problem.seen_trials()
    out = [Candidate(Config.from_dict(r.config), Config.from_dict(r.config).describe(), True, r.latency_s, r.speedup,
                     r.text_sha256) for r in seen if r.verified and r.latency_s]
    return sorted(out, key=lambda c: -c.speedup)


def reproduce(text: str, path: str, spec_path: str, config: Config) -> str | None:
    """The candidate text of ``config`` rebuilt from scratch (compare its sha256 with the record's)."""
    from xpiler_core.verify.spec import load_spec

    problem, tmp = open_problem(text, path, load_spec(spec_path))
    try:
        return problem.render(config)
    finally:
        tmp.cleanup()


def tune_stream(
    text: str, path: str, options: TuneOptions, cancel: CancelToken | None = None,
) -> Iterator[TuneEvent | TuneResult]:
    """Iterate over the events of a tuning run, then its :class:`TuneResult`. Closing the iterator early
    cancels the run. Errors of the run (``XpilerError``) are raised from the iterator."""
    token = cancel or CancelToken()
    events: queue.Queue[Any] = queue.Queue()
    done = object()

    def work() -> None:
        try:
            events.put(tune(text, path, options, cancel=token, on_event=events.put))
        except BaseException as exc:  # handed to the consumer, re-raised there
            events.put(exc)
        finally:
            events.put(done)

    thread = threading.Thread(target=work, name="xpiler-tune", daemon=True)
    thread.start()
    try:
        while True:
            item = events.get()
            if item is done:
                return
            if isinstance(item, Cancelled) and token.cancelled:
                raise item
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        token.cancel()
        thread.join(timeout=30)
