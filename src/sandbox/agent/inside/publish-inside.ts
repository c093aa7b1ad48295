import fs from 'node:fs';
import path from 'node:path';
import { fsPath } from '../../../core/name-bytes.js';
import { readNames } from '../../../workspace-fs/fs-exact.js';
import { type AgentState, faultPoint } from './agent-state.js';
import { type StagingRecord, saveRecord } from './staging-registry.js';

/** The agent's own directory in an `inside` target; never moved. */
const OWN_DIR = '.holdfast';

/**
 * Publishing for the `inside` layout, where the target (a mount point) cannot be renamed: the
 * old entries move into `old`, then the staged ones into the target, one rename each. Moving a
 * directory to another parent needs write access to it (its `..` changes), so read-only
 * directories are opened for the move and given their mode back after it; the modes to give
 * back are saved in the record first, so a process killed in between still restores them.
 * Every step is repeatable: entries already moved are simply no longer where they came from.
 */
export function publishInside(state: AgentState, record: StagingRecord, staging: string, old: string): void {
  const { target } = record;
  if (record.step !== 'in') {
    record.asideModes ??= { ...dirModes(target), '': fs.statSync(target).mode & 0o7777 };
    saveRecord(state, record);
    openForMoves(target);
    fs.mkdirSync(old, { recursive: true, mode: 0o700 });
    moveAll(target, old);
    record.step = 'in';
    record.inModes = { ...dirModes(staging), '': fs.statSync(staging).mode & 0o7777 };
    saveRecord(state, record);
  }
  openForMoves(staging);
  moveAll(staging, target);
  restoreModes(target, record.inModes ?? {});
}

/** Undoes an interrupted `aside` step: the old entries go back, with their modes. */
export function moveAsideBack(record: StagingRecord, old: string): void {
  if (!fs.existsSync(old)) return;
  openForMoves(old);
  moveAll(old, record.target);
  restoreModes(record.target, record.asideModes ?? {});
}

/** Modes of the directories directly in `dir` (the entries whose `..` a move rewrites). */
function dirModes(dir: string): Record<string, number> {
  const modes: Record<string, number> = {};
  for (const name of readNames(dir)) {
    if (name === OWN_DIR) continue;
    const st = fs.lstatSync(fsPath(path.join(dir, name)));
    if (st.isDirectory()) modes[name] = st.mode & 0o7777;
  }
  return modes;
}

/** Owner write on `dir` and on each directory in it, so entries can leave it. */
function openForMoves(dir: string): void {
  for (const p of [dir, ...readNames(dir).map((name) => fsPath(path.join(dir, name)))]) {
    const st = fs.lstatSync(p);
    if (st.isDirectory() && (st.mode & 0o300) !== 0o300) fs.chmodSync(p, (st.mode & 0o7777) | 0o300);
  }
}

function moveAll(from: string, to: string): void {
  for (const name of readNames(from)) {
    if (name === OWN_DIR) continue;
    fs.renameSync(fsPath(path.join(from, name)), fsPath(path.join(to, name)));
    faultPoint();
  }
}

/** Gives directories in `dir` (and `dir` itself, key `''`) their recorded modes. */
function restoreModes(dir: string, modes: Readonly<Record<string, number>>): void {
  for (const [name, mode] of Object.entries(modes)) {
    try {
      fs.chmodSync(name === '' ? dir : fsPath(path.join(dir, name)), mode);
    } catch {
      // A mount point owned by someone else keeps the provider's mode; a vanished entry has none to restore.
    }
  }
}
