// Palette and context-menu commands are served by the code actions the server already offers for the
// cursor position, so the client never duplicates the server's argument format. Pure: no vscode import.

export interface ActionLike {
  title: string;
  kind?: { value: string } | string;
  command?: { command: string; arguments?: unknown[] };
  edit?: unknown;
  disabled?: { reason: string };
}

/**
 * One client command (its id is in package.json): either the server's code action with this title and kind
 * at the cursor, or, for commands the server offers no code action for, a server command called with the
 * document URI.
 */
export type ClientAction =
  | { id: string; title: string; kind: string; serverCommand?: undefined }
  | { id: string; title: string; serverCommand: string };

export const CLIENT_ACTIONS: readonly ClientAction[] = [
  { id: 'xpiler.translateToHip', title: 'Translate to HIP', kind: 'source' },
  { id: 'xpiler.translateToCpu', title: 'Translate to CPU', kind: 'source' },
  { id: 'xpiler.translateToCuda', title: 'Translate to CUDA', kind: 'source' },
  { id: 'xpiler.translateToBang', title: 'Translate to BANG C', kind: 'source' },
  { id: 'xpiler.verifyFile', title: 'Verify', serverCommand: 'xpiler.verify' },
  { id: 'xpiler.tuneKernel', title: 'Tune', serverCommand: 'xpiler.tune' },
  { id: 'xpiler.showManifestFile', title: 'Show manifest', serverCommand: 'xpiler.showManifest' },
  { id: 'xpiler.createSpecFile', title: 'Create test spec', serverCommand: 'xpiler.createSpec' },
];

export const RUN_PASS_PREFIX = 'Run pass: ';

function kindOf(action: ActionLike): string {
  return typeof action.kind === 'string' ? action.kind : action.kind?.value ?? '';
}

function kindMatches(action: ActionLike, wanted: string): boolean {
  const kind = kindOf(action);
  return wanted === '' || kind === wanted || kind.startsWith(`${wanted}.`);
}

/**
 * The action a client command stands for: an exact title match first, then a title that starts with the
 * wanted one followed by a separator ("Translate to CPU (C/OpenMP)" for "Translate to CPU"). Disabled
 * actions are skipped.
 */
export function pickAction(actions: readonly ActionLike[], wanted: { title: string; kind: string }): ActionLike | undefined {
  const usable = actions.filter((a) => a.disabled === undefined && kindMatches(a, wanted.kind));
  return (
    usable.find((a) => a.title === wanted.title) ??
    usable.find((a) => a.title.startsWith(`${wanted.title} `) || a.title.startsWith(`${wanted.title}:`) || a.title.startsWith(`${wanted.title}…`))
  );
}

/** The "Run pass: <name>" actions, as quick-pick entries (name → action), sorted by name. */
export function passChoices(actions: readonly ActionLike[]): { label: string; action: ActionLike }[] {
  return actions
    .filter((a) => a.disabled === undefined && a.title.startsWith(RUN_PASS_PREFIX))
    .map((a) => ({ label: a.title.slice(RUN_PASS_PREFIX.length), action: a }))
    .sort((x, y) => x.label.localeCompare(y.label));
}

/** The editor column for a document the server asks to show: where it is already visible, else beside the source. */
export function columnFor(shownIn: number | undefined, sourceColumn: number | undefined): number {
  if (shownIn !== undefined) return shownIn;
  return Math.min((sourceColumn ?? 1) + 1, 9);
}
