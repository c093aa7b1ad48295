import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Holdfast, openHoldfast } from '../src/index.js';
import { ObjectReader } from '../src/objects/object-reader.js';
import type { SandboxProvider } from '../src/sandbox/sandbox-provider.js';
import { walkReachable } from '../src/snapshot/reachability.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { BWRAP_RUNS, dockerRuns, type RunProviderCase } from './support/run-providers.js';

/**
 * Deployment bundles through the run lifecycle (issue 17): every new sandbox of a run gets its
 * deployment's bundle before setup, never from a checkpoint; recovery puts it back byte for
 * byte; an upgrade brings the new deployment's bundle and none of the old one.
 */

const sh = (script: string) => ['sh', '-c', script];
/** `mode size path` of every file under `$HOLDFAST_BUNDLE_DIR`, sorted. */
const LIST = 'cd "$HOLDFAST_BUNDLE_DIR" && find . -type f | sort | while read -r p; do stat -c "%a %s $p" "$p"; done';

const PROVIDERS: readonly RunProviderCase[] = [BWRAP_RUNS, dockerRuns('runbundles')];

describe.each(PROVIDERS)('deployment bundles in runs on $name', (providerCase) => {
  let opened: OpenedBackends;
  let provider: SandboxProvider;
  let hf: Holdfast;

  beforeAll(async () => {
    opened = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    provider = providerCase.open(opened.dir);
    hf = await openHoldfast({
      blobs: opened.blobs,
      meta: opened.meta,
      cacheDir: path.join(opened.dir, 'cache'),
      providers: () => provider,
    });
  });
  afterAll(async () => {
    await hf?.close();
    for (const s of (await provider?.list()) ?? []) await provider.destroy(s.id);
    await opened?.cleanup();
  });

  const bundleDir = (name: string, files: Record<string, [string, number]>): string => {
    const dir = path.join(opened.dir, name);
    for (const [rel, [content, mode]] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      fs.writeFileSync(path.join(dir, rel), content);
      fs.chmodSync(path.join(dir, rel), mode);
    }
    return dir;
  };
  const deployment = async (name: string, files: Record<string, [string, number]>, setup: string[][] = []) => {
    const image = providerCase.image();
    const bundle = await hf.bundles.capture(bundleDir(name, files));
    return hf.deployments.create({ provider: providerCase.name, ...(image === null ? {} : { image }), bundle, setup });
  };

  it('the first turn sees the bundle (before setup ran); recovery restores it byte for byte; no bundle byte is in a workspace checkpoint', async () => {
    const one = await deployment(
      'one',
      { 'bin/tool.sh': ['#!/bin/sh\necho tool-one\n', 0o755], 'skills/a.md': ['skill a, bundle one\n', 0o644] },
      [sh('wc -c < "$HOLDFAST_BUNDLE_DIR/skills/a.md" > setup-saw.txt')],
    );
    const run = await hf.runs.create({ deploymentId: one.id });
    const first = await hf.runs.turn(run.id, async ({ sandbox }) => {
      const listed = await sandbox.run(sh(LIST));
      const tool = await sandbox.run(sh('"$HOLDFAST_BUNDLE_DIR/bin/tool.sh"'));
      // The agent makes the bundle its own and edits it, and writes a file of its own into the workspace.
      await sandbox.run(
        sh('chmod -R u+w "$HOLDFAST_BUNDLE_DIR" && printf evil > "$HOLDFAST_BUNDLE_DIR/skills/a.md"; echo mine > mine.txt'),
      );
      return { listed: listed.stdout.toString(), tool: tool.stdout.toString() };
    });
    expect(first.value.listed).toBe('555 24 ./bin/tool.sh\n444 20 ./skills/a.md\n');
    expect(first.value.tool).toBe('tool-one\n');
    const events = await hf.runs.events(run.id);
    const steps = events.filter((e) => e.kind === 'create').map((e) => e.step);
    expect(steps.indexOf('bundle')).toBeGreaterThan(-1);
    expect(steps.indexOf('bundle')).toBeLessThan(steps.indexOf('setup'));
    expect(events.find((e) => e.step === 'bundle')?.durationMs).toBeGreaterThanOrEqual(0);

    // Nothing of the bundle is in the run's checkpoint: only the agent's files.
    const reader = new ObjectReader(opened.blobs, opened.meta);
    const workspace = await walkReachable(reader, [first.checkpoint.rootTree as string]);
    const bundle = await walkReachable(reader, [one.spec.bundle?.rootTree as string]);
    expect([...bundle.data].filter((id) => workspace.data.has(id))).toEqual([]);
    const root = await hf.checkpoints.ls(first.checkpoint.id);
    expect(root.kind === 'dir' && root.entries.map((e) => e.name)).toEqual(['mine.txt', 'setup-saw.txt']);

    await provider.destroy((await hf.runs.get(run.id)).sandbox?.id ?? '');
    const second = await hf.runs.turn(run.id, ({ sandbox }) =>
      sandbox.run(sh(`cat "$HOLDFAST_BUNDLE_DIR/skills/a.md" mine.txt setup-saw.txt; ${LIST}`)),
    );
    expect(second.value.stdout.toString()).toBe('skill a, bundle one\nmine\n20\n555 24 ./bin/tool.sh\n444 20 ./skills/a.md\n');
    const recovery = (await hf.runs.events(run.id)).filter((e) => e.kind === 'recovery').map((e) => e.step);
    expect(recovery).toContain('bundle');
  });

  it('an upgrade brings the new deployment bundle and none of the old; moving back brings the old one back; the workspace is unchanged', async () => {
    const one = await deployment('up-one', { 'old.txt': ['old bundle\n', 0o644] });
    const two = await deployment('up-two', { 'new/new.txt': ['new bundle\n', 0o644] });
    const run = await hf.runs.create({ deploymentId: one.id });
    await hf.runs.turn(run.id, ({ sandbox }) => sandbox.run(sh('echo kept > work.txt')));
    await hf.runs.upgrade(run.id, { deploymentId: two.id });
    const after = await hf.runs.turn(run.id, ({ sandbox }) => sandbox.run(sh(`cat work.txt; ${LIST}`)));
    expect(after.value.stdout.toString()).toBe('kept\n444 11 ./new/new.txt\n');
    expect((await hf.runs.events(run.id)).filter((e) => e.kind === 'upgrade').map((e) => e.step)).toContain('bundle');
    await hf.runs.upgrade(run.id, { deploymentId: one.id });
    const back = await hf.runs.turn(run.id, ({ sandbox }) => sandbox.run(sh(`cat work.txt; ${LIST}`)));
    expect(back.value.stdout.toString()).toBe('kept\n444 11 ./old.txt\n');
  });
});
