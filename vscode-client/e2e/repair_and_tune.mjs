// Drives a real VS Code (code-server in Chromium) through the two flows after translation:
//  repair: a CUDA kernel with a seeded index bug and its spec → Verify → the failing test shows in the Problems
//          panel on the kernel's line with the failing case → the background repair turns it into the quick fix
//          "Apply repair (verified): …" → pick it → save → Verify again → the code lens says verified and the
//          problem is gone;
//  tune:   "Tune This File" on the repaired kernel → the status bar shows the job (cancellable) → hovering the
//          kernel shows the trials so far while it runs → the tuned file opens beside it → the hover shows the best
//          configuration, its speed-up with its interval and the tuned file.
// Inputs (environment): XPILER_E2E_URL, XPILER_E2E_REPAIR (the seeded file's name), XPILER_E2E_KERNEL (its kernel),
// XPILER_E2E_SHOTS (folder for PNGs), XPILER_E2E_STEP_MS (per-step limit).
// Prints one line per step; exits 1 with the failing step's name, the status bar and the notifications.
import { required, STATUS, Workbench } from './workbench.mjs';

const url = required('XPILER_E2E_URL');
const source = required('XPILER_E2E_REPAIR');
const kernel = required('XPILER_E2E_KERNEL');
const shots = required('XPILER_E2E_SHOTS');
const stepMs = Number(process.env.XPILER_E2E_STEP_MS ?? 60000);
const JOB_MS = Math.max(stepMs, 300000); // a verification, a repair or a tuning run on a loaded machine

const wb = new Workbench(shots, stepMs);
await wb.open(url);
const page = wb.page;
await wb.serverRunning();

const problems = page.locator('.markers-panel .monaco-list-row');
async function problemRows() {
  return (await problems.allInnerTexts().catch(() => [])).map((r) => r.replace(/\s+/g, ' '));
}

async function hoverKernel() {
  // The kernel's name in view (a selection may have scrolled the editor sideways), the mouse away first, so that
  // a new hover opens with what the server knows now.
  await page.keyboard.press('Escape');
  await wb.goToLine(1);
  await page.mouse.move(640, 700);
  await page.locator('.monaco-hover').first().waitFor({ state: 'hidden', timeout: 5000 }).catch(() => undefined);
  await page.locator('.monaco-editor .view-line span', { hasText: kernel }).first().hover();
  const hover = page.locator('.monaco-hover-content', { hasText: kernel }).last();
  await hover.waitFor({ timeout: stepMs });
  // shown in full (the widget fades in), so that a screenshot reads
  await page.waitForFunction(() => [...document.querySelectorAll('.monaco-hover')]
    .some((h) => h.offsetParent !== null && getComputedStyle(h).opacity === '1'), undefined, { timeout: stepMs });
  return (await hover.innerText()).replace(/\s+/g, ' ');
}

// ------------------------------------------------------------------------------------------------ repair
await wb.step(`open ${source}`, () => wb.openFile(source));

await wb.step('run "Xpiler: Verify"', () => wb.runCommand('Xpiler: Verify'));

const failed = await wb.step('the failing test shows in the Problems panel on the kernel, with the failing case', async () => {
  await page.keyboard.press('Control+Shift+M');
  const row = await wb.until('a "test failed" problem', async () => {
    const rows = await problemRows();
    return rows.find((r) => r.includes('test failed')) ?? null;
  }, JOB_MS);
  if (!/\(m=\d+\)|\w+=\d+/.test(row)) throw new Error(`the problem does not name the failing case: ${row}`);
  if (!/\[Ln \d+, Col \d+\]|Ln \d+/.test(row)) console.log(`      (no line shown in the row: ${row})`);
  return row;
});
console.log(`      problem: ${failed.slice(0, 200)}`);

const repaired = await wb.step('the background repair adds a verified fix to the problem', async () => {
  const row = await wb.until('the repair\'s result on the problem', async () => {
    const rows = await problemRows();
    return rows.find((r) => r.includes('repair found and verified') || r.includes('no repair:')) ?? null;
  }, JOB_MS);
  await page.screenshot({ path: `${shots}/repair-diagnostic.png` });
  if (!row.includes('repair found and verified')) throw new Error(`the repair was refused: ${row}`);
  return row;
});
console.log(`      problem: ${repaired.slice(0, 200)}`);

