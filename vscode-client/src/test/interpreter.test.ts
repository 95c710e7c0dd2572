import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { defaultCandidates, importProbe, installCommand, Probe, PROBE_CODE, resolveInterpreter } from '../interpreter';

const probeAccepting = (good: string[]): Probe => async (python) =>
  good.includes(python) ? { ok: true } : { ok: false, reason: "No module named 'xpiler_server'" };

test('the first candidate that imports the server wins', async () => {
  const result = await resolveInterpreter('', ['/ws/.venv/bin/python', 'python3', 'python'], probeAccepting(['python3', 'python']));
  assert.deepEqual(result, { ok: true, python: 'python3', tried: ['/ws/.venv/bin/python', 'python3'] });
});

test('a configured interpreter is used alone, never replaced by a candidate', async () => {
  const result = await resolveInterpreter(' /opt/py/bin/python ', ['python3'], probeAccepting(['python3']));
  assert.equal(result.ok, false);
  assert.deepEqual(result.tried, ['/opt/py/bin/python']);
  assert.match(!result.ok ? result.message : '', /xpiler\.server\.python.*\/opt\/py\/bin\/python -m pip install xpiler/);
});

test('no interpreter: the message lists what was tried and the install command', async () => {
  const result = await resolveInterpreter('', ['python3', 'python'], probeAccepting([]));
  assert.equal(result.ok, false);
  assert.match(!result.ok ? result.message : '', /tried python3, python.*python3 -m pip install xpiler/);
});

test('virtual environments in the workspace come before PATH', () => {
  assert.deepEqual(defaultCandidates(['/ws'], 'linux'), ['/ws/.venv/bin/python', '/ws/venv/bin/python', 'python3', 'python']);
  assert.deepEqual(defaultCandidates([], 'win32'), ['python', 'py']);
});

test('the install command quotes paths with spaces for a POSIX shell', () => {
  assert.equal(installCommand('/home/me/my env/bin/python'), "'/home/me/my env/bin/python' -m pip install xpiler");
});

test('the import probe tells a missing interpreter from a missing module', { skip: process.platform === 'win32' }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'xpiler-probe-'));
  const fake = path.join(dir, 'python');
  // A stand-in interpreter that fails like Python does when the module is missing.
  writeFileSync(fake, "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'xpiler_server'\" >&2\nexit 1\n");
  chmodSync(fake, 0o755);
  const probe = importProbe(5000);
  assert.deepEqual(await probe(path.join(dir, 'missing')), { ok: false, reason: 'not found' });
  assert.deepEqual(await probe(fake), { ok: false, reason: "ModuleNotFoundError: No module named 'xpiler_server'" });
  const works = path.join(dir, 'works');
  writeFileSync(works, '#!/bin/sh\n[ "$1" = -c ] && [ -n "$2" ]\n');
  chmodSync(works, 0o755);
  assert.deepEqual(await probe(works), { ok: true });
});

test('the probe code accepts an interpreter with the server and rejects one without', { skip: process.platform === 'win32' }, async () => {
  // Real Python (-S: no site-packages, so an installed xpiler cannot interfere) against two package
  // folders: one with __main__.py (runnable), one without.
  const dir = mkdtempSync(path.join(tmpdir(), 'xpiler-pkg-'));
  const runnable = path.join(dir, 'with');
  const bare = path.join(dir, 'without');
  for (const root of [runnable, bare]) mkdirSync(path.join(root, 'xpiler_server'), { recursive: true });
  writeFileSync(path.join(runnable, 'xpiler_server', '__init__.py'), '');
  writeFileSync(path.join(runnable, 'xpiler_server', '__main__.py'), 'raise SystemExit("must not run")\n');
  writeFileSync(path.join(bare, 'xpiler_server', '__init__.py'), '');
  const run = (pythonPath: string) =>
    spawnSync('python3', ['-S', '-c', PROBE_CODE], { env: { ...process.env, PYTHONPATH: pythonPath }, cwd: dir, encoding: 'utf8' });
  const present = run(runnable);
  if (present.error) return; // no python3 on this machine: nothing to check against
  assert.equal(present.status, 0, present.stderr);
  const absent = run(bare);
  assert.equal(absent.status, 1);
  assert.match(absent.stderr, /No module named 'xpiler_server.__main__'/);
});
