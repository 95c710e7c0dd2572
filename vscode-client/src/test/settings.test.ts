import assert from 'node:assert/strict';
import { test } from 'node:test';
import { configurationItem, DEFAULT_SETTINGS, readServerSettings } from '../settings';

const reader = (values: Record<string, unknown>) => (key: string) => values[key];

test('unset settings give the server defaults', () => {
  assert.deepEqual(readServerSettings(reader({})), DEFAULT_SETTINGS);
});

test('valid values pass through under the server key names', () => {
  const settings = readServerSettings(
    reader({
      target: 'cpu',
      hipWarpSize: 32,
      'toolchains.hipcc': ' /opt/rocm/bin/hipcc ',
      'testBudget.cases': 3,
      'testBudget.seconds': 30,
      'llm.enabled': true,
      'llm.endpoint': 'http://127.0.0.1:8000/v1',
      'llm.model': 'coder',
      'llm.apiKeyEnv': 'MY_KEY',
      'tuning.budgetSeconds': 10,
      'tuning.trials': 8,
      'diagnostics.debounceMs': 100,
    }),
  );
  assert.deepEqual(settings, {
    target: 'cpu',
    hipWarpSize: 32,
    toolchains: { hipcc: '/opt/rocm/bin/hipcc' },
    testBudget: { cases: 3, seconds: 30 },
    llm: { enabled: true, endpoint: 'http://127.0.0.1:8000/v1', model: 'coder', apiKeyEnv: 'MY_KEY' },
    tuning: { budgetSeconds: 10, trials: 8 },
    diagnostics: { debounceMs: 100 },
  });
});

test('malformed values fall back to defaults instead of reaching the server', () => {
  const settings = readServerSettings(
    reader({
      target: 'fortran',
      hipWarpSize: 48,
      'toolchains.nvcc': '   ',
      'testBudget.cases': 2.5,
      'testBudget.seconds': -1,
      'tuning.trials': 0,
      'tuning.budgetSeconds': Number.NaN,
      'diagnostics.debounceMs': 99999,
      'llm.apiKeyEnv': '',
    }),
  );
  assert.deepEqual(settings, DEFAULT_SETTINGS);
});

test('the LLM stays off when enabled without an endpoint', () => {
  const settings = readServerSettings(reader({ 'llm.enabled': true, 'llm.model': 'coder' }));
  assert.equal(settings.llm.enabled, false);
});

test('workspace/configuration answers the section, sub-sections, and nothing else', () => {
  const settings = readServerSettings(reader({ target: 'cuda', 'tuning.trials': 5 }));
  assert.deepEqual(configurationItem('xpiler', settings), settings);
  assert.deepEqual(configurationItem(undefined, settings), settings);
  assert.equal(configurationItem('xpiler.target', settings), 'cuda');
  assert.equal(configurationItem('xpiler.tuning.trials', settings), 5);
  assert.equal(configurationItem('xpiler.nothing.here', settings), null);
  assert.equal(configurationItem('xpiler.toString', settings), null);
  assert.equal(configurationItem('editor', settings), undefined);
  assert.equal(configurationItem('xpilerx', settings), undefined);
});
