// Finding the Python interpreter that runs the language server. Pure logic over an injected probe, so the
// search order and the messages can be tested without spawning anything.
import { execFile } from 'node:child_process';
import * as path from 'node:path';

/** The module the server runs as (`python -m xpiler_server`). */
export const SERVER_MODULE = 'xpiler_server';

/** The one command that installs the server into an interpreter. */
export function installCommand(python: string): string {
  return `${quoteForShell(python)} -m pip install xpiler`;
}

export type Probe = (python: string) => Promise<ProbeResult>;
export type ProbeResult = { ok: true } | { ok: false; reason: string };

export type Resolution =
  | { ok: true; python: string; tried: string[] }
  | { ok: false; message: string; tried: string[] };

function quoteForShell(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * Interpreters worth trying when the user has not chosen one, best first: a virtual environment in a
 * workspace folder (where `pip install -e .` usually lands), then whatever `python3`/`python` is on PATH.
 */
export function defaultCandidates(workspaceFolders: string[], platform: NodeJS.Platform = process.platform): string[] {
  const inVenv = platform === 'win32' ? ['Scripts', 'python.exe'] : ['bin', 'python'];
  const venvs = workspaceFolders.flatMap((folder) => ['.venv', 'venv'].map((venv) => path.join(folder, venv, ...inVenv)));
  const onPath = platform === 'win32' ? ['python', 'py'] : ['python3', 'python'];
  return [...venvs, ...onPath];
}

/**
 * Chooses the interpreter: the configured one if set (and only it: a user's explicit choice is never
 * silently replaced), else the first candidate that can import the server.
 */
export async function resolveInterpreter(configured: string, candidates: string[], probe: Probe): Promise<Resolution> {
  const chosen = configured.trim();
  if (chosen !== '') {
    const result = await probe(chosen);
    if (result.ok) {
      return { ok: true, python: chosen, tried: [chosen] };
    }
    return {
      ok: false,
      tried: [chosen],
      message:
        `Xpiler: the interpreter set in "xpiler.server.python" (${chosen}) cannot run the server: ${result.reason}. ` +
        `Install it with: ${installCommand(chosen)}`,
    };
  }
  const tried: string[] = [];
  for (const candidate of candidates) {
    tried.push(candidate);
    if ((await probe(candidate)).ok) {
      return { ok: true, python: candidate, tried };
    }
  }
  return {
    ok: false,
    tried,
    message:
      `Xpiler: no Python interpreter with the xpiler package was found (tried ${tried.join(', ')}). ` +
      `Install it with: ${installCommand('python3')} — or set "xpiler.server.python".`,
  };
}

/**
 * The probe's Python code: the server's `__main__` must be findable (what `python -m xpiler_server` runs).
 * find_spec imports the package but does not run `__main__`, so probing never starts a server.
 */
export const PROBE_CODE =
  `import importlib.util, sys\n` +
  `spec = importlib.util.find_spec('${SERVER_MODULE}.__main__')\n` +
  `sys.exit(0 if spec else "No module named '${SERVER_MODULE}.__main__'")`;

/** Probes an interpreter by locating the server module in a child process (in the server's cwd), bounded in time. */
export function importProbe(timeoutMs = 15000, cwd?: string): Probe {
  return (python) =>
    new Promise((resolve) => {
      execFile(python, ['-c', PROBE_CODE], { timeout: timeoutMs, windowsHide: true, cwd }, (error, _stdout, stderr) => {
        if (!error) {
          resolve({ ok: true });
          return;
        }
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') {
          resolve({ ok: false, reason: 'not found' });
        } else if (error.killed) {
          resolve({ ok: false, reason: `no answer within ${timeoutMs / 1000} s` });
        } else {
          const lastLine = String(stderr).trim().split('\n').pop() ?? '';
          resolve({ ok: false, reason: lastLine || `exit status ${String(error.code)}` });
        }
      });
    });
}
