// What the status bar says about the server's background work. Two streams feed it: LSP work-done progress
// (translate, verify, tune: begin/report/end per token) and the server's `xpiler/tuningProgress`
// notifications (per kernel: trials, best configuration, speedup). Pure: no vscode import.

export interface WorkDoneBegin { kind: 'begin'; title: string; message?: string; percentage?: number; cancellable?: boolean }
export interface WorkDoneReport { kind: 'report'; message?: string; percentage?: number; cancellable?: boolean }
export interface WorkDoneEnd { kind: 'end'; message?: string }
export type WorkDoneValue = WorkDoneBegin | WorkDoneReport | WorkDoneEnd;

/**
 * An `xpiler/tuningProgress` notification: the server's job snapshot (jobId, kind, uri, title, state,
 * percentage, message, elapsed, live). `live` holds what the tuner measured so far; its field names are
 * read leniently (trials/trial, budget, speedup/best_speedup, best_latency_ms, best_config/config).
 */
export interface TuningProgress {
  jobId?: string | number;
  uri?: string;
  title?: string;
  state?: string;
  percentage?: number;
  message?: string;
  error?: string | null;
  live?: Record<string, unknown> | null;
}

/** What the status bar shows of one tuning job. */
export interface TuningView {
  title: string;
  percentage?: number;
  message?: string;
  trials?: number;
  budget?: number;
  speedup?: number;
  bestLatencyMs?: number;
  bestConfig?: unknown;
  finished: boolean;
  state: string;
}

const FINISHED_STATES = new Set(['done', 'failed', 'cancelled']);

function num(...values: unknown[]): number | undefined {
  return values.find((v): v is number => typeof v === 'number' && Number.isFinite(v));
}

export function tuningView(update: TuningProgress): TuningView {
  const live = update.live && typeof update.live === 'object' ? update.live : {};
  const state = typeof update.state === 'string' ? update.state : 'running';
  return {
    title: typeof update.title === 'string' && update.title !== '' ? update.title : 'Tune',
    percentage: num(update.percentage),
    message: typeof update.message === 'string' && update.message !== '' ? update.message : undefined,
    trials: num(live.trials, live.trial),
    budget: num(live.budget, live.max_trials),
    speedup: num(live.speedup, live.best_speedup),
    bestLatencyMs: num(live.best_latency_ms, live.latency_ms),
    bestConfig: live.best_config ?? live.config,
    finished: FINISHED_STATES.has(state),
    state,
  };
}

interface Job { title: string; message?: string; percentage?: number; cancellable: boolean }

/** What the server sends when a job ends (xpiler/jobFinished). */
export interface JobFinished { kind?: string; title?: string; state?: string; message?: string; error?: string | null; stale?: boolean }

/** The verdict of the last translation or verification, shown while nothing runs. */
interface LastResult { title: string; verdict: string; ok: boolean }

const VERDICT_JOBS = new Set(['translate', 'verify']);

export interface StatusView {
  text: string;
  tooltip: string;
  /** True while some job can be cancelled (clicking the item then cancels). */
  busy: boolean;
}

const IDLE_ICON = '$(circuit-board)';
const BUSY_ICON = '$(sync~spin)';
const TUNE_ICON = '$(pulse)';

export class JobBoard {
  private readonly jobs = new Map<string, Job>();
  private readonly tuning = new Map<string, TuningView>();
  private serverState = 'starting';
  private last: LastResult | undefined;

  /** Records a finished job: a translation's or verification's verdict stays in the item until the next one. */
  finished(job: JobFinished): void {
    if (!VERDICT_JOBS.has(job.kind ?? '') || job.stale) return;
    const title = job.title ?? job.kind ?? 'job';
    if (job.state !== 'done' || job.error) {
      this.last = { title, verdict: job.state === 'cancelled' ? 'cancelled' : 'failed', ok: false };
      return;
    }
    // the server's message starts with the status: "verified: …", "FAILED: …", "compiled-not-executed: …"
    const verdict = (job.message ?? '').split(':')[0].trim() || 'done';
    this.last = { title, verdict, ok: verdict === 'verified' };
  }

