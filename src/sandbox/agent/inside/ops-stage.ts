import fs from 'node:fs';
import path from 'node:path';
import { ConflictError, InputError } from '../../../errors.js';
import type { StageBeginResult } from '../wire/protocol.js';
import type { OpHandler } from './agent-server.js';
import type { AgentState } from './agent-state.js';
import { BatchJournal } from './batch-journal.js';
import { fsyncDir, refuseUnlinkedDir, removeTree } from './safe-fs.js';
import { loadRecord, pruneRecords, type StagingLayout, saveRecord, stagingPaths } from './staging-registry.js';

/** The agent's own directory inside a target; a reserved name, so no workspace path reaches it. */
const OWN_DIR = '.holdfast';

/**
 * `stage-begin {stagingId, target, replace?, cacheKey?}`: creates the staging directory (beside
 * the target as restore.ts does on the host, or inside it when the target cannot be renamed)
 * and records it, so that any later agent process can continue it. Beginning an id that is
 * already staging resumes it and reports the batches already applied; one whose publish had
 * started and not finished reports `phase` so the caller re-sends only `publish`; one already
 * published starts over (a new restore of the same checkpoint rewrites what changed since). A
 * non-empty target needs `replace`.
 */
export function stageBegin(state: AgentState): OpHandler {
  return ({ fields }) => {
    const stagingId = fields.token('stagingId');
    const target = fields.absolutePath('target');
    const replace = fields.boolean('replace', false);
    const cacheKey = fields.optionalToken('cacheKey') ?? null;
    const existing = loadRecord(state, stagingId);
    if (existing !== undefined && existing.target !== target) {
      throw new ConflictError('CONFLICT', `staging ${stagingId} belongs to ${existing.target}, not ${target}`, { data: { stagingId } });
    }
    if (existing !== undefined && existing.state === 'publishing') {
      // A process died while publishing: nothing to write, the caller only re-sends publish, which completes the swap.
      const targetState = fs.lstatSync(target, { throwIfNoEntry: false }) === undefined ? 'absent' : 'non-empty';
      const { staging } = stagingPaths(existing);
      const result: StageBeginResult = { staging, targetState, resumed: true, phase: existing.state, completedBatchIds: [] };
      return { result };
    }
    // A published staging is final: beginning its id again is a new restore, since the target
    // may have changed since (an agent's edits must not survive a second restore of the same checkpoint).
    const pending = existing?.state === 'staging' ? existing : undefined;
    const targetState = inspectTarget(target, replace);
    const layout = pending?.layout ?? chooseLayout(target);
    const { staging } = stagingPaths({ target, stagingId, layout });
    const resumed = pending !== undefined && fs.lstatSync(staging, { throwIfNoEntry: false })?.isDirectory() === true;
    if (!resumed) {
      pruneRecords(state);
      state.journals.delete(staging);
      saveRecord(state, { stagingId, target, layout, cacheKey, state: 'staging' });
      removeTree(staging);
      fs.mkdirSync(path.dirname(staging), { recursive: true, mode: 0o700 });
      fs.mkdirSync(staging, { mode: 0o700 });
      fsyncDir(path.dirname(staging));
    }
    const completedBatchIds = BatchJournal.open(staging).ids();
    const result: StageBeginResult = { staging, targetState, resumed, phase: 'staging', completedBatchIds };
    return { result };
  };
}

function inspectTarget(target: string, replace: boolean): StageBeginResult['targetState'] {
  const st = fs.lstatSync(target, { throwIfNoEntry: false });
  if (st === undefined) {
    fs.mkdirSync(path.dirname(target), { recursive: true });
    return 'absent';
  }
  if (!st.isDirectory())
    throw new InputError('INVALID_INPUT', `restore target ${target} exists and is not a directory`, { data: { target } });
  refuseUnlinkedDir(target);
  // Our own directory (an earlier inside staging) does not make a target non-empty.
  if (fs.readdirSync(target).every((name) => name === OWN_DIR)) return 'empty';
  if (!replace) {
    throw new ConflictError('CONFLICT', `restore target ${target} is not empty: pass replace to replace it`, {
      data: { target, reason: 'target-not-empty' },
    });
  }
  return 'non-empty';
}

/**
 * `beside` unless the target exists and cannot be swapped by renaming it: a mount point (its
 * device differs from its parent's, or it is listed in `/proc/self/mountinfo`), or a parent
 * the agent cannot write (a sandbox's read-only root).
 */
function chooseLayout(target: string): StagingLayout {
  const st = fs.statSync(target, { throwIfNoEntry: false });
  if (st === undefined) return 'beside';
  const parent = path.dirname(target);
  const parentSt = fs.statSync(parent);
  if (parentSt.dev !== st.dev || isMountPoint(target)) return 'inside';
  try {
    fs.accessSync(parent, fs.constants.W_OK);
    return 'beside';
  } catch {
    return 'inside';
  }
}

function isMountPoint(target: string): boolean {
  let text: string;
  try {
    text = fs.readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return false;
  }
  const real = fs.realpathSync(target);
  const decodeOctal = (s: string): string =>
    s.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
  return text.split('\n').some((line) => decodeOctal(line.split(' ')[4] ?? '') === real);
}
