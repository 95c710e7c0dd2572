import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { defaultCandidates, importProbe, installCommand, Probe, resolveInterpreter } from '../interpreter';

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
  writeFileSync(works, '#!/bin/sh\n[ "$1" = -c ] && [ "$2" = "import xpiler_server" ]\n');
  chmodSync(works, 0o755);
  assert.deepEqual(await probe(works), { ok: true });
});