  setServerState(state: string): void {
    this.serverState = state;
  }

  /** Applies one work-done progress value; returns false when it is not for a known token and not a begin. */
  progress(token: string | number, value: WorkDoneValue): boolean {
    const key = String(token);
    if (value.kind === 'begin') {
      this.jobs.set(key, { title: value.title, message: value.message, percentage: value.percentage, cancellable: value.cancellable === true });
      return true;
    }
    const job = this.jobs.get(key);
    if (job === undefined) {
      return false;
    }
    if (value.kind === 'end') {
      this.jobs.delete(key);
      return true;
    }
    if (value.message !== undefined) job.message = value.message;
    if (typeof value.percentage === 'number') job.percentage = Math.max(0, Math.min(100, value.percentage));
    if (value.cancellable !== undefined) job.cancellable = value.cancellable;
    return true;
  }

  /** Records a tuning update; a finished job stays listed (its result) in the tooltip. */
  tuningUpdate(update: TuningProgress): void {
    const key = String(update.jobId ?? update.uri ?? '');
    this.tuning.set(key, tuningView(update));
  }

  activeTokens(): string[] {
    return [...this.jobs.keys()];
  }

  clear(): void {
    this.jobs.clear();
    this.tuning.clear();
    this.last = undefined;
  }

  view(): StatusView {
    const running = [...this.jobs.values()];
    const liveTuning = [...this.tuning.values()].filter((t) => !t.finished);
    const lines = [`Xpiler server: ${this.serverState}`];
    if (this.last !== undefined) lines.push(`last: ${this.last.title}: ${this.last.verdict}`);
    for (const job of running) lines.push(describeJob(job));
    for (const tune of this.tuning.values()) lines.push(describeTuning(tune));
    const tooltip = lines.join('\n');

    if (running.length > 0) {
      const first = running[0];
      const more = running.length > 1 ? ` (+${running.length - 1})` : '';
      return { text: `${BUSY_ICON} ${shortJob(first)}${more}`, tooltip, busy: running.some((j) => j.cancellable) };
    }
    if (liveTuning.length > 0) {
      return { text: `${TUNE_ICON} ${shortTuning(liveTuning[0])}`, tooltip, busy: false };
    }
    if (this.last !== undefined) {
      const icon = this.last.ok ? '$(pass)' : '$(warning)';
      return { text: `${icon} Xpiler · ${this.last.title}: ${this.last.verdict}`, tooltip, busy: false };
    }
    return { text: `${IDLE_ICON} Xpiler`, tooltip, busy: false };
  }
}

function percent(value: number | undefined): string {
  return value === undefined ? '' : ` ${Math.round(value)}%`;
}

function shortJob(job: Job): string {
  return `${job.title}${percent(job.percentage)}${job.message ? ` · ${job.message}` : ''}`;
}

function describeJob(job: Job): string {
  return `${shortJob(job)}${job.cancellable ? ' (click to cancel)' : ''}`;
}

function shortTuning(t: TuningView): string {
  const progress = t.trials !== undefined ? ` ${t.trials}${t.budget !== undefined ? `/${t.budget}` : ' trials'}` : percent(t.percentage);
  const best = t.speedup !== undefined ? ` · best ${t.speedup.toFixed(2)}×` : '';
  return `${t.title}${progress}${best}`;
}

function describeTuning(t: TuningView): string {
  const latency = t.bestLatencyMs !== undefined ? ` · ${t.bestLatencyMs.toFixed(3)} ms` : '';
  const config = t.bestConfig !== undefined && t.bestConfig !== null ? ` · ${JSON.stringify(t.bestConfig)}` : '';
  const state = t.finished ? ` (${t.state})` : '';
  return `${shortTuning(t)}${latency}${config}${state}${t.message ? ` — ${t.message}` : ''}`;
}
