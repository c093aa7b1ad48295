/**
 * The inspector's save-state label in a real browser, driven by real saves of a bwrap run's
 * task folder: Waiting for first save -> Saving… -> Saved, and Save failed with the error and a
 * link to the run when the blob store refuses the save.
 *
 * It needs the per-collection save state route `GET …/work-folders/:scope/:ownerId/sync`
 * (answering `{sandboxes: [{runId, sandbox, state, lastSavedAt, finalCheckpointAt, error,
 * refresh, active}]}`) and the work-folder sync of runs (the task folder hydrated at
 * `$HOME/task/` in the sandbox, saved before each checkpoint). Until both are in, this file is
 * listed in `vitest.config.ts` `exclude`; remove it from there to run it.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, type RunningServer } from '../src/server/http-server.js';
import { BACKENDS } from './support/backends.js';
import { launchChromium, newPage, screenshot, signIn } from './support/inspector-browser.js';
import { openTestService, type TestService } from './support/service.js';

/** Time the page has to show a state: more than two save-state polls. */
const LABEL_TIMEOUT_MS = 20_000;

describe('inspector save state (needs the work-folder sync route)', () => {
  let svc: TestService;
  let server: RunningServer;
  let browser: Browser;
  let deploymentId: string;

  beforeAll(async () => {
    const backend = BACKENDS[0];
    if (backend === undefined) throw new Error('no backend');
    svc = await openTestService(backend, { settings: { checkpointIntervalMs: 0 } });
    server = await listen(svc.app, { host: '127.0.0.1', port: 0 });
    deploymentId = (await svc.api('POST', '/v1/deployments', { ...svc.deploymentBase })).body.id;
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await svc?.close();
  });

  const label = (page: import('playwright-core').Page) => page.getByRole('region', { name: 'Save state' }).locator('[data-save-state]');

  it('goes from Waiting for first save to Saving… to Saved', async () => {
    const run = (await svc.api('POST', '/v1/runs', { deploymentId, bindings: { task: 'T-sync' } })).body;
    const { context, page } = await newPage(browser);
    await signIn(page, server.url, svc.token);
    await page.goto(`${server.url}/ui/#/folders?run=${run.id}&tab=task`);
    // The turn holds its sandbox (attached, nothing saved yet) while it sleeps; its save is then
    // held until the browser has shown it in flight.
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slowSave = svc.faults.inject({ ops: ['put'], times: Number.POSITIVE_INFINITY, fault: { kind: 'hold', until: held } });
    const turn = svc.api('POST', `/v1/runs/${run.id}/turns`, {
      argv: ['sh', '-c', 'sleep 8; echo saved > "$HOME/task/notes.txt"'],
      timeoutMs: 120_000,
    });
    await expect.poll(() => label(page).textContent(), { timeout: LABEL_TIMEOUT_MS }).toBe('Waiting for first save');
    await screenshot(page, 'sync-waiting');
    await expect.poll(() => label(page).textContent(), { timeout: LABEL_TIMEOUT_MS }).toBe('Saving…');
    await screenshot(page, 'sync-saving');
    slowSave();
    release();
    expect((await turn).status).toBe(200);
    await expect.poll(() => label(page).textContent(), { timeout: LABEL_TIMEOUT_MS }).toBe('Saved');
    await page.getByText(/Last agent save: \d/).waitFor();
    await page.getByRole('checkbox', { name: 'Select notes.txt' }).waitFor({ timeout: LABEL_TIMEOUT_MS });
    await screenshot(page, 'sync-saved');
    await context.close();
  });

  it('shows Save failed with the error and a link to the run when the store refuses the save', async () => {
    const run = (await svc.api('POST', '/v1/runs', { deploymentId, bindings: { task: 'T-fail' } })).body;
    const { context, page } = await newPage(browser);
    await signIn(page, server.url, svc.token);
    await page.goto(`${server.url}/ui/#/folders?run=${run.id}&tab=task`);
    const broken = svc.faults.inject({ ops: ['put'], times: Number.POSITIVE_INFINITY, fault: { kind: 'error' } });
    const turn = await svc.api('POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'echo lost > "$HOME/task/notes.txt"'] });
    broken();
    expect(turn.status).not.toBe(200);
    await expect.poll(() => label(page).textContent(), { timeout: LABEL_TIMEOUT_MS }).toBe('Save failed');
    const region = page.getByRole('region', { name: 'Save state' });
    expect(await region.getByRole('alert').textContent()).toContain('STORE_UNAVAILABLE');
    // The link says what it opens; the run's id stands beside it.
    const alert = region.getByRole('alert');
    expect(await alert.getByRole('link', { name: "View the failed save's run" }).getAttribute('href')).toBe(`#/runs/${run.id}`);
    expect(await alert.textContent()).toContain(run.id);
    await screenshot(page, 'sync-failed');
    await context.close();
  });
});
