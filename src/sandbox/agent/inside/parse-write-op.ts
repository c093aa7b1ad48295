import { splitRelativePath, symlinkStaysInside } from '../../../core/paths.js';
import { InputError } from '../../../errors.js';
import type { WriteOp } from '../wire/protocol.js';
import { Fields } from './request-fields.js';

/**
 * Validates one operation of a write batch against the batch's payload, without touching the
 * filesystem: path rules (`INVALID_PATH`, a link's leader included), field types, payload
 * ranges and, for symlinks, a target that stays inside the workspace. The whole batch is validated before any of it runs.
 */
export function parseWriteOp(raw: unknown, index: number, payloadBytes: number): WriteOp {
  const where = `write ops[${index}]`;
  const f = Fields.of(raw, where);
  const kind = f.string('op');
  const rawPath = f.string('path');
  // Only a `dir` op may name the staging root itself (to set its mode).
  const path = kind === 'dir' && rawPath === '' ? '' : splitRelativePath(rawPath).join('/');
  switch (kind) {
    case 'mkdir':
      return { op: 'mkdir', path };
    case 'file':
      return parseFileOp(f, where, path, payloadBytes);
    case 'symlink': {
      const target = f.string('target');
      if (!symlinkStaysInside(path, target) || target.includes('\0')) {
        throw new InputError('INVALID_PATH', `${where}: symlink ${path} -> ${target} would point outside the workspace`, {
          data: { path, target },
        });
      }
      return { op: 'symlink', path, target, mtimeMs: f.number('mtimeMs') };
    }
    case 'link': {
      // Both ends are staging paths under the same rules; where the leader stands is checked against the staging itself.
      const leader = splitRelativePath(f.string('leader')).join('/');
      if (leader === path) throw new InputError('INVALID_INPUT', `${where}: ${path} cannot be a link to itself`, { data: { path } });
      const fields = { size: f.int('size'), sha256: f.sha256('sha256'), mode: f.int('mode', 0, 0o7777), mtimeMs: f.number('mtimeMs') };
      return { op: 'link', path, leader, ...fields };
    }
    case 'dir':
      return { op: 'dir', path, mode: f.int('mode', 0, 0o7777), mtimeMs: f.number('mtimeMs') };
    default:
      throw new InputError('INVALID_INPUT', `${where}: unknown op "${kind}" (mkdir, file, symlink, link or dir)`, { data: { op: kind } });
  }
}

function parseFileOp(f: Fields, where: string, path: string, payloadBytes: number): WriteOp {
  const size = f.int('size');
  const sha256 = f.sha256('sha256');
  const at = f.int('at');
  const offset = f.int('offset');
  const length = f.int('length');
  if (offset + length > payloadBytes) {
    throw new InputError('INVALID_INPUT', `${where}: bytes ${offset}..${offset + length} are past the ${payloadBytes}-byte payload`, {
      data: { offset, length, payloadBytes },
    });
  }
  if (at + length > size) {
    throw new InputError('INVALID_INPUT', `${where}: piece at ${at} of ${length} bytes runs past the file size ${size}`, {
      data: { at, length, size },
    });
  }
  const chunks = f.raw('chunks') === undefined ? undefined : f.sha256s('chunks', 1_000_000);
  const op = { op: 'file' as const, path, size, sha256, at, offset, length, mode: f.int('mode', 0, 0o7777), mtimeMs: f.number('mtimeMs') };
  return chunks === undefined ? op : { ...op, chunks };
}
