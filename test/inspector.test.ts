/**
 * The inspector (`/ui/`) in a real browser (Debian chromium driven by playwright-core) against
 * a real `holdfast serve` (the compiled CLI) with runs in bwrap sandboxes: sign-in, runs, a
 * run's timeline after a recovery, a checkpoint's tree, previews, verified downloads, diff,
 * work folders (selection, trash, restore, collision), privacy of user folders, hostile
 * content, accessibility (axe-core) and narrow windows. Every view leaves a screenshot in
 * `test-artifacts/inspector/`; the page weight and time to first render go to `figures.json`.
 */
import { execFileSync } from 'node:child_process';
import crypto, { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GitServer, startGitDaemon } from './support/git-servers.js';
import {
  axeViolations,
  DESKTOP,
  INSPECTOR_ARTIFACTS,
  launchChromium,
  NARROW,
  newPage,
  screenshot,
  seriousViolations,
  signIn,
} from './support/inspector-browser.js';
import { gradientPng } from './support/png.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';
import { type CliStore, openCliStore, type ServeProcess } from './support/serve-process.js';

const HOSTILE_NAME = '<img src=x onerror=alert(1)>';
const HOSTILE_HTML = '<!doctype html><p id=static>static text</p><script>alert("xss");parent.postMessage("script ran","*")</script>';
const PNG = gradientPng(48, 32);
const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

