import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import type { Fleet, Replica } from './fleet.js';
import type { SeededRandom } from './rng.js';
import type { S3Chaos, S3ChaosKind } from './s3-chaos.js';

const run = promisify(execFile);

/** Every fault the driver injects. */
export type FaultKind =
  | 'kill-9'
  | 'sigstop'
  | 'pg-terminate'
  | 'pg-restart'
  | S3ChaosKind
  | 'sandbox-destroy'
  | 'cache-full'
  | 'gc-zero-grace';

/** One injected fault, as logged (and reproduced by the seed). */
export interface FaultRecord {
  readonly atMs: number;
  readonly kind: FaultKind;
  readonly target: string;
}

/** What the fault driver may touch. */
export interface FaultContext {
  readonly fleet: Fleet;
  readonly chaos: S3Chaos;
  readonly dbName: string;
  readonly adminUrl: string;
  readonly sandboxRoot: string;
  readonly kinds: readonly FaultKind[];
  /** Runs the CLI against the fleet's stores; resolves with the exit code. */
  readonly holdfast: (args: readonly string[]) => Promise<number>;
  readonly log: (line: string) => void;
}

/**
 * Injects one fault after another, the kind, target and timing drawn from `random`, until
 * `stopAt`; each fault is undone (replica restarted or thawed, window closed, cache emptied)
 * before the next, so the fleet never loses more than one replica at a time. Returns the log.
 */
export async function injectFaults(ctx: FaultContext, random: SeededRandom, stopAt: () => boolean): Promise<FaultRecord[]> {
  const started = Date.now();
  const faults: FaultRecord[] = [];
  const ttl = ctx.fleet.timings.leaseTtlMs;
  // Kinds come in rounds, each a seeded shuffle of all of them, so every kind is injected early.
  const round: FaultKind[] = [];
  while (!stopAt()) {
    await sleep(random.int(500, 2500));
    if (stopAt()) break;
    if (ctx.kinds.length === 0) continue;
    if (round.length === 0) round.push(...shuffle(ctx.kinds, random));
    const kind = round.shift() as FaultKind;
    const replica = random.pick(ctx.fleet.replicas);
    await apply(ctx, random, kind, replica, ttl, (t) => {
      const entry = { atMs: Date.now() - started, kind, target: t };
      faults.push(entry);
      ctx.log(`fault ${entry.atMs}ms ${kind} ${t}`);
    });
  }
  return faults;
}

async function apply(
  ctx: FaultContext,
  random: SeededRandom,
  kind: FaultKind,
  replica: Replica,
  ttl: number,
  logged: (target: string) => void,
): Promise<string | undefined> {
  const { fleet } = ctx;
  switch (kind) {
    case 'kill-9': {
      if (replica.url === undefined) return undefined;
      logged(`replica ${replica.index}`);
      await fleet.kill(replica);
      await sleep(random.int(200, 2000));
      await fleet.launch(replica);
      return '';
    }
    case 'sigstop': {
      if (replica.url === undefined) return undefined;
      logged(`replica ${replica.index}`);
      fleet.freeze(replica);
      // Past the lease TTL half the time, so its leases are taken over and its late writes fenced.
      await sleep(random.chance(0.5) ? ttl + random.int(500, 2000) : random.int(200, ttl / 2));
      fleet.thaw(replica);
      return '';
    }
    case 'pg-terminate': {
      logged(ctx.dbName);
      await terminateBackends(ctx.adminUrl, ctx.dbName);
      return '';
    }
    case 'pg-restart': {
      logged('pg_ctlcluster 15 main restart');
      await run('pg_ctlcluster', ['15', 'main', 'restart']);
      return '';
    }
    case 's3-500':
    case 's3-503':
    case 's3-slow':
    case 's3-drop-upload': {
      const ms = random.int(1000, 4000);
      logged(`${ms}ms`);
      ctx.chaos.open(kind, ms);
      await sleep(ms);
      ctx.chaos.close();
      return '';
    }
    case 'sandbox-destroy': {
      const provider = new BwrapSandboxProvider({ root: ctx.sandboxRoot });
      const sandboxes = await provider.list();
      if (sandboxes.length === 0) return undefined;
      const sandbox = random.pick(sandboxes);
      logged(`${sandbox.id} (run ${sandbox.labels['holdfast.run'] ?? '?'})`);
      await provider.destroy(sandbox.id).catch((error: unknown) => ctx.log(`sandbox destroy: ${String(error)}`));
      return '';
    }
    case 'cache-full': {
      if (!replica.cacheTmpfs) return undefined;
      logged(`replica ${replica.index}`);
      const filler = path.join(replica.cacheDir, 'soak-filler');
      fillUp(filler);
      await sleep(random.int(1000, 4000));
      fs.rmSync(filler, { force: true });
      return '';
    }
    case 'gc-zero-grace': {
      logged('holdfast gc --grace 0s');
      const code = await ctx.holdfast(['gc', '--grace', '0s', '--keep-last', '1000000']);
      ctx.log(`gc exit ${code}`);
      return '';
    }
  }
}

function shuffle<T>(items: readonly T[], random: SeededRandom): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i -= 1) {
    const j = random.int(0, i);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** Writes `file` until the file system answers ENOSPC. */
function fillUp(file: string): void {
  const block = Buffer.alloc(1024 * 1024, 0x5a);
  const fd = fs.openSync(file, 'w');
  try {
    for (;;) fs.writeSync(fd, block);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    fs.closeSync(fd);
  }
}

/** Ends every connection to the soak's own database (other databases on the server are left alone). */
export async function terminateBackends(adminUrl: string, dbName: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName]);
  } finally {
    await client.end();
  }
}
