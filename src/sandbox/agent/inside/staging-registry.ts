import fs from 'node:fs';
import path from 'node:path';
import { ConflictError, NotFoundError } from '../../../errors.js';
import type { AgentState } from './agent-state.js';
import { BatchJournal } from './batch-journal.js';
import { writeFileAtomic } from './safe-fs.js';

/** Published records older than this are pruned when a new staging begins. */
const PUBLISHED_RECORD_TTL_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * Where a staging tree lives. `beside`: a sibling of the target, published by renaming the
 * directory itself (as restore.ts does on the host). `inside`: under `<target>/.holdfast/`,
 * for a target that cannot be renamed, such as a sandbox workspace that is a mount point on a
 * read-only root; published by moving the entries.
 */
export type StagingLayout = 'beside' | 'inside';

/** What the agent remembers about one staging id, in `<stateDir>/staging/<id>.json`. */
export interface StagingRecord {
  readonly stagingId: string;
  readonly target: string;
  readonly layout: StagingLayout;
  readonly cacheKey: string | null;
  /** `publishing` is written before the first rename, so a new process can finish or undo it. */
  state: 'staging' | 'publishing' | 'published';
  /** For `inside` publishing: old entries are moved `aside` first, then the new ones `in`. */
  step?: 'aside' | 'in';
  /** For `inside` publishing: modes of the target's (`aside`) and staging's (`in`) top directories, `''` the root. */
  asideModes?: Record<string, number>;
  inModes?: Record<string, number>;
}

/** The directories of one staging id: the staging tree and where the previous copy goes. */
export function stagingPaths(record: Pick<StagingRecord, 'target' | 'stagingId' | 'layout'>): { staging: string; old: string } {
  const { target, stagingId } = record;
  if (record.layout === 'inside') {
    const own = path.join(target, '.holdfast');
    return { staging: path.join(own, `staging-${stagingId}`), old: path.join(own, `old-${stagingId}`) };
  }
  const dir = path.dirname(target);
  const base = path.basename(target);
  return {
    staging: path.join(dir, `.${base}.holdfast-staging-${stagingId}`),
    old: path.join(dir, `.${base}.holdfast-old-${stagingId}`),
  };
}

/** The record of `stagingId`, or undefined. */
export function loadRecord(state: AgentState, stagingId: string): StagingRecord | undefined {
  try {
    const parsed = JSON.parse(fs.readFileSync(state.registryFile(stagingId), 'utf8')) as StagingRecord;
    return parsed.stagingId === stagingId && typeof parsed.target === 'string' && typeof parsed.layout === 'string' ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** Writes a record durably (the next process relies on it). */
export function saveRecord(state: AgentState, record: StagingRecord): void {
  writeFileAtomic(state.registryFile(record.stagingId), JSON.stringify(record));
}

/** Forgets a staging id. */
export function removeRecord(state: AgentState, stagingId: string): void {
  fs.rmSync(state.registryFile(stagingId), { force: true });
}

/** Removes records of restores published long ago; they only answer re-sent publishes. */
export function pruneRecords(state: AgentState): void {
  const dir = state.registryDir;
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  const cutoff = Date.now() - PUBLISHED_RECORD_TTL_MS;
  for (const name of names) {
    const file = path.join(dir, name);
    const st = fs.statSync(file, { throwIfNoEntry: false });
    if (st === undefined || st.mtimeMs >= cutoff) continue;
    const id = name.replace(/\.json$/, '');
    if (loadRecord(state, id)?.state === 'published') fs.rmSync(file, { force: true });
  }
}

/** An open staging directory, ready for writes. */
export interface OpenStaging {
  readonly record: StagingRecord;
  readonly staging: string;
  readonly journal: BatchJournal;
}

/**
 * The staging directory of `stagingId` for a write or reuse: `NOT_FOUND` without `stage-begin`
 * (or after abort), `CONFLICT` once publishing has started. Journals are cached per process.
 */
export function openStaging(state: AgentState, stagingId: string): OpenStaging {
  const record = loadRecord(state, stagingId);
  if (record === undefined) throw new NotFoundError(`no staging ${stagingId}: send stage-begin first`, { data: { stagingId } });
  if (record.state !== 'staging') {
    throw new ConflictError('CONFLICT', `staging ${stagingId} is ${record.state}; it takes no more writes`, { data: { stagingId } });
  }
  const { staging } = stagingPaths(record);
  if (!fs.lstatSync(staging, { throwIfNoEntry: false })?.isDirectory()) {
    throw new NotFoundError(`staging directory ${staging} is gone: begin again`, { data: { stagingId, staging } });
  }
  let journal = state.journals.get(staging);
  if (journal === undefined) {
    journal = BatchJournal.open(staging);
    state.journals.set(staging, journal);
  }
  return { record, staging, journal };
}