await wb.step('the quick fix "Apply repair (verified)" shows the change', async () => {
  // Clicking the problem puts the cursor on its line, in the editor.
  const line = /Ln (\d+)/.exec(repaired)?.[1];
  await problems.filter({ hasText: 'repair found and verified' }).first().click();
  if (line) await page.locator('[id="status.editor.selection"]', { hasText: `Ln ${line},` }).waitFor();
  await wb.runCommand('View: Hide Panel');
  await page.locator('.monaco-editor .view-lines').first().waitFor();
  await wb.openMenuWith('Apply repair (verified)', { sourceAction: false });
  const rows = await wb.menuRows();
  console.log(`      quick fixes: ${JSON.stringify(rows)}`);
  const menu = await page.locator('.action-widget').first().boundingBox();
  await page.screenshot({ path: `${shots}/repair-quick-fix.png`, clip: menu
    ? { x: 0, y: Math.max(0, menu.y - 120), width: 1280, height: Math.min(720 - Math.max(0, menu.y - 120), menu.height + 200) }
    : undefined });
  const title = rows.find((r) => r.includes('Apply repair (verified)')) ?? '';
  if (!title.includes('→')) throw new Error(`the fix does not show the change: ${title}`);
});

await wb.step('accept the repair and save', async () => {
  await wb.pickMenuRow('Apply repair (verified)');
  await wb.until('the edit in the editor', async () => page.locator('.tab.active.dirty', { hasText: source }).count());
  await page.keyboard.press('Control+S');
  await wb.until('the file saved', async () => (await page.locator('.tab.dirty', { hasText: source }).count()) === 0);
});

await wb.step('verify again: the code lens says verified and the problem is gone', async () => {
  await wb.runCommand('Xpiler: Verify');
  await wb.until('a "verified" code lens', async () =>
    page.locator('.contentWidgets .codelens-decoration, .codelens-decoration', { hasText: 'verified' }).count(), JOB_MS);
  await page.keyboard.press('Control+Shift+M');
  await wb.until('no failing test in the Problems panel', async () =>
    !(await problemRows()).some((r) => r.includes('test failed')));
  await page.screenshot({ path: `${shots}/repair-verified.png` });
  await wb.runCommand('View: Hide Panel');
});

// ------------------------------------------------------------------------------------------------ tune
const tuned = source.replace(/\.cu$/, '.tuned.cpp');

await wb.step('run "Xpiler: Tune This File"', () => wb.runCommand('Xpiler: Tune This File'));

const running = await wb.step('the status bar shows the tuning job, cancellable', async () => {
  return wb.until('the tuning job in the status bar', async () => {
    const label = (await page.locator(STATUS).getAttribute('aria-label').catch(() => '')) ?? '';
    if (/Tune/.test(label) && /cancel/i.test(label)) {
      await page.screenshot({ path: `${shots}/tune-progress.png`, clip: { x: 0, y: 620, width: 1280, height: 100 } });
      return label.replace(/\s+/g, ' ');
    }
    if (await page.locator('.tab', { hasText: tuned }).count() > 0) throw new Error('tuning ended before the status bar showed it');
    return null;
  }, JOB_MS);
});
console.log(`      status bar: ${running.slice(0, 200)}`);

await wb.step('hovering the kernel shows the trials so far while it runs', async () => {
  const text = await wb.until('a hover with the running tuning job', async () => {
    const hover = await hoverKernel();
    if (/tuning \(running/.test(hover) && /trials: \d+/.test(hover)) return hover;
    if (await page.locator('.tab', { hasText: tuned }).count() > 0) throw new Error(`tuning ended first; last hover: ${hover}`);
    return null;
  }, JOB_MS);
  await page.screenshot({ path: `${shots}/tune-hover-running.png` });
  console.log(`      hover: ${text.slice(text.indexOf('tuning'), text.indexOf('tuning') + 220)}`);
});

await wb.step(`the tuned file ${tuned} opens`, async () => {
  await wb.until(`an editor for ${tuned}`, async () => page.locator('.tab', { hasText: tuned }).count(), JOB_MS);
  await wb.until(`${tuned} saved`, async () => (await page.locator('.tab.dirty', { hasText: tuned }).count()) === 0);
});

await wb.step('the hover shows the best configuration, its speed-up and the tuned file', async () => {
  // the tuned file seen, its editor closed: the source gets the whole width again
  await page.locator('.tab', { hasText: tuned }).first().click();
  await page.locator('.tab.active', { hasText: tuned }).waitFor();
  await page.screenshot({ path: `${shots}/tune-result-beside.png` });
  await wb.runCommand('View: Close Editor');
  await page.locator('.tab', { hasText: tuned }).waitFor({ state: 'detached' });
  await page.locator('.tab', { hasText: source }).first().click();
  await page.locator('.tab.active', { hasText: source }).waitFor();
  const text = await wb.until('a hover with the finished tuning job', async () => {
    const hover = await hoverKernel();
    return /tuning \(done/.test(hover) ? hover : null;
  });
  for (const part of ['best config', 'speedup', 'tuned code']) {
    if (!text.includes(part)) throw new Error(`the hover lacks "${part}": ${text}`);
  }
  await page.screenshot({ path: `${shots}/tune-hover-done.png` });
  console.log(`      hover: ${text.slice(text.indexOf('tuning'), text.indexOf('tuning') + 300)}`);
});

await wb.close();
