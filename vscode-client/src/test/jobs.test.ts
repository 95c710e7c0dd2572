import assert from 'node:assert/strict';
import { test } from 'node:test';
import { JobBoard } from '../jobs';

test('idle board shows the server state', () => {
  const board = new JobBoard();
  board.setServerState('running');
  assert.deepEqual(board.view(), { text: '$(circuit-board) Xpiler', tooltip: 'Xpiler server: running', busy: false });
});

test('a job goes begin → report → end and the item follows it', () => {
  const board = new JobBoard();
  assert.equal(board.progress('t1', { kind: 'begin', title: 'Translate to HIP', percentage: 0, cancellable: true }), true);
  assert.equal(board.progress('t1', { kind: 'report', message: 'compiling', percentage: 40 }), true);
  const busy = board.view();
  assert.equal(busy.text, '$(sync~spin) Translate to HIP 40% · compiling');
  assert.equal(busy.busy, true);
  assert.deepEqual(board.activeTokens(), ['t1']);
  assert.equal(board.progress('t1', { kind: 'end' }), true);
  assert.equal(board.view().busy, false);
  assert.deepEqual(board.activeTokens(), []);
});

test('reports for unknown tokens are ignored; percentages are clamped', () => {
  const board = new JobBoard();
  assert.equal(board.progress('ghost', { kind: 'report', percentage: 10 }), false);
  board.progress(7, { kind: 'begin', title: 'Verify' });
  board.progress('7', { kind: 'report', percentage: 250 });
  assert.equal(board.view().text, '$(sync~spin) Verify 100%');
  assert.equal(board.view().busy, false, 'a job that is not cancellable does not make the item a cancel button');
});

test('two jobs: the first is shown with a count of the others', () => {
  const board = new JobBoard();
  board.progress('a', { kind: 'begin', title: 'Translate to HIP' });
  board.progress('b', { kind: 'begin', title: 'Verify' });
  assert.equal(board.view().text, '$(sync~spin) Translate to HIP (+1)');
});

test('tuning snapshots show trials and the best speedup, and leave the bar when finished', () => {
  const board = new JobBoard();
  board.tuningUpdate({ jobId: 'j3', kind: 'tune', uri: 'file:///k.cu', title: 'Tune softmax', state: 'running', percentage: 5, live: {} } as never);
  assert.equal(board.view().text, '$(pulse) Tune softmax 5%');
  board.tuningUpdate({ jobId: 'j3', title: 'Tune softmax', state: 'running', percentage: 19, live: { trials: 12, budget: 64, speedup: 1.8734, best_latency_ms: 0.25, best_config: { block: 128 } } });
  const view = board.view();
  assert.equal(view.text, '$(pulse) Tune softmax 12/64 · best 1.87×');
  assert.match(view.tooltip, /0\.250 ms · \{"block":128\}/);
  board.tuningUpdate({ jobId: 'j3', title: 'Tune softmax', state: 'done', percentage: 100, message: 'best of 64', live: { trials: 64, budget: 64, speedup: 2 } });
  assert.equal(board.view().text, '$(circuit-board) Xpiler');
  assert.match(board.view().tooltip, /Tune softmax 64\/64 · best 2\.00× \(done\) — best of 64/);
});

test('tuning snapshots with odd or missing fields never break the view', () => {
  const board = new JobBoard();
  board.tuningUpdate({});
  board.tuningUpdate({ jobId: 1, live: { trials: 'many', speedup: null } as never, percentage: Number.NaN });
  assert.equal(board.view().text, '$(pulse) Tune');
});

test("the last translation's or verification's verdict stays in the item while nothing runs", () => {
  const board = new JobBoard();
  board.setServerState('running');
  board.finished({ kind: 'translate', title: 'Translate vector_add.cu to HIP', state: 'done', message: 'verified: hip ok' });
  assert.equal(board.view().text, '$(pass) Xpiler · Translate vector_add.cu to HIP: verified');
  board.progress('t2', { kind: 'begin', title: 'Verify add.cu', cancellable: true });
  assert.equal(board.view().text, '$(sync~spin) Verify add.cu', 'a running job comes first');
  board.progress('t2', { kind: 'end' });
  board.finished({ kind: 'verify', title: 'Verify add.cu', state: 'done', message: 'FAILED: 0/3 cases passed' });
  assert.equal(board.view().text, '$(warning) Xpiler · Verify add.cu: FAILED');
  board.finished({ kind: 'tune', title: 'Tune add.cu for CPU', state: 'done', message: 'best 1.00x' });
  assert.equal(board.view().text, '$(warning) Xpiler · Verify add.cu: FAILED', 'tuning has its own item');
  board.finished({ kind: 'translate', title: 'Translate add.cu to CPU', state: 'cancelled', message: '' });
  assert.equal(board.view().text, '$(warning) Xpiler · Translate add.cu to CPU: cancelled');
  board.finished({ kind: 'verify', title: 'Verify x.cu', state: 'done', message: 'verified: 1/1', stale: true });
  assert.equal(board.view().text, '$(warning) Xpiler · Translate add.cu to CPU: cancelled', 'a stale result is not shown');
});
