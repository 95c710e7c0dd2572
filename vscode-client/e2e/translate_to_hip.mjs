// Drives a real VS Code (code-server in Chromium) through the translation flow:
// open a broken kernel and wait for its diagnostics, open a CUDA file, open the code action menu on the kernel, pick
// "Translate to HIP", wait for the .hip editor to open beside the source and the status bar to say verified, then
// "Translate to CPU" from the palette (the .cpp beside, verified); take screenshots.
// Inputs (environment): XPILER_E2E_URL (workbench URL with the extension payload), XPILER_E2E_SOURCE
// (file name to open), XPILER_E2E_BROKEN (a file with a syntax error whose diagnostics must show), XPILER_E2E_SHOTS (folder for PNGs), XPILER_E2E_STEP_MS (per-step limit).
// Prints one line per step; exits 1 with the failing step's name and the reason.
import { required, STATUS, Workbench } from './workbench.mjs';

const url = required('XPILER_E2E_URL');
const source = required('XPILER_E2E_SOURCE');
const shots = required('XPILER_E2E_SHOTS');
const stepMs = Number(process.env.XPILER_E2E_STEP_MS ?? 60000);
const translated = source.replace(/\.cu$/, '.hip');
// A kernel with a syntax error, opened first to see the server's diagnostics arrive (optional).
const broken = process.env.XPILER_E2E_BROKEN ?? '';

const wb = new Workbench(shots, stepMs);
const step = wb.step.bind(wb);
const runCommand = wb.runCommand.bind(wb);
const openFile = wb.openFile.bind(wb);
await wb.open(url);
const page = wb.page;

if (broken) {
  await step(`open ${broken}`, () => openFile(broken));
}

await wb.serverRunning();

if (broken) {
  await step(`the server's diagnostics for ${broken} appear in the Problems panel`, async () => {
    await page.keyboard.press('Control+Shift+M');
    const row = page.locator('.markers-panel .monaco-list-row', { hasText: 'xpiler' }).first();
    await row.waitFor();
    const rows = await page.locator('.markers-panel .monaco-list-row').allInnerTexts();
    console.log(`      problems: ${JSON.stringify(rows.map((r) => r.replace(/\s+/g, ' ')).slice(0, 4))}`);
    await runCommand('View: Hide Panel');
    await runCommand('View: Close Editor');
  });
}

await step(`open ${source}`, () => openFile(source));

await step('put the cursor inside the kernel', () => wb.goToLine(5));

await step('the editor context menu has the Xpiler submenu with the translations', async () => {
  await page.locator('.monaco-editor .view-lines').first().click({ button: 'right', position: { x: 200, y: 90 } });
  const submenu = page.locator('.monaco-menu .action-item', { hasText: 'Xpiler' }).first();
  await submenu.waitFor();
  await submenu.hover();
  await page.locator('.monaco-menu .action-label', { hasText: 'Translate to HIP' }).first().waitFor();
  const entries = await page.locator('.monaco-menu .action-label').allInnerTexts();
  console.log(`      context menu: ${JSON.stringify(entries.filter((e) => /Translate|Pass|Verify|Tune|Manifest|Server/.test(e)))}`);
  await page.keyboard.press('Escape');
  await page.keyboard.press('Escape');
  await page.locator('.monaco-menu').first().waitFor({ state: 'hidden' }).catch(() => undefined);
});

const via = await step('open the code action menu with "Translate to HIP"', async () => {
  const how = await wb.openMenuWith('Translate to HIP');
  await page.waitForTimeout(300); // let the menu finish its fade-in before the screenshot
  // The editor's top left with the menu, not the whole window: a smaller picture for the README.
  const menu = await page.locator('.action-widget').first().boundingBox();
  const bottom = menu ? menu.y + menu.height + 80 : 330;
  await page.screenshot({ path: `${shots}/code-action-menu.png`, clip: { x: 348, y: 30, width: 760, height: Math.min(690, bottom) - 30 } });
  return how;
});
console.log(`      menu: ${via}`);

// With the keyboard, as a user would: move the focus down to the entry, then Enter.
await step('pick "Translate to HIP"', () => wb.pickMenuRow('Translate to HIP'));

