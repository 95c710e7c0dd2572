// Opens a migration report (xpiler-report.html, a static page) in Chromium and uses it as a team lead would:
// the page loads from disk with its totals, the table sorts by a column, the text and status filters narrow
// it, a row opens its diff. Argument: the report's path; XPILER_E2E_SHOTS: folder for the screenshot.
// Prints one JSON object with what it saw; exits 1 with the failing step.
import { chromium } from 'playwright-core';

const report = process.argv[2];
const shots = process.env.XPILER_E2E_SHOTS ?? '.';
const seen = {};
let browser;
try {
  browser = await chromium.launch({ executablePath: process.env.XPILER_E2E_CHROMIUM ?? '/usr/bin/chromium',
                                    args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto('file://' + report);
  seen.title = await page.textContent('#title');
  seen.totals = await page.textContent('#totals');
  const rows = () => page.$$eval('#files tbody tr.file', (trs) => trs.map((tr) => tr.dataset.file));
  seen.rows = await rows();
  // sort by seconds, descending (two clicks)
  await page.click('#files th[data-key="seconds"]');
  await page.click('#files th[data-key="seconds"]');
  seen.sortedBySeconds = await page.$$eval('#files tbody tr.file td:nth-child(5)',
                                           (tds) => tds.map((td) => parseFloat(td.textContent)));
  seen.sortState = await page.getAttribute('#files th[data-key="seconds"]', 'aria-sort');
  // filters: text, then status
  await page.fill('#filter', process.env.XPILER_E2E_FILTER ?? 'compact');
  seen.filtered = await rows();
  await page.fill('#filter', '');
  await page.selectOption('#status', 'verified');
  seen.verifiedOnly = await rows();
  await page.selectOption('#status', '');
  // a row opens its diff
  await page.click('#files tbody tr.file');
  await page.waitForSelector('#files tbody tr.diffrow pre.diff', { timeout: 10000 });
  seen.diff = (await page.textContent('#files tbody tr.diffrow pre.diff')).slice(0, 2000);
  seen.phases = await page.textContent('#phases');
  seen.errors = errors;
  await page.screenshot({ path: `${shots}/migration-report.png`, fullPage: true });
  console.log(JSON.stringify(seen));
} catch (error) {
  console.error(`report: FAIL: ${String(error?.message ?? error).split('\n')[0]}`);
  console.log(JSON.stringify(seen));
  process.exitCode = 1;
} finally {
  await browser?.close();
}
