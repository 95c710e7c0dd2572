// The Xpiler VS Code extension: starts the Python language server, mirrors its settings, shows its jobs in
// the status bar and opens translated files beside their source. Translation logic lives in the server.
import * as vscode from 'vscode';
import {
  ApplyWorkspaceEditParams,
  ClientCapabilities,
  FeatureState,
  StaticFeature,
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ResponseError,
  ServerOptions,
  State,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageclient/node';
import { ActionLike, CLIENT_ACTIONS, ClientAction, columnFor, passChoices, pickAction } from './actions';
import { installCommand, defaultCandidates, importProbe, resolveInterpreter, SERVER_MODULE } from './interpreter';
import { JobFinished, TuningProgress } from './jobs';
import { ProgressUi } from './progressUi';
import { configurationItem, readServerSettings, ServerSettings } from './settings';

/** Languages the server is attached to: the kernels it translates and the C/C++ it produces. */
export const LANGUAGES = ['cuda-cpp', 'hip', 'bang', 'c', 'cpp'];
const KERNEL_FILES = '**/*.{cu,cuh,hip,mlu}';
const TUNING_NOTIFICATION = 'xpiler/tuningProgress';
const JOB_FINISHED_NOTIFICATION = 'xpiler/jobFinished';

let client: LanguageClient | undefined;
let log: vscode.LogOutputChannel;
let ui: ProgressUi;

function settingsFor(scope?: vscode.Uri): ServerSettings {
  const config = vscode.workspace.getConfiguration('xpiler', scope ?? null);
  return readServerSettings((key) => config.get(key));
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  log = vscode.window.createOutputChannel('Xpiler', { log: true });
  ui = new ProgressUi((token) => client?.sendNotification(WorkDoneProgressCancelNotification.type, { token }));
  context.subscriptions.push(log, ui);

  for (const action of CLIENT_ACTIONS) {
    context.subscriptions.push(vscode.commands.registerCommand(action.id, (uri?: vscode.Uri) => runClientAction(action, uri)));
  }
  context.subscriptions.push(
    vscode.commands.registerCommand('xpiler.runPassPick', (uri?: vscode.Uri) => pickAndRunPass(uri)),
    vscode.commands.registerCommand('xpiler.cancelJobs', () => cancelJobs()),
    vscode.commands.registerCommand('xpiler.restartServer', () => restart()),
    vscode.commands.registerCommand('xpiler.showServerLog', () => log.show(true)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('xpiler.server')) {
        void restart();
      } else if (event.affectsConfiguration('xpiler') && client?.state === State.Running) {
        // Push the whole section; the server also pulls it with workspace/configuration.
        void client.sendNotification(DidChangeConfigurationNotification.type, { settings: { xpiler: settingsFor() } });
      }
    }),
  );
  await start();
}

export async function deactivate(): Promise<void> {
  await stop();
}

