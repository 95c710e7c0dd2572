// The server's configuration as the extension sends it: once as initializationOptions, again on every
// workspace/configuration request for the "xpiler" section, and pushed on change. The keys are exactly the
// server's (see server/config.py), which are also the setting names under "xpiler." in VS Code.
// Pure: no vscode import, so node's test runner can check it.

export type Target = 'hip' | 'cpu' | 'cuda' | 'bang';
export const TARGETS: readonly Target[] = ['hip', 'cpu', 'cuda', 'bang'];
export const TOOLCHAINS = ['nvcc', 'hipcc', 'gcc'] as const;

export interface ServerSettings {
  target: Target;
  hipWarpSize: 32 | 64;
  /** Only the compilers the user set; the server takes the rest from PATH. */
  toolchains: Partial<Record<(typeof TOOLCHAINS)[number], string>>;
  testBudget: { cases?: number; seconds: number };
  llm: { enabled: boolean; endpoint: string; model: string; apiKeyEnv: string };
  tuning: { budgetSeconds: number; trials: number };
  diagnostics: { debounceMs: number };
}

/** Reads one setting below "xpiler." (e.g. "llm.model"); undefined when unset. */
export type SettingReader = (key: string) => unknown;

export const DEFAULT_SETTINGS: ServerSettings = {
  target: 'hip',
  hipWarpSize: 64,
  toolchains: {},
  testBudget: { seconds: 120 },
  llm: { enabled: false, endpoint: '', model: '', apiKeyEnv: 'OPENAI_API_KEY' },
  tuning: { budgetSeconds: 60, trials: 64 },
  diagnostics: { debounceMs: 25 },
};

function text(value: unknown): string {
  return typeof value === 'string' ? value.trim() : '';
}

function positive(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : fallback;
}

function positiveInt(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;
}

/** Builds the settings object from raw user values, replacing anything malformed by its default. */
export function readServerSettings(read: SettingReader): ServerSettings {
  const target = read('target');
  const warp = read('hipWarpSize');
  const toolchains: ServerSettings['toolchains'] = {};
  for (const name of TOOLCHAINS) {
    const value = text(read(`toolchains.${name}`));
    if (value !== '') toolchains[name] = value;
  }
  const cases = positiveInt(read('testBudget.cases'));
  const endpoint = text(read('llm.endpoint'));
  const debounce = read('diagnostics.debounceMs');
  return {
    target: TARGETS.includes(target as Target) ? (target as Target) : DEFAULT_SETTINGS.target,
    hipWarpSize: warp === 32 || warp === 64 ? warp : DEFAULT_SETTINGS.hipWarpSize,
    toolchains,
    testBudget: {
      ...(cases !== undefined ? { cases } : {}),
      seconds: positive(read('testBudget.seconds'), DEFAULT_SETTINGS.testBudget.seconds),
    },
    llm: {
      // An LLM is only ever called when the user both enables it and names an endpoint.
      enabled: read('llm.enabled') === true && endpoint !== '',
      endpoint,
      model: text(read('llm.model')),
      apiKeyEnv: text(read('llm.apiKeyEnv')) || DEFAULT_SETTINGS.llm.apiKeyEnv,
    },
    tuning: {
      budgetSeconds: positive(read('tuning.budgetSeconds'), DEFAULT_SETTINGS.tuning.budgetSeconds),
      trials: positiveInt(read('tuning.trials')) ?? DEFAULT_SETTINGS.tuning.trials,
    },
    diagnostics: {
      debounceMs:
        typeof debounce === 'number' && Number.isInteger(debounce) && debounce >= 0 && debounce <= 5000
          ? debounce
          : DEFAULT_SETTINGS.diagnostics.debounceMs,
    },
  };
}

/**
 * Answers one workspace/configuration item. The server asks for section "xpiler" (the whole object) or a
 * dotted sub-section such as "xpiler.llm"; other sections are not ours and yield undefined, so the caller
 * can hand them to VS Code's default answer.
 */
export function configurationItem(section: string | undefined, settings: ServerSettings): unknown {
  if (section === undefined || section === '' || section === 'xpiler') {
    return settings;
  }
  if (!section.startsWith('xpiler.')) {
    return undefined;
  }
  let node: unknown = settings;
  for (const part of section.slice('xpiler.'.length).split('.')) {
    if (node === null || typeof node !== 'object' || !Object.prototype.hasOwnProperty.call(node, part)) {
      return null;
    }
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}
