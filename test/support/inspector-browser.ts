import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Where the inspector tests keep their screenshots and figures (gitignored). */
export const INSPECTOR_ARTIFACTS = path.join(root, 'test-artifacts', 'inspector');
/** Debian's chromium (`.ci/run` installs it). */
const CHROMIUM = '/usr/bin/chromium';
/** Without the networking flags, chromium waits on services this closed network does not answer. */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
/** The window sizes the page must read well at. */
export const DESKTOP = { width: 1280, height: 800 } as const;
export const NARROW = { width: 390, height: 844 } as const;

/** Headless chromium with a fresh profile (Playwright makes one per launch); fails when chromium is missing. */
export async function launchChromium(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`);
  fs.mkdirSync(INSPECTOR_ARTIFACTS, { recursive: true });
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/** A page whose dialogs (alert, confirm…) are recorded and dismissed: hostile content must open none. */
export async function newPage(
  browser: Browser,
  viewport: { width: number; height: number } = DESKTOP,
): Promise<{ context: BrowserContext; page: Page; dialogs: string[] }> {
  const context = await browser.newContext({ viewport, acceptDownloads: true });
  const page = await context.newPage();
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return { context, page, dialogs };
}

/** Saves a full-page screenshot as `test-artifacts/inspector/<name>.png`. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(INSPECTOR_ARTIFACTS, `${name}.png`), fullPage: true });
}

/** One axe-core finding. */
export interface AxeViolation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly targets: readonly string[];
}

const axeSource = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * axe-core's violations on the page as it is now. The script is evaluated through the
 * debugging protocol, which the page's CSP does not govern (the page itself allows no inline script).
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(`${axeSource}\n;undefined`);
  return (await page.evaluate(
    `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => String(n.target)) })))`,
  )) as AxeViolation[];
}

/** The serious and critical ones among {@link axeViolations}. */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  return (await axeViolations(page)).filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** Opens `/ui/` and signs in with `token`; resolves once the signed-in header shows. */
export async function signIn(page: Page, baseUrl: string, token: string): Promise<void> {
  await page.goto(`${baseUrl}/ui/`);
  await page.getByLabel('Bearer token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}