async function start(): Promise<void> {
  ui.setServerState('starting');
  const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
  const configured = vscode.workspace.getConfiguration('xpiler').get<string>('server.python', '');
  const resolution = await resolveInterpreter(configured, defaultCandidates(folders), importProbe(15000, folders[0]));
  if (!resolution.ok) {
    log.appendLine(resolution.message);
    ui.setServerState('not started: no interpreter with xpiler');
    void offerInstall(resolution.message, configured.trim() || 'python3');
    return;
  }
  log.appendLine(`Starting the Xpiler server: ${resolution.python} -m ${SERVER_MODULE}`);

  const serverOptions: ServerOptions = {
    command: resolution.python,
    args: ['-m', SERVER_MODULE],
    options: { cwd: folders[0], env: { ...process.env, PYTHONUNBUFFERED: '1' } },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      ...LANGUAGES.map((language) => ({ scheme: 'file', language })),
      { scheme: 'file', pattern: KERNEL_FILES },
    ],
    outputChannel: log,
    initializationOptions: settingsFor(),
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue }),
      // Restart after a crash, but at most 4 times in 3 minutes: a server that cannot start must not loop.
      closed: () => {
        crashes.push(Date.now());
        const recent = crashes.filter((t) => Date.now() - t < 180_000);
        return recent.length <= 4
          ? { action: CloseAction.Restart }
          : { action: CloseAction.DoNotRestart, message: 'The Xpiler server crashed 5 times in 3 minutes; see the Xpiler output. Run "Xpiler: Restart Server" to try again.' };
      },
    },
    middleware: {
      workspace: {
        configuration: async (params, token, next) => {
          const answers: unknown[] = [];
          for (const item of params.items) {
            const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
            const ours = configurationItem(item.section, settingsFor(scope));
            if (ours !== undefined) {
              answers.push(ours);
            } else {
              const theirs = await next({ items: [item] }, token);
              answers.push(theirs instanceof ResponseError ? null : theirs[0]);
            }
          }
          return answers;
        },
        handleApplyEdit: async (params, next) => {
          const result = await next(params, new vscode.CancellationTokenSource().token);
          if (!(result instanceof ResponseError) && result.applied) {
            await saveCreatedFiles(params);
          }
          return result;
        },
      },
      window: {
        showDocument: async (params, _token, next) => {
          if (params.external === true) return next(params, _token);
          return showBeside(params.uri, params.takeFocus === true, params.selection);
        },
      },
    },
  };

  const created = new LanguageClient('xpiler', 'Xpiler', serverOptions, clientOptions);
  created.registerFeature(new JobProgressFeature(created));
  // Kept across crash restarts by the library (handlers are re-attached to each new connection).
  created.onNotification(TUNING_NOTIFICATION, (params: TuningProgress) => ui.onTuning(params ?? {}));
  created.onNotification(JOB_FINISHED_NOTIFICATION, (params: JobFinished) => ui.onJobFinished(params ?? {}));
  client = created;
  created.onDidChangeState((event) => {
    ui.setServerState(event.newState === State.Running ? 'running' : event.newState === State.Starting ? 'starting' : 'stopped');
  });
  try {
    await created.start();
  } catch (error) {
    log.appendLine(`The Xpiler server failed to start: ${String(error)}`);
    ui.setServerState('failed to start');
    void vscode.window.showErrorMessage('Xpiler: the language server failed to start; see the Xpiler output.', 'Show Log').then((choice) => {
      if (choice) log.show(true);
    });
    return;
  }
}

/**
 * Routes the server's work-done progress to the status bar and notifications. A token accepts one listener
 * only, so this replaces the library's own handler (a status-bar spinner). As a feature registered after the
 * built-in ones it is initialized after them on every (re)start, so it stays the handler after a crash
 * restart too.
 */
class JobProgressFeature implements StaticFeature {
  constructor(private readonly client: LanguageClient) {}

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    (capabilities.window ??= {}).workDoneProgress = true;
  }

  initialize(): void {
    this.client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => {
      const listener = this.client.onProgress(WorkDoneProgress.type, token, (value) => {
        ui.onWorkDone(token, value);
        if (value.kind === 'end') listener.dispose();
      });
    });
  }

  getState(): FeatureState {
    return { kind: 'static' };
  }

  clear(): void {
    // Jobs end with the server; the status bar is reset through the client's state change.
  }
}

const crashes: number[] = [];

async function stop(): Promise<void> {
  const running = client;
  client = undefined;
  if (running === undefined) return;
  try {
    await running.dispose(2000);
  } catch (error) {
    log.appendLine(`Stopping the server: ${String(error)}`);
  }
}

async function restart(): Promise<void> {
  log.appendLine('Restarting the Xpiler server.');
  await stop();
  crashes.length = 0;
  await start();
}

async function offerInstall(message: string, python: string): Promise<void> {
  const copy = 'Copy Install Command';
  const choose = 'Set Interpreter…';
  const choice = await vscode.window.showErrorMessage(message, copy, choose);
  if (choice === copy) {
    await vscode.env.clipboard.writeText(installCommand(python));
  } else if (choice === choose) {
    await vscode.commands.executeCommand('workbench.action.openSettings', 'xpiler.server.python');
  }
}

/** A new file the server created through workspace/applyEdit is saved, so it exists on disk as shown. */
async function saveCreatedFiles(params: ApplyWorkspaceEditParams): Promise<void> {
  const createdUris = (params.edit.documentChanges ?? [])
    .filter((change): change is { kind: 'create'; uri: string } => 'kind' in change && change.kind === 'create')
    .map((change) => vscode.Uri.parse(change.uri).toString());
  for (const document of vscode.workspace.textDocuments) {
    if (createdUris.includes(document.uri.toString()) && document.isDirty) {
      await document.save();
    }
  }
}