describe('inspector in chromium against holdfast serve', () => {
  let store: CliStore;
  let server: ServeProcess;
  let browser: Browser;
  let service: string;
  let alice: string;
  let bob: string;
  let runId: string;
  let lastCheckpoint: string;
  let gitRoot: string;
  let daemon: GitServer;

  const api = async (method: string, url: string, body?: unknown, token = service, headers: Record<string, string> = {}): Promise<any> => {
    const response = await fetch(`${server.url}${url}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${text}`);
    return JSON.parse(text);
  };
  const upload = async (scope: string, owner: string, file: string, bytes: string): Promise<void> => {
    const response = await fetch(
      `${server.url}/api/companies/default/work-folders/${scope}/${owner}/content?path=${encodeURIComponent(file)}`,
      {
        method: 'PUT',
        headers: { authorization: `Bearer ${service}`, 'content-type': 'application/octet-stream', 'idempotency-key': crypto.randomUUID() },
        body: bytes,
      },
    );
    expect(response.status).toBe(200);
  };
  const turn = (script: string, stdin?: string) =>
    api('POST', `/v1/runs/${runId}/turns`, { argv: ['sh', '-c', script], ...(stdin === undefined ? {} : { stdin }) });
  const pageFor = async (
    token: string,
    viewport: { width: number; height: number } = DESKTOP,
  ): Promise<{ page: Page; dialogs: string[]; close: () => Promise<void> }> => {
    const { context, page, dialogs } = await newPage(browser, viewport);
    await signIn(page, server.url, token);
    return { page, dialogs, close: () => context.close() };
  };
  const expectAccessible = async (page: Page): Promise<void> => {
    expect(await seriousViolations(page)).toEqual([]);
  };

  beforeAll(async () => {
    expectBwrapInstalled();
    store = openCliStore('hf-inspector-');
    for (const user of ['alice', 'bob']) await store.holdfast(['user', 'add', user, '--role', 'member', '--tenant', 'default']);
    service = (await store.holdfast(['token', 'create', '--name', 'inspector-test'])).trim();
    alice = (await store.holdfast(['token', 'create', '--user', 'alice'])).trim();
    bob = (await store.holdfast(['token', 'create', '--user', 'bob'])).trim();
    // Repository bindings clone only from hosts the operator allows: here the loopback git daemon.
    gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-inspector-repo-'));
    daemon = await startGitDaemon(gitRoot);
    Object.assign(store.env, {
      HOLDFAST_GIT_ALLOWED_HOSTS: '127.0.0.1',
      HOLDFAST_GIT_PROTOCOLS: 'git',
      HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES: 'true',
    });
    server = await store.serve();
    const deployment = await api('POST', '/v1/deployments', { provider: 'bwrap' });
    // Binding alice's folder needs alice's consent: the run is created with her token.
    runId = (await api('POST', '/v1/runs', { deploymentId: deployment.id, bindings: { task: 'T1', user: 'alice' } }, alice)).id;
    await turn(
      `mkdir -p src && printf 'hello\\n' > src/a.txt && base64 -d > pic.png && printf '%s' '${HOSTILE_HTML}' > page.html && : > '${HOSTILE_NAME}'`,
      PNG.toString('base64'),
    );
    // A recovery: the sandbox goes behind Holdfast's back; the next turn replaces and restores it.
    const { sandbox } = await api('GET', `/v1/runs/${runId}`);
    await store.holdfast(['sandbox', 'destroy', '--provider', 'bwrap', sandbox.id]);
    lastCheckpoint = (await turn(`printf 'more\\n' >> src/a.txt`)).checkpoint.id;
    for (const [file, text] of [
      ['docs/a.md', '# A\n'],
      ['docs/b.md', '# B\n'],
      ['notes.txt', 'notes\n'],
      [`odd/${HOSTILE_NAME}`, 'hostile\n'],
    ] as const)
      await upload('task', 'T1', file, text);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await daemon?.close();
    if (gitRoot !== undefined) fs.rmSync(gitRoot, { recursive: true, force: true });
    store?.cleanup();
  });

  it('serves the page with a strict CSP and nothing from elsewhere', async () => {
    const response = await fetch(`${server.url}/ui/`);
    expect(response.status).toBe(200);
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('x-frame-options')).toBe('DENY');
    const html = await response.text();
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/<script>/);
    expect((await fetch(`${server.url}/ui/nope.js`)).status).toBe(404);
  });

  it('signs in with a service token, finds the run, sorts and filters the list; measures weight and first render', async () => {
    const { context, page } = await newPage(browser);
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    const started = Date.now();
    await page.goto(`${server.url}/ui/`);
    await page.getByLabel('Bearer token').waitFor();
    const firstRender = Date.now() - started;
    const paint = (await page.evaluate(`performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null`)) as number | null;
    const transferred = (await page.evaluate(
      `performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource')).reduce((n, e) => n + e.transferSize, 0)`,
    )) as number;
    await screenshot(page, 'sign-in');
    await expectAccessible(page);

    await page.getByLabel('Bearer token').fill('hf_not_a_token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('does not accept this token');

    const signInStarted = Date.now();
    await page.getByLabel('Bearer token').fill(service);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const row = page.getByRole('row').filter({ hasText: runId.slice(0, 8) });
    await row.waitFor();
    const runsRender = Date.now() - signInStarted;
    await expect.poll(() => row.textContent()).toContain('ago');
    expect(await row.textContent()).toContain('bwrap');
    await page.getByLabel('Filter').fill(runId.slice(0, 8));
    expect(await page.getByRole('row').count()).toBe(2);
    await page.getByLabel('Filter').fill('no-such-run');
    await page.getByText('No run matches the filter.').waitFor();
    await page.getByLabel('Filter').fill('');
    await page.getByRole('button', { name: /^Run/ }).click();
    expect(await page.getByRole('columnheader', { name: /^Run/ }).getAttribute('aria-sort')).toBe('ascending');
    expect(requests.every((u) => u.startsWith(server.url))).toBe(true);
    await screenshot(page, 'runs');
    await expectAccessible(page);
    const figures = {
      firstLoadBytes: transferred,
      timeToSignInFormMs: firstRender,
      firstContentfulPaintMs: paint,
      signInToRunsTableMs: runsRender,
    };
    fs.writeFileSync(path.join(INSPECTOR_ARTIFACTS, 'figures.json'), `${JSON.stringify(figures, null, 2)}\n`);
    console.log('inspector figures', figures);
    expect(transferred).toBeLessThan(100 * 1024);
    await context.close();
  });

  it("shows a run's turns and recorded recovery steps with durations, and its checkpoints", async () => {
    const { page, close } = await pageFor(service);
    await page.getByRole('link', { name: runId.slice(0, 8) }).click();
    const timeline = page.getByRole('list', { name: 'Timeline' });
    await timeline.waitFor();
    const text = (await timeline.textContent()) ?? '';
    for (const piece of ['Turn 1', 'Turn 2', 'Recovery', 'detect missing', 'create sandbox', 'restore', 'setup', 'validate', 'commit'])
      expect(text).toContain(piece);
    expect(text).toMatch(/\d+ ms/);
    const checkpoints = page.getByRole('table', { name: /Checkpoints/ });
    expect(await checkpoints.getByRole('row').count()).toBe(3);
    expect(await checkpoints.textContent()).toContain('turn');
    await page.getByText('Responsible user: ').getByRole('link', { name: 'alice' }).waitFor();
    await screenshot(page, 'run');
    await expectAccessible(page);
    await close();
  });

  it("shows a run's repository checkouts with their checkpoint state", async () => {
    const dir = gitRoot;
    const git = (args: string[], cwd = dir) =>
      execFileSync('git', args, {
        cwd,
        env: { ...process.env, GIT_AUTHOR_NAME: 'T', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 'T', GIT_COMMITTER_EMAIL: 't@x' },
      });
    git(['init', '-q', '--bare', 'origin.git']);
    git(['clone', '-q', path.join(dir, 'origin.git'), 'work']);
    fs.writeFileSync(path.join(dir, 'work', 'README.md'), '# repo\n');
    git(['add', 'README.md'], path.join(dir, 'work'));
    git(['commit', '-q', '-m', 'first'], path.join(dir, 'work'));
    git(['push', '-q', 'origin', 'HEAD'], path.join(dir, 'work'));
    const deployment = await api('POST', '/v1/deployments', { provider: 'bwrap' });
    const url = daemon.url('origin.git');
    const run = await api('POST', '/v1/runs', { deploymentId: deployment.id, bindings: { repos: [{ url, name: 'app' }] } });
    await api('POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'echo change >> "$HOME/repos/app/README.md"'] });
    const { page, close } = await pageFor(service);
    await page.goto(`${server.url}/ui/#/runs/${run.id}`);
    const facts = page.getByRole('region', { name: 'Run summary' });
    await facts.getByText('Repositories').waitFor();
    const text = (await facts.textContent()) ?? '';
    expect(text).toContain('app');
    expect(text).toContain(url);
    expect(text).toMatch(/saved · checkpointed/);
    await screenshot(page, 'run-repositories');
    await expectAccessible(page);
    await close();
  });

  it('browses a checkpoint, previews text and an image, downloads a verified file, diffs against the parent', async () => {
    const { page, close } = await pageFor(service);
    await page.goto(`${server.url}/ui/#/checkpoints/${lastCheckpoint}?run=${runId}`);
    await page.getByRole('link', { name: 'src/', exact: true }).click();
    await page.getByRole('link', { name: 'a.txt', exact: true }).click();
    await expect.poll(() => page.getByLabel('Contents of a.txt').textContent()).toBe('hello\nmore\n');
    await page.getByText('Verified: the bytes match').waitFor();
    await screenshot(page, 'checkpoint-text');

    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download src/a.txt (verified)' }).first().click(),
    ]);
    const saved = fs.readFileSync((await download.path()) ?? '');
    expect(sha256(saved)).toBe(sha256(Buffer.from('hello\nmore\n')));
    expect(download.suggestedFilename()).toBe('a.txt');

    await page.getByRole('link', { name: 'workspace' }).click();
    await page.getByRole('link', { name: 'pic.png', exact: true }).click();
    const image = page.getByRole('img', { name: 'Preview of pic.png' });
    await image.waitFor();
    await expect.poll(() => image.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBe(48);
    expect(await image.getAttribute('src')).toMatch(/^blob:/);
    const [png] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download pic.png (verified)' }).first().click(),
    ]);
    expect(sha256(fs.readFileSync((await png.path()) ?? ''))).toBe(sha256(PNG));

    const diff = page.getByRole('region', { name: 'Changes since the parent checkpoint' });
    await expect.poll(() => diff.textContent()).toContain('src/a.txt');
    expect(await diff.textContent()).toContain('modified');
    await screenshot(page, 'checkpoint-image');
    await expectAccessible(page);
    await close();
  });

  it('shows a hostile file name as text and previews HTML with its script kept from running', async () => {
    const { page, dialogs, close } = await pageFor(service);
    await page.evaluate(`window.__messages = []; addEventListener('message', (e) => window.__messages.push(String(e.data)))`);
    await page.goto(`${server.url}/ui/#/checkpoints/${lastCheckpoint}?run=${runId}`);
    await page.getByRole('link', { name: HOSTILE_NAME, exact: true }).waitFor();
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    await page.getByRole('link', { name: 'page.html', exact: true }).click();
    await expect.poll(() => page.getByLabel('Contents of page.html').textContent()).toBe(HOSTILE_HTML);
    await page.getByRole('button', { name: /Show rendered/ }).click();
    const frame = page.frameLocator('iframe[title="Rendered preview of page.html"]');
    await frame.locator('#static').waitFor();
    expect(await page.locator('iframe').getAttribute('sandbox')).toBe('');
    await page.waitForTimeout(500);
    expect(dialogs).toEqual([]);
    expect(await page.evaluate('window.__messages')).toEqual([]);
    await screenshot(page, 'checkpoint-html-preview');
    await close();
  });

  it("shows a checkpoint's hostile label and metadata as text, never as markup", async () => {
    const label = '<img src="x" onerror="alert(1)"> label';
    const made = await api('POST', `/v1/runs/${runId}/checkpoints`, { label, meta: { note: '<b onmouseover=alert(2)>bold</b>', n: 7 } });
    const { page, dialogs, close } = await pageFor(service);
    await page.goto(`${server.url}/ui/#/checkpoints/${made.id}?run=${runId}`);
    const facts = page.getByRole('region', { name: 'Checkpoint facts' });
    await expect.poll(() => facts.textContent()).toContain(label);
    expect(await facts.textContent()).toContain('note: <b onmouseover=alert(2)>bold</b>');
    expect(await facts.textContent()).toContain('n: 7');
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    expect(await page.locator('b[onmouseover]').count()).toBe(0);
    await page.waitForTimeout(300);
    expect(dialogs).toEqual([]);
    await close();
  });

  it('work folders: tabs, unbound and private scopes, select a directory, trash it, restore it, a collision refused', async () => {
    const { page, dialogs, close } = await pageFor(service);
    await page.goto(`${server.url}/ui/#/folders?run=${runId}&tab=task`);
    await page.getByText('saved copies can lag behind the agent’s edits').waitFor();
    const saveState = page.getByRole('region', { name: 'Save state' });
    await expect.poll(() => saveState.locator('[data-save-state]').count()).toBe(1);
    await page.getByText(/Listing refreshed .* \(every 15 s\) · save state checked .* \(every 5 s\)/).waitFor();
    const docs = page.getByRole('checkbox', { name: 'Select docs', exact: true });
    await docs.waitFor();
    await page.getByText(HOSTILE_NAME, { exact: true }).waitFor();
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    expect(await page.getByRole('button', { name: /to trash/ }).count()).toBe(0);

    await docs.check();
    expect(await page.getByRole('checkbox', { name: 'Select docs/a.md' }).isChecked()).toBe(true);
    expect(await page.getByRole('checkbox', { name: 'Select docs/b.md' }).isChecked()).toBe(true);
    await page.getByRole('checkbox', { name: 'Select docs/a.md' }).uncheck();
    expect(await docs.isChecked()).toBe(false);
    expect(await page.getByRole('button', { name: 'Move 1 item to trash' }).count()).toBe(1);
    await docs.check();
    await page.getByRole('checkbox', { name: 'Select notes.txt' }).check();
    await page.getByRole('button', { name: 'Move 2 items to trash' }).waitFor();
    await page.getByRole('checkbox', { name: 'Select notes.txt' }).uncheck();
    await screenshot(page, 'folders-selection');
    await page.getByRole('button', { name: 'Move 1 item to trash' }).click();
    await expect.poll(() => page.getByRole('checkbox', { name: 'Select docs', exact: true }).count()).toBe(0);
    const trash = await api('GET', '/api/companies/default/work-folders/task/T1?trash=true');
    expect(trash.files.map((f: { path: string }) => f.path).sort()).toEqual(['docs', 'docs/a.md', 'docs/b.md']);

    await page.getByRole('link', { name: 'Trash' }).click();
    await page.getByRole('button', { name: 'Restore docs' }).click();
    await page.getByText('The trash is empty.').waitFor();
    await page.getByRole('link', { name: 'Files' }).click();
    await page.getByRole('checkbox', { name: 'Select docs', exact: true }).check();
    await page.getByRole('button', { name: 'Move 1 item to trash' }).click();
    await expect.poll(() => page.getByRole('checkbox', { name: 'Select docs', exact: true }).count()).toBe(0);
    await upload('task', 'T1', 'docs/a.md', '# A, written again\n');
    await page.getByRole('link', { name: 'Trash' }).click();
    await page.getByRole('button', { name: 'Restore docs' }).click();
    await expect.poll(() => page.getByRole('alert').first().textContent()).toContain('collision');
    await screenshot(page, 'folders-trash-collision');
    await expectAccessible(page);

    await page.getByRole('link', { name: 'Files' }).click();
    await page.getByRole('button', { name: 'Preview notes.txt' }).click();
    await expect.poll(() => page.getByLabel('Contents of notes.txt').textContent()).toBe('notes\n');
    await screenshot(page, 'folders-files');

    await page.getByRole('tab', { name: 'Project' }).click();
    await page.getByText('No project is bound to this run. This folder is empty and unbound.').waitFor();
    await page.getByRole('tab', { name: 'Project' }).press('ArrowRight');
    await expect.poll(() => page.getByRole('tab', { name: 'Agent' }).getAttribute('aria-selected')).toBe('true');
    await page.getByRole('tab', { name: 'Responsible user' }).click();
    // A user collection is never reachable by a service token: the API answers 404, the page says private.
    await page.getByText('These files are private').waitFor();
    await screenshot(page, 'folders-private-service');
    expect(dialogs).toEqual([]);
    await close();
  });

  it("a user sees their own folder, never another user's, and no runs", async () => {
    const asAlice = await pageFor(alice);
    await asAlice.page.getByRole('tab', { name: 'Responsible user' }).waitFor();
    expect(await asAlice.page.getByRole('tab', { name: 'Responsible user' }).getAttribute('aria-selected')).toBe('true');
    await asAlice.page.getByText('No saved files in this folder.').waitFor();
    expect(await asAlice.page.getByRole('link', { name: 'Runs' }).count()).toBe(0);
    await asAlice.close();

    const asBob = await pageFor(bob);
    await asBob.page.getByLabel('Responsible user owner').fill('alice');
    await asBob.page.getByRole('button', { name: 'Open' }).click();
    await asBob.page.getByText('These files are private').waitFor();
    expect(await asBob.page.getByText('alice’s user folder is visible only to alice').count()).toBe(1);
    await asBob.page.waitForTimeout(500);
    expect(await asBob.page.getByRole('region', { name: 'Save state' }).locator('[data-save-state]').count()).toBe(0);
    await screenshot(asBob.page, 'folders-private-user');
    await expectAccessible(asBob.page);
    // The run views are service views: a person's token gets the work folders instead.
    await asBob.page.goto(`${server.url}/ui/#/runs/${runId}`);
    await asBob.page.getByRole('heading', { name: 'Work folders' }).waitFor();
    expect(await asBob.page.getByText(runId).count()).toBe(0);
    await asBob.close();
  });

  it('refuses dot segments as ids in a route: a not-found view, and no request leaves the page', async () => {
    for (const [token, hashes] of [
      [
        service,
        [
          '#/runs/..',
          '#/runs/%2E%2E',
          '#/runs/.',
          '#/checkpoints/..',
          '#/checkpoints/.%2e?run=..',
          `#/checkpoints/${lastCheckpoint}?run=..`,
          '#/folders?run=..&tab=task',
          '#/folders?task=..&tab=task',
          '#/folders?project=.&tab=project',
        ],
      ],
      [alice, ['#/folders?user=..&tab=user', '#/folders?task=%2e%2e&tab=task']],
    ] as const) {
      const { page, close } = await pageFor(token);
      // Off the start view first: what it still fetches (its list, its polls) is not counted.
      await page.goto(`${server.url}/ui/#/folders?task=..`);
      await page.getByRole('heading', { name: 'Not found' }).waitFor();
      await page.waitForTimeout(500);
      const requests: string[] = [];
      page.on('request', (r) => {
        const url = new URL(r.url());
        if (!url.pathname.startsWith('/ui/')) requests.push(url.pathname);
      });
      for (const hash of hashes) {
        await page.goto(`${server.url}/ui/${hash}`);
        await page.getByRole('heading', { name: 'Not found' }).waitFor();
        await page.waitForTimeout(200);
        expect(
          requests.filter((p) => p !== '/api/whoami'),
          hash,
        ).toEqual([]);
        requests.length = 0;
      }
      await screenshot(page, 'not-found-dot-segment');
      await expectAccessible(page);
      await close();
    }
  });

  it('reads well in a narrow window: no sideways scrolling of the page', async () => {
    const { page, close } = await pageFor(service, NARROW);
    const noOverflow = () => page.evaluate('document.documentElement.scrollWidth <= window.innerWidth');
    await page
      .getByRole('row')
      .filter({ hasText: runId.slice(0, 8) })
      .waitFor();
    expect(await noOverflow()).toBe(true);
    await screenshot(page, 'narrow-runs');
    await page.goto(`${server.url}/ui/#/runs/${runId}`);
    await page.getByRole('list', { name: 'Timeline' }).waitFor();
    expect(await noOverflow()).toBe(true);
    await screenshot(page, 'narrow-run');
    await page.goto(`${server.url}/ui/#/folders?run=${runId}&tab=task`);
    await page.getByRole('checkbox', { name: 'Select notes.txt' }).waitFor();
    expect(await noOverflow()).toBe(true);
    await screenshot(page, 'narrow-folders');
    expect((await axeViolations(page)).filter((v) => v.impact === 'critical')).toEqual([]);
    await close();
  });
});
