import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { removeTree } from '../../workspace-fs/remove-tree.js';

/** What every restore staging directory's name holds after `.<target name>`. */
export const STAGING_MARK = '.holdfast-staging-';

/** Who owns a staging directory: enough to tell, later, whether that restore is still running. */
interface StagingRecord {
  readonly staging: string;
  readonly host: string;
  readonly pid: number;
  /** The owner's start time in clock ticks since boot (`/proc/<pid>/stat`), so a reused pid is not mistaken for it. */
  readonly startTicks: string | null;
}

const registryDir = (cacheDir: string): string => path.join(cacheDir, 'staging');
const recordFile = (cacheDir: string, staging: string): string =>
  path.join(registryDir(cacheDir), `${createHash('sha256').update(staging).digest('hex').slice(0, 32)}.json`);
const stagingPrefix = (target: string): string => `.${path.basename(target)}${STAGING_MARK}`;

function startTicks(pid: number): string | null {
  try {
    // Field 22 of /proc/<pid>/stat, counted after the parenthesised command name (which may hold spaces).
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** True unless the record's owner is known to be gone: same host, and no process with its pid and start time. */
function ownerAlive(record: StagingRecord): boolean {
  if (record.host !== os.hostname()) return true;
  try {
    process.kill(record.pid, 0);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ESRCH') return false;
  }
  return record.startTicks === null || startTicks(record.pid) === record.startTicks;
}

function readRecord(file: string): StagingRecord | undefined {
  try {
    const r = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<StagingRecord>;
    if (typeof r.staging !== 'string' || typeof r.host !== 'string' || !Number.isSafeInteger(r.pid)) return undefined;
    return r as StagingRecord;
  } catch {
    return undefined;
  }
}

/**
 * Creates a fresh staging directory beside `target` (mode 0700), recording this process as
 * its owner in the registry under `cacheDir` first, so a restore killed at any point leaves
 * nothing the next restore or `gc` cannot find. Call {@link endStaging} once it is published
 * or removed.
 */
export function beginStaging(cacheDir: string, target: string): string {
  const staging = path.join(path.dirname(target), `${stagingPrefix(target)}${randomBytes(6).toString('hex')}`);
  const record: StagingRecord = { staging, host: os.hostname(), pid: process.pid, startTicks: startTicks(process.pid) };
  fs.mkdirSync(registryDir(cacheDir), { recursive: true, mode: 0o700 });
  fs.writeFileSync(recordFile(cacheDir, staging), JSON.stringify(record), { mode: 0o600 });
  fs.mkdirSync(staging, { mode: 0o700 });
  return staging;
}

/** Forgets a staging directory that was published (renamed away) or removed. */
export function endStaging(cacheDir: string, staging: string): void {
  fs.rmSync(recordFile(cacheDir, staging), { force: true });
}

/** Removes the staging of one record if its owner is gone; true when it did. */
function sweepRecord(file: string): boolean {
  const record = readRecord(file);
  if (record !== undefined && ownerAlive(record)) return false;
  // Only a path shaped like a staging directory is ever removed, whatever the record says.
  if (record !== undefined && path.isAbsolute(record.staging) && path.basename(record.staging).includes(STAGING_MARK))
    removeTree(record.staging);
  fs.rmSync(file, { force: true });
  return record !== undefined;
}

/**
 * Removes staging directories left by restores that were killed: every one the registry
 * under `cacheDir` records whose owner is gone (never one a running restore, here or in
 * another process, still owns). With `target`, only staging beside that target is looked
 * at. A staging directory with no record (made with another cache directory) is left alone.
 * Returns how many were removed.
 */
export function sweepStaleStaging(cacheDir: string, target?: string): number {
  let removed = 0;
  if (target !== undefined) {
    let names: string[];
    try {
      names = fs.readdirSync(path.dirname(target)).filter((n) => n.startsWith(stagingPrefix(target)));
    } catch {
      return 0;
    }
    for (const name of names) {
      const file = recordFile(cacheDir, path.join(path.dirname(target), name));
      if (fs.existsSync(file) && sweepRecord(file)) removed += 1;
    }
    return removed;
  }
  let files: string[];
  try {
    files = fs.readdirSync(registryDir(cacheDir)).filter((n) => n.endsWith('.json'));
  } catch {
    return 0;
  }
  for (const name of files) if (sweepRecord(path.join(registryDir(cacheDir), name))) removed += 1;
  return removed;
}
