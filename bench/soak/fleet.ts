import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { openMetadataStore } from '../../src/metadata/metadata-store.js';
import { generateToken, hashToken } from '../../src/tenants/tokens.js';
import { HOLDFAST_BIN } from '../../test/support/serve-process.js';

const run = promisify(execFile);

/** How long a replica may take to print its listening line. */
const LISTEN_TIMEOUT_MS = 30_000;
/** Lines of each replica's output kept for a failure report. */
const LOG_TAIL_LINES = 300;
/** Size of each replica's cache tmpfs (stat caches and restore staging). */
export const CACHE_TMPFS_BYTES = 32 * 1024 * 1024;

/** Serve settings short enough that leases expire, saves and sweeps happen within a soak. */
export interface FleetTimings {
  readonly leaseTtlMs: number;
  readonly checkpointIntervalMs: number;
  readonly gcSweepIntervalMs: number;
  readonly straySweepIntervalMs: number;
}

/** One `holdfast serve` process of the fleet (restarted in place after a kill). */
export interface Replica {
  readonly index: number;
  readonly cacheDir: string;
  /** Whether its cache directory is a tmpfs of its own (so it can be filled up). */
  readonly cacheTmpfs: boolean;
  child: ChildProcess | undefined;
  url: string | undefined;
  stopped: boolean;
  /** Set before the soak itself ends the process, so its exit is not taken for a crash. */
  expectExit: boolean;
  readonly log: string[];
  starts: number;
}

/** The environment every replica, and the CLI the checker runs, shares. */
export interface FleetStores {
  readonly dbUrl: string;
  readonly blobsUrl: string;
  readonly sandboxDir: string;
  readonly env: Record<string, string>;
}

/** Several replicas on one database, one bucket and one sandbox directory. */
export class Fleet {
  readonly replicas: Replica[] = [];
  /** Replicas that exited without being killed or stopped by the soak, with their last output. */
  readonly crashes: { index: number; exit: string; tail: string[] }[] = [];
  /** Called when a replica exits by itself. */
  onCrash: (index: number, exit: string) => void = () => {};
  token = '';

  constructor(
    readonly dir: string,
    readonly stores: FleetStores,
    readonly timings: FleetTimings,
  ) {}

  /** Creates the tenant `default` and a service token in the fresh database. */
  async createToken(): Promise<void> {
    const meta = await openMetadataStore({ kind: 'postgres', url: this.stores.dbUrl });
    try {
      const tenant = await meta.tenants.create({ name: 'default' });
      this.token = generateToken();
      await meta.tokens.create({ tenantId: tenant.id, name: 'soak', hash: hashToken(this.token), admin: false });
    } finally {
      await meta.close();
    }
  }

  /** Starts `count` replicas, each with its cache on a small tmpfs when mounting one works here. */
  async start(count: number): Promise<void> {
    for (let index = 0; index < count; index += 1) {
      const cacheDir = path.join(this.dir, `cache-${index}`);
      fs.mkdirSync(cacheDir, { recursive: true });
      const cacheTmpfs = await mountTmpfs(cacheDir);
      const replica: Replica = {
        index,
        cacheDir,
        cacheTmpfs,
        child: undefined,
        url: undefined,
        stopped: false,
        expectExit: false,
        log: [],
        starts: 0,
      };
      this.replicas.push(replica);
      await this.launch(replica);
    }
  }

  /** Starts (or restarts) one replica's process and waits for it to listen. */
  async launch(replica: Replica): Promise<void> {
    const { leaseTtlMs, checkpointIntervalMs, gcSweepIntervalMs, straySweepIntervalMs } = this.timings;
    const args = [
      HOLDFAST_BIN,
      'serve',
      '--port',
      '0',
      '--lease-ttl-ms',
      String(leaseTtlMs),
      '--checkpoint-interval-ms',
      String(checkpointIntervalMs),
      '--gc-sweep-interval-ms',
      String(gcSweepIntervalMs),
      '--stray-sweep-interval-ms',
      String(straySweepIntervalMs),
      '--shutdown-deadline-ms',
      '5000',
    ];
    const child = spawn(process.execPath, args, {
      env: { ...this.stores.env, HOLDFAST_CACHE_DIR: replica.cacheDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    replica.child = child;
    replica.url = undefined;
    replica.expectExit = false;
    replica.stopped = false;
    replica.starts += 1;
    const keep = (line: string): void => {
      replica.log.push(line);
      if (replica.log.length > LOG_TAIL_LINES) replica.log.splice(0, replica.log.length - LOG_TAIL_LINES);
    };
    replica.url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`replica ${replica.index} did not listen:\n${replica.log.join('\n')}`)),
        LISTEN_TIMEOUT_MS,
      );
      let buffered = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          keep(line);
          if (line.includes('"msg":"listening"')) {
            const parsed = JSON.parse(line) as { url?: string };
            if (parsed.url !== undefined) {
              clearTimeout(timer);
              resolve(parsed.url);
            }
          }
        }
      });
      child.stderr?.on('data', (chunk: Buffer) => keep(chunk.toString('utf8')));
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        keep(`exited: ${code ?? signal}`);
        if (!replica.expectExit && replica.child === child) {
          replica.url = undefined;
          this.crashes.push({ index: replica.index, exit: String(code ?? signal), tail: replica.log.slice(-40) });
          this.onCrash(replica.index, String(code ?? signal));
        }
        reject(new Error(`replica ${replica.index} exited (${code ?? signal}) before listening:\n${replica.log.join('\n')}`));
      });
    });
  }

  /** Replicas that are running and not frozen. */
  live(): Replica[] {
    return this.replicas.filter((r) => r.url !== undefined && !r.stopped && r.child?.exitCode === null && r.child.signalCode === null);
  }

  /** kill -9; the replica is down until {@link launch}. */
  async kill(replica: Replica): Promise<void> {
    const child = replica.child;
    replica.url = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    replica.expectExit = true;
    if (replica.stopped) child.kill('SIGCONT');
    child.kill('SIGKILL');
    replica.stopped = false;
    await exited;
  }

  freeze(replica: Replica): void {
    replica.child?.kill('SIGSTOP');
    replica.stopped = true;
  }

  thaw(replica: Replica): void {
    replica.child?.kill('SIGCONT');
    replica.stopped = false;
  }

  /** SIGTERM every replica (SIGKILL after 20 s), unmount the caches. */
  async stop(): Promise<void> {
    await Promise.all(
      this.replicas.map(async (replica) => {
        const child = replica.child;
        if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
        replica.expectExit = true;
        if (replica.stopped) child.kill('SIGCONT');
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        child.kill('SIGTERM');
        await exited;
        clearTimeout(timer);
      }),
    );
    for (const replica of this.replicas) if (replica.cacheTmpfs) await run('umount', [replica.cacheDir]).catch(() => {});
  }
}

/** Mounts a tmpfs of {@link CACHE_TMPFS_BYTES} at `dir`; false (and nothing mounted) when not allowed here. */
async function mountTmpfs(dir: string): Promise<boolean> {
  if (process.getuid?.() !== 0) return false;
  try {
    await run('mount', ['-t', 'tmpfs', '-o', `size=${CACHE_TMPFS_BYTES}`, 'tmpfs', dir]);
    return true;
  } catch {
    return false;
  }
}
