/**
 * Recovery timeline: a run's bwrap sandbox is destroyed behind Holdfast's back, and the next
 * turn rebuilds it (detect, create, restore the head through the agent, setup, validate,
 * commit) before its body starts. Reports the median of `--runs` (default 5) for every step and
 * for "sandbox gone -> turn body running", against a reference measured in the same run: a new
 * sandbox plus `zstd -dc | tar -x` of the same workspace onto its disk (no verification, no
 * agent). `--scale small|full` picks the workspace (workload A of the snapshot bench).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, openHoldfast } from '../src/index.js';
import { type BwrapSandboxHandle, BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { median, printTable, timeMs } from './stats.js';
import { generateWorkloadA } from './workspace-gen.js';

const runs = Number(process.argv[process.argv.indexOf('--runs') + 1]) || 5;
const json = process.argv.includes('--json');
const scale = process.argv.includes('--scale') && process.argv[process.argv.indexOf('--scale') + 1] === 'full' ? 'full' : 'small';

/** Pause after deleting a sandbox, so every measurement starts with the disk at rest. */
const SETTLE_MS = 3000;

async function settle(): Promise<void> {
  execFileSync('sync');
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
}

async function main(): Promise<void> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-bench-recovery-'));
  const provider = new BwrapSandboxProvider({ root: path.join(tmp, 'sandboxes') });
  const hf = await openHoldfast({
    config: loadConfig({ store: path.join(tmp, 'store') }),
    cacheDir: path.join(tmp, 'cache'),
    providers: () => provider,
  });
  try {
    const source = path.join(tmp, 'workspace');
    const manifest = await generateWorkloadA(source, 1, scale);
    const tarball = path.join(tmp, 'ws.tar.zst');
    execFileSync('sh', ['-c', `tar -C "${source}" -cf - . | zstd -q -3 -o "${tarball}"`]);

    const deployment = await hf.deployments.create({ provider: 'bwrap', setup: [['sh', '-c', 'echo ready > /home/agent/ready']] });
    const run = await hf.runs.create({ deploymentId: deployment.id });
    // Put the workspace into the run's sandbox, then let a turn checkpoint it.
    await hf.runs.turn(run.id, async ({ sandbox }) => {
      const disk = (sandbox as BwrapSandboxHandle).hostDiskPath;
      fs.rmSync(path.join(disk, 'workspace'), { recursive: true, force: true });
      fs.cpSync(source, path.join(disk, 'workspace'), { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
    });

    const steps = new Map<string, number[]>();
    const total: number[] = [];
    const reference: number[] = [];
    for (let i = 0; i < runs; i += 1) {
      const before = (await hf.runs.events(run.id, 1000)).length;
      const gone = (await hf.runs.get(run.id)).sandbox?.id ?? '';
      await provider.destroy(gone);
      // The sandbox vanished elsewhere: its deletion's disk work (TRIM on this VM's disk slowed
      // file creation 2x for seconds) must not be billed to the recovery.
      await settle();
      const started = performance.now();
      let bodyAt = 0;
      await hf.runs.turn(run.id, async () => {
        bodyAt = performance.now() - started;
      });
      total.push(bodyAt);
      const recovery = (await hf.runs.events(run.id, 1000)).slice(before).filter((e) => e.kind === 'recovery');
      for (const e of recovery) steps.set(e.step, [...(steps.get(e.step) ?? []), e.durationMs ?? 0]);
      const accounted = recovery.reduce((sum, e) => sum + (e.durationMs ?? 0), 0);
      steps.set('other (lease, lookups, turn row)', [...(steps.get('other (lease, lookups, turn row)') ?? []), bodyAt - accounted]);

      let fresh: BwrapSandboxHandle | undefined;
      reference.push(
        await timeMs(async () => {
          fresh = (await provider.create()) as BwrapSandboxHandle;
          execFileSync('sh', ['-c', `zstd -q -dc "${tarball}" | tar -C "${path.join(fresh.hostDiskPath, 'workspace')}" -xf -`]);
        }),
      );
      await provider.destroy(fresh?.id ?? '');
      await settle();
      process.stderr.write(`[recovery] run ${i + 1}/${runs} done\n`);
    }

    const rows = [...steps.entries()].map(([step, xs]) => [step, median(xs).toFixed(0)]);
    rows.push(['sandbox gone -> turn body running', median(total).toFixed(0)]);
    rows.push(['reference: new sandbox + zstd -dc | tar -x', median(reference).toFixed(0)]);
    rows.push(['ratio holdfast / reference', (median(total) / median(reference)).toFixed(2)]);
    if (json)
      process.stdout.write(
        `${JSON.stringify({ files: manifest.files, bytes: manifest.bytes, steps: Object.fromEntries(steps), total, reference })}\n`,
      );
    else
      printTable(
        `Recovery timeline (${manifest.files} files, ${(manifest.bytes / 1e6).toFixed(0)} MB, bwrap, local disk + SQLite; medians of ${runs})`,
        ['step', 'ms'],
        rows,
      );
  } finally {
    await hf.close();
    for (const s of await provider.list()) await provider.destroy(s.id);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