// The job's progress in the status bar; a job that ends between two looks is not a failure.
const progressSeen = await step('the status bar shows the job', async () => {
  const until = Date.now() + 10000;
  while (Date.now() < until) {
    const text = (await page.locator(STATUS).innerText().catch(() => '')).trim();
    if (/Translat/i.test(text)) {
      await page.screenshot({ path: `${shots}/job-progress.png`, clip: { x: 0, y: 520, width: 1280, height: 200 } });
      return text;
    }
    if (await page.locator('.tab', { hasText: translated }).count() > 0) return null;
    await page.waitForTimeout(100);
  }
  return null;
});
console.log(`      status bar: ${progressSeen ?? '(the job ended before it was seen)'}`);

await step(`the ${translated} editor opens beside the source`, async () => {
  const groups = page.locator('.editor-group-container');
  // The translation may take minutes (compile + tests); an error notification ends the wait early.
  const deadline = Date.now() + Math.max(stepMs, 240000);
  for (;;) {
    if (await page.locator('.tab', { hasText: translated }).count() > 0) break;
    const errors = await page.locator('.notification-toast:has(.codicon-error) .notification-list-item-message').allInnerTexts();
    if (errors.length > 0) throw new Error(`VS Code shows an error: ${errors.join(' | ')}`);
    if (Date.now() > deadline) throw new Error(`no editor for ${translated} after ${(Math.max(stepMs, 240000) / 1000)} s`);
    await page.waitForTimeout(500);
  }
  await page.waitForFunction(() => document.querySelectorAll('.editor-group-container').length >= 2);
  const first = await groups.nth(0).locator('.tab').allInnerTexts();
  const second = await groups.nth(1).locator('.tab').allInnerTexts();
  if (!first.some((t) => t.includes(source)) || !second.some((t) => t.includes(translated))) {
    throw new Error(`expected ${source} left and ${translated} right, got ${JSON.stringify([first, second])}`);
  }
  // Saved to disk: the tab of a created file is dirty until the client saves it.
  await page.waitForFunction(
    (name) => ![...document.querySelectorAll('.tab.dirty')].some((tab) => tab.textContent.includes(name)),
    translated,
  );
});

await step('the job ends and the screenshot is taken', async () => {
  await page.waitForFunction(
    // a running job shows its percentage; the finished one its verdict
    (selector) => !(document.querySelector(selector)?.textContent ?? '').includes('%'),
    STATUS,
    { timeout: stepMs },
  ).catch(() => undefined); // a still-spinning status item is not a failure of the flow
  await page.mouse.move(640, 700);
  await page.waitForTimeout(2000); // code lenses refresh after the job's end
  await page.screenshot({ path: `${shots}/translated-beside.png` });
});

await step('the status bar says the translation verified', async () => {
  const text = await wb.until('the verdict in the status bar', async () => {
    const shown = await wb.statusText();
    return shown.includes(`${source} to HIP: `) ? shown : null;
  });
  if (!text.includes('to HIP: verified')) throw new Error(`the status bar says: ${text}`);
  console.log(`      status bar: ${text}`);
});

const cpu = source.replace(/\.cu$/, '.cpp');
await step('Translate to CPU from the palette: the .cpp opens beside, verified', async () => {
  await page.locator('.tab', { hasText: source }).first().click();
  await page.locator('.tab.active', { hasText: source }).waitFor();
  await runCommand('Xpiler: Translate to CPU (C/OpenMP)');
  await wb.until(`an editor for ${cpu}`, async () => page.locator('.tab', { hasText: cpu }).count(), Math.max(stepMs, 240000));
  const text = await wb.until('the CPU verdict in the status bar', async () => {
    const shown = await wb.statusText();
    return shown.includes(`${source} to CPU: `) ? shown : null;
  }, Math.max(stepMs, 240000));
  if (!text.includes('to CPU: verified')) throw new Error(`the status bar says: ${text}`);
  await page.mouse.move(640, 700);
  await page.screenshot({ path: `${shots}/translated-cpu.png` });
  console.log(`      status bar: ${text}`);
});

await wb.close();
