import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActionLike, CLIENT_ACTIONS, columnFor, passChoices, pickAction } from '../actions';

const action = (id: string) => {
  const found = CLIENT_ACTIONS.find((a) => a.id === id)!;
  assert.ok(found.serverCommand === undefined, `${id} is a code action`);
  return found;
};
const offered: ActionLike[] = [
  { title: 'Run pass: loop_unroll', kind: { value: 'refactor.rewrite' }, command: { command: 'xpiler.runPass', arguments: [1] } },
  { title: 'Translate to HIPIFY-like', kind: 'source', command: { command: 'other' } },
  { title: 'Translate to CPU (C/OpenMP)', kind: { value: 'source.xpiler.cpu' }, command: { command: 'xpiler.translate', arguments: ['cpu'] } },
  { title: 'Translate to HIP', kind: { value: 'source.xpiler.hip' }, command: { command: 'xpiler.translate', arguments: ['hip'] } },
  { title: 'Run pass: api_map', kind: { value: 'refactor.rewrite' }, disabled: { reason: 'not here' } },
  { title: 'Run pass: warp_size', kind: { value: 'refactor.rewrite' } },
  { title: 'Translate to CUDA', kind: { value: 'quickfix' } },
];

test('the exact title wins over a longer title with the same start', () => {
  assert.deepEqual(pickAction(offered, action('xpiler.translateToHip'))?.command, { command: 'xpiler.translate', arguments: ['hip'] });
});

test('a title with a parenthesised suffix still matches', () => {
  assert.equal(pickAction(offered, action('xpiler.translateToCpu'))?.title, 'Translate to CPU (C/OpenMP)');
});

test('an action of another kind does not match', () => {
  assert.equal(pickAction(offered, action('xpiler.translateToCuda')), undefined);
  assert.equal(pickAction(offered, action('xpiler.translateToBang')), undefined);
});

test('pass choices: enabled passes only, by name', () => {
  assert.deepEqual(passChoices(offered).map((c) => c.label), ['loop_unroll', 'warp_size']);
});

test('a shown document opens where it is visible, else beside the source', () => {
  assert.equal(columnFor(3, 1), 3);
  assert.equal(columnFor(undefined, 1), 2);
  assert.equal(columnFor(undefined, 2), 3);
  assert.equal(columnFor(undefined, undefined), 2);
  assert.equal(columnFor(undefined, 9), 9);
});

test('commands without a code action name a server command the server registers', () => {
  // the server's own registry (server/server.py COMMANDS), read from its source so the two cannot drift apart
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const fs = require('node:fs') as typeof import('node:fs');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const path = require('node:path') as typeof import('node:path');
  const source = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'server', 'server.py'), 'utf8');
  const registry = /^COMMANDS = \(([^)]*)\)/m.exec(source);
  assert.ok(registry, 'server/server.py defines COMMANDS');
  const serverCommands = [...registry[1].matchAll(/"([^"]+)"/g)].map((m) => m[1]);
  assert.ok(serverCommands.includes('xpiler.translate'));
  for (const a of CLIENT_ACTIONS) {
    if (a.serverCommand !== undefined) assert.ok(serverCommands.includes(a.serverCommand), a.id);
  }
});

test('every client action is contributed in package.json with a title', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const manifest = require('../../package.json') as { contributes: { commands: { command: string }[] } };
  const contributed = new Set(manifest.contributes.commands.map((c) => c.command));
  for (const a of CLIENT_ACTIONS) assert.ok(contributed.has(a.id), a.id);
  for (const id of ['xpiler.runPassPick', 'xpiler.cancelJobs', 'xpiler.restartServer', 'xpiler.showServerLog']) assert.ok(contributed.has(id), id);
});
