// Shows the server's work-done progress: a status bar item (with the tuning stream next to it) and, for
// each job, a notification with a Cancel button that sends window/workDoneProgress/cancel. The client
// replaces vscode-languageclient's own progress handler (which only spins in the status bar) because a
// token accepts only one listener.
import * as vscode from 'vscode';
import { JobBoard, JobFinished, TuningProgress, WorkDoneValue } from './jobs';

export class ProgressUi implements vscode.Disposable {
  readonly board = new JobBoard();
  private readonly item: vscode.StatusBarItem;
  private readonly notifications = new Map<string, { report(value: WorkDoneValue): void; finish(): void }>();

  constructor(private readonly cancelToken: (token: string | number) => void) {
    this.item = vscode.window.createStatusBarItem('xpiler.status', vscode.StatusBarAlignment.Left, 0);
    this.item.name = 'Xpiler';
    this.render();
    this.item.show();
  }

  setServerState(state: string): void {
    this.board.setServerState(state);
    if (state !== 'running') {
      // A stopped server ends every job it was running.
      for (const note of this.notifications.values()) note.finish();
      this.notifications.clear();
      this.board.clear();
    }
    this.render();
  }

  onWorkDone(token: string | number, value: WorkDoneValue): void {
    if (!this.board.progress(token, value)) return;
    const key = String(token);
    if (value.kind === 'begin') {
      this.notifications.set(key, this.openNotification(token, value.title, value.cancellable === true));
    }
    const note = this.notifications.get(key);
    note?.report(value);
    if (value.kind === 'end') {
      note?.finish();
      this.notifications.delete(key);
    }
    this.render();
  }

  onJobFinished(job: JobFinished): void {
    this.board.finished(job);
    this.render();
  }

  onTuning(update: TuningProgress): void {
    this.board.tuningUpdate(update);
    this.render();
  }

  cancelAll(): string[] {
    const tokens = this.board.activeTokens();
    for (const token of tokens) this.cancelToken(token);
    return tokens;
  }

  private openNotification(token: string | number, title: string, cancellable: boolean) {
    let progress: vscode.Progress<{ message?: string; increment?: number }> | undefined;
    let finish: () => void = () => undefined;
    let reported = 0;
    const pending: WorkDoneValue[] = [];
    const report = (value: WorkDoneValue) => {
      if (progress === undefined) {
        pending.push(value);
        return;
      }
      if (value.kind === 'end') return;
      const percentage = typeof value.percentage === 'number' ? Math.max(0, Math.min(100, value.percentage)) : undefined;
      const increment = percentage !== undefined ? Math.max(0, percentage - reported) : undefined;
      if (percentage !== undefined) reported = Math.max(reported, percentage);
      progress.report({ message: value.message, increment });
    };
    const done = new Promise<void>((resolve) => (finish = resolve));
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Xpiler: ${title}`, cancellable },
      async (p, cancellation) => {
        progress = p;
        cancellation.onCancellationRequested(() => this.cancelToken(token));
        for (const value of pending.splice(0)) report(value);
        await done;
      },
    );
    return { report, finish: () => finish() };
  }

  private render(): void {
    const view = this.board.view();
    this.item.text = view.text;
    this.item.tooltip = view.busy ? `${view.tooltip}\n\nClick to cancel.` : view.tooltip;
    this.item.command = view.busy ? 'xpiler.cancelJobs' : 'xpiler.showServerLog';
  }

  dispose(): void {
    for (const note of this.notifications.values()) note.finish();
    this.item.dispose();
  }
}
