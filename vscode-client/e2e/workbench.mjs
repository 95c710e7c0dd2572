// What every browser flow of the end-to-end test does with VS Code (code-server in Chromium): named steps that
// print their time and, on failure, the step, a screenshot, the Xpiler status bar and the notifications; opening
// files with Quick Open; running palette commands by their exact label; the code action menu. Every wait is on
// something visible, never a fixed time.
import { chromium } from 'playwright-core';

export const STATUS = '[id="xpiler.xpiler.xpiler.status"]';

export function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`e2e: missing environment variable ${name}`);
    process.exit(2);
  }
  return value;
}

export class Workbench {
  constructor(shots, stepMs) {
    this.shots = shots;
    this.stepMs = stepMs;
    this.browser = undefined;
    this.page = undefined;
    this.started = Date.now();
  }

  /** Runs one named step; on failure prints what the user would see and exits 1. */
  async step(name, body) {
    const t0 = Date.now();
    try {
      const result = await body();
      console.log(`  ok  ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      return result;
    } catch (error) {
      console.error(`  FAIL ${name}: ${String(error?.message ?? error).split('\n')[0]}`);
      const page = this.page;
      if (page) {
        await page.screenshot({ path: `${this.shots}/failure.png` }).catch(() => undefined);
        console.error(`  screenshot of the failure: ${this.shots}/failure.png`);
        const status = await page.locator(STATUS).getAttribute('aria-label', { timeout: 1000 }).catch(() => null);
        if (status) console.error(`  Xpiler status bar: ${status}`);
        const notes = await page.locator('.notifications-toasts .notification-list-item-message').allInnerTexts().catch(() => []);
        for (const note of notes) console.error(`  notification: ${note}`);
      }
      await this.browser?.close().catch(() => undefined);
      process.exit(1);
    }
  }

  async open(url) {
    this.browser = await this.step('launch Chromium', () =>
      chromium.launch({ executablePath: process.env.XPILER_E2E_CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox'] }));
    this.page = await this.browser.newPage({ viewport: { width: 1280, height: 720 } });
    this.page.setDefaultTimeout(this.stepMs);
    await this.step('open VS Code with the extension loaded from its folder', async () => {
      await this.page.goto(url, { timeout: this.stepMs });
      await this.page.locator('.monaco-workbench').waitFor();
    });
  }

  async close() {
    await this.browser?.close();
    console.log(`  browser flow done in ${((Date.now() - this.started) / 1000).toFixed(1)} s`);
  }

  async serverRunning() {
    await this.step('the Xpiler server is running', async () => {
      await this.page.locator(STATUS).waitFor();
      await this.page.waitForFunction(
        (selector) => (document.querySelector(selector)?.getAttribute('aria-label') ?? '').includes('server: running'),
        STATUS,
        { timeout: this.stepMs },
      );
    });
  }

  async statusText() {
    return (await this.page.locator(STATUS).innerText().catch(() => '')).trim();
  }

  /** The code action menu rows currently shown, as text. */
  async menuRows() {
    return this.page.locator('.action-widget .monaco-list-row').allInnerTexts();
  }

  /** Opens the code action menu (Ctrl+., else Source Action…) until it lists ``title``; returns how. */
  async openMenuWith(title, { sourceAction = true } = {}) {
    const page = this.page;
    await page.keyboard.press('Control+.');
    const opened = await page.locator('.action-widget .monaco-list-row').first()
      .waitFor({ timeout: 8000 }).then(() => true, () => false);
    if (opened) {
      // rows from slower providers: wait until the row is there or the list stops changing
      await page.locator('.action-widget .monaco-list-row', { hasText: title }).first()
        .waitFor({ timeout: 3000 }).catch(() => undefined);
    }
    if (await page.locator('.action-widget .monaco-list-row', { hasText: title }).count() > 0) return 'Ctrl+.';
    if (!sourceAction) throw new Error(`the code action menu has no "${title}": ${JSON.stringify(await this.menuRows())}`);
    console.log(`      Ctrl+. menu: ${JSON.stringify(await this.menuRows())}; trying Source Action…`);
    await page.keyboard.press('Escape');
    await this.runCommand('Source Action...');
    await page.locator('.action-widget .monaco-list-row', { hasText: title }).first().waitFor({ timeout: this.stepMs });
    return 'Source Action…';
  }

  /** Moves the focus in the open code action menu to the row that contains ``title``, then Enter. */
  async pickMenuRow(title) {
    const focused = this.page.locator('.action-widget .monaco-list-row.focused');
    for (let moves = 0; ; moves++) {
      const text = await focused.innerText({ timeout: 2000 }).catch(() => '');
      if (text.includes(title)) break;
      if (moves >= 30) throw new Error(`cannot focus "${title}" in ${JSON.stringify(await this.menuRows())}`);
      await this.page.keyboard.press('ArrowDown');
    }
    await this.page.keyboard.press('Enter');
  }

  /** Runs a command from the palette by its exact label (moving the focus to it, then Enter). */
  async runCommand(label) {
    const page = this.page;
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ timeout: this.stepMs });
    await input.fill(`>${label}`);
    await page.locator('.quick-input-list .monaco-list-row', { hasText: label }).first().waitFor({ timeout: this.stepMs });
    const focusedLabel = page.locator('.quick-input-list .monaco-list-row.focused .label-name');
    for (let moves = 0; ; moves++) {
      const text = (await focusedLabel.innerText({ timeout: 2000 }).catch(() => '')).trim();
      if (text === label) break;
      if (moves >= 15) throw new Error(`no palette entry labelled "${label}"`);
      await page.keyboard.press('ArrowDown');
    }
    await page.keyboard.press('Enter');
  }

  async openFile(name) {
    const page = this.page;
    // Quick Open sometimes misses keys typed while the workbench is still restoring: retry once.
    for (let attempt = 0; ; attempt++) {
      await page.keyboard.press('Control+P');
      const input = page.locator('.quick-input-widget input');
      await input.waitFor();
      await input.fill(name);
      const row = page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first();
      if (await row.waitFor({ timeout: 15000 }).then(() => true, () => false)) {
        await page.keyboard.press('Enter');
        break;
      }
      if (attempt > 0) throw new Error(`Quick Open does not find ${name}`);
      await page.keyboard.press('Escape');
    }
    await page.locator('.tab.active', { hasText: name }).waitFor();
    await page.locator('.monaco-editor .view-lines').first().waitFor();
  }

  /** Puts the cursor on a line of the active editor (Go to Line). */
  async goToLine(line) {
    await this.page.locator('.monaco-editor .view-lines').first().click();
    await this.page.keyboard.press('Control+G');
    await this.page.locator('.quick-input-widget input').fill(`:${line}`);
    await this.page.keyboard.press('Enter');
    await this.page.locator('[id="status.editor.selection"]', { hasText: `Ln ${line}` }).waitFor();
  }

  /** Waits until ``predicate()`` holds, polling; an error notification ends the wait early. */
  async until(what, predicate, limitMs) {
    const deadline = Date.now() + (limitMs ?? this.stepMs);
    for (;;) {
      const value = await predicate();
      if (value) return value;
      const errors = await this.page.locator('.notification-toast:has(.codicon-error) .notification-list-item-message').allInnerTexts();
      if (errors.length > 0) throw new Error(`VS Code shows an error while waiting for ${what}: ${errors.join(' | ')}`);
      if (Date.now() > deadline) throw new Error(`${what}: not seen within ${((limitMs ?? this.stepMs) / 1000).toFixed(0)} s`);
      await this.page.waitForTimeout(250);
    }
  }
}
