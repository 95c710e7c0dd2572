// What the status bar says about the server's background work. Two streams feed it: LSP work-done progress
// (translate, verify, tune: begin/report/end per token) and the server's `xpiler/tuningProgress`
// notifications (per kernel: trials, best configuration, speedup). Pure: no vscode import.

export interface WorkDoneBegin { kind: 'begin'; title: string; message?: string; percentage?: number; cancellable?: boolean }
export interface WorkDoneReport { kind: 'report'; message?: string; percentage?: number; cancellable?: boolean }
export interface WorkDoneEnd { kind: 'end'; message?: string }
export type WorkDoneValue = WorkDoneBegin | WorkDoneReport | WorkDoneEnd;

/** The fields of `xpiler/tuningProgress` the client reads; every one optional, unknown ones ignored. */
export interface TuningProgress {
  uri?: string;
  kernel?: string;
  job?: string | number;
  trials?: number;
  budget?: number;
  best_latency_ms?: number | null;
  baseline_latency_ms?: number | null;
  speedup?: number | null;
  best_config?: Record<string, unknown> | null;
  done?: boolean;
  message?: string;
}

interface Job { title: string; message?: string; percentage?: number; cancellable: boolean }

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
  private readonly tuning = new Map<string, TuningProgress>();
  private serverState = 'starting';

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

  /** Records a tuning update; a finished job stays listed (its result) until the next one for that kernel. */
  tuningUpdate(update: TuningProgress): void {
    const key = `${update.uri ?? ''}#${update.kernel ?? String(update.job ?? '')}`;
    this.tuning.set(key, { ...this.tuning.get(key), ...update });
  }

  activeTokens(): string[] {
    return [...this.jobs.keys()];
  }

  clear(): void {
    this.jobs.clear();
    this.tuning.clear();
  }

  view(): StatusView {
    const running = [...this.jobs.values()];
    const liveTuning = [...this.tuning.values()].filter((t) => t.done !== true);
    const lines = [`Xpiler server: ${this.serverState}`];
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

function speedup(t: TuningProgress): string {
  return typeof t.speedup === 'number' ? ` · best ${t.speedup.toFixed(2)}×` : '';
}

function trials(t: TuningProgress): string {
  if (typeof t.trials !== 'number') return '';
  return typeof t.budget === 'number' ? ` ${t.trials}/${t.budget}` : ` ${t.trials} trials`;
}

function shortTuning(t: TuningProgress): string {
  return `tune ${t.kernel ?? 'kernel'}${trials(t)}${speedup(t)}`;
}

function describeTuning(t: TuningProgress): string {
  const latency = typeof t.best_latency_ms === 'number' ? ` · ${t.best_latency_ms.toFixed(3)} ms` : '';
  const config = t.best_config ? ` · ${JSON.stringify(t.best_config)}` : '';
  const state = t.done === true ? ' (done)' : '';
  return `${shortTuning(t)}${latency}${config}${state}${t.message ? ` — ${t.message}` : ''}`;
}