async function showBeside(uri: string, takeFocus: boolean, selection?: { start: { line: number; character: number }; end: { line: number; character: number } }) {
  try {
    const target = vscode.Uri.parse(uri);
    const shown = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === target.toString());
    const column = columnFor(shown?.viewColumn, vscode.window.activeTextEditor?.viewColumn);
    const document = await vscode.workspace.openTextDocument(target);
    await vscode.window.showTextDocument(document, {
      viewColumn: column,
      preserveFocus: !takeFocus,
      selection: selection
        ? new vscode.Range(selection.start.line, selection.start.character, selection.end.line, selection.end.character)
        : undefined,
    });
    return { success: true };
  } catch (error) {
    log.appendLine(`Could not show ${uri}: ${String(error)}`);
    return { success: false };
  }
}

/** The document and range a command acts on: the context-menu resource, else the active editor. */
async function commandTarget(uri?: vscode.Uri): Promise<{ uri: vscode.Uri; range: vscode.Range } | undefined> {
  const editor = vscode.window.activeTextEditor;
  if (uri === undefined || (editor !== undefined && editor.document.uri.toString() === uri.toString())) {
    if (editor === undefined) {
      void vscode.window.showWarningMessage('Xpiler: open a kernel file first.');
      return undefined;
    }
    return { uri: editor.document.uri, range: editor.selection };
  }
  return { uri, range: new vscode.Range(0, 0, 0, 0) };
}

async function codeActionsAt(uri: vscode.Uri, range: vscode.Range, kind: string): Promise<ActionLike[]> {
  const actions = await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[]>(
    'vscode.executeCodeActionProvider', uri, range, kind === '' ? undefined : kind,
  );
  return (actions ?? []).map((a) =>
    a instanceof vscode.CodeAction
      ? (a as ActionLike)
      : { title: a.title, command: { command: a.command, arguments: a.arguments } },
  );
}

async function runAction(action: ActionLike): Promise<void> {
  const edit = (action as vscode.CodeAction).edit;
  if (edit !== undefined) await vscode.workspace.applyEdit(edit);
  if (action.command !== undefined) {
    await vscode.commands.executeCommand(action.command.command, ...(action.command.arguments ?? []));
  }
}

function serverReady(): boolean {
  if (client?.state === State.Running) return true;
  void vscode.window.showWarningMessage('Xpiler: the language server is not running; see the Xpiler output.', 'Show Log').then((c) => {
    if (c) log.show(true);
  });
  return false;
}

async function runClientAction(wanted: ClientAction, uri?: vscode.Uri): Promise<void> {
  if (!serverReady()) return;
  const target = await commandTarget(uri);
  if (target === undefined) return;
  if (wanted.serverCommand !== undefined) {
    await runServerCommand(wanted.serverCommand, [target.uri.toString()]);
    return;
  }
  const action = pickAction(await codeActionsAt(target.uri, target.range, wanted.kind), wanted);
  if (action !== undefined) {
    await runAction(action);
  } else {
    void vscode.window.showInformationMessage(`Xpiler: "${wanted.title}" is not available for this file.`);
  }
}

async function runServerCommand(command: string, args: unknown[]): Promise<void> {
  try {
    await client?.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
  } catch (error) {
    // The server answers a refused command with a one-line reason (e.g. "tuning not available: …").
    const reason = error instanceof ResponseError ? error.message : String(error);
    void vscode.window.showErrorMessage(`Xpiler: ${reason}`);
  }
}

async function pickAndRunPass(uri?: vscode.Uri): Promise<void> {
  if (!serverReady()) return;
  const target = await commandTarget(uri);
  if (target === undefined) return;
  const choices = passChoices(await codeActionsAt(target.uri, target.range, 'refactor'));
  if (choices.length === 0) {
    void vscode.window.showInformationMessage('Xpiler: no pass applies here; put the cursor inside a kernel.');
    return;
  }
  const choice = await vscode.window.showQuickPick(choices, { placeHolder: 'Run which pass on the kernel under the cursor?' });
  if (choice !== undefined) await runAction(choice.action);
}

async function cancelJobs(): Promise<void> {
  const cancelled = ui.cancelAll();
  if (client?.state === State.Running) {
    // The server's own cancel command also stops jobs started without a progress token.
    try {
      await client.sendRequest(ExecuteCommandRequest.type, { command: 'xpiler.cancel', arguments: [] });
    } catch (error) {
      log.appendLine(`xpiler.cancel: ${String(error)}`);
    }
  }
  log.appendLine(`Cancel requested (${cancelled.length} job(s) with progress).`);
}
