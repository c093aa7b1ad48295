import path from 'node:path';
import { posixEscapes, posixWithin } from '../core/paths.js';
import { InputError } from '../errors.js';
import { FOLDER_SCOPES } from '../model/folder-scopes.js';

/**
 * A deployment bundle as a deployment names it: the root tree of a directory captured into the
 * content-addressed store, with its file count and byte total (what `GET /v1/deployments/:id`
 * shows). The tree id is the content: the same files are always the same `rootTree`.
 */
export interface BundleRecord {
  readonly rootTree: string;
  readonly files: number;
  readonly bytes: number;
}

/** Where a bundle lands when a deployment names no `bundlePath`: this directory under the sandbox home. */
export const DEFAULT_BUNDLE_DIR = '.deployment';
/** Longest `bundlePath` accepted (as `workspaceRoot`). */
const MAX_BUNDLE_PATH_CHARS = 1024;
/**
 * First segments a bundle may not take under the home: the agent's own directory and the
 * work-folder mounts, which Holdfast writes there itself.
 */
const RESERVED_HOME_SEGMENTS: ReadonlySet<string> = new Set(['.holdfast', ...FOLDER_SCOPES]);
const SHA256_PATTERN = /^[0-9a-f]{64}$/;

/** Checks a bundle record's shape (`INVALID_INPUT`); returns a plain copy. */
export function checkedBundleRecord(input: unknown): BundleRecord {
  const record = input as Partial<BundleRecord> | null;
  if (
    typeof record !== 'object' ||
    record === null ||
    typeof record.rootTree !== 'string' ||
    !SHA256_PATTERN.test(record.rootTree) ||
    !isCount(record.files) ||
    !isCount(record.bytes)
  ) {
    throw invalid('bundle must be {rootTree: 64 lowercase hex, files, bytes} as a bundle capture returns it', 'bundle');
  }
  return { rootTree: record.rootTree, files: record.files, bytes: record.bytes };
}

/**
 * Checks a deployment's `bundlePath` as far as it can be checked without a sandbox: a relative
 * path (under the home) or an absolute one, without empty, `.` or `..` segments, NUL or control
 * characters; a relative one may not start with a reserved segment (`.holdfast`, `task`, `agent`,
 * `user`, `project`); an absolute one may not be `/`, nor lie inside, at or above
 * `workspaceRoot` when the deployment names one. The rest is checked at install
 * ({@link bundleDirIn}). Returns the path without trailing slashes, or `null`.
 */
export function checkedBundlePath(input: unknown, workspaceRoot: string | null): string | null {
  if (input === undefined || input === null) return null;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (typeof input !== 'string' || input.length > MAX_BUNDLE_PATH_CHARS || /[\u0000-\u001f\u007f]/.test(input)) {
    throw invalid(`bundlePath must be a path of at most ${MAX_BUNDLE_PATH_CHARS} characters without control characters`, 'bundlePath');
  }
  const trimmed = input.length > 1 ? input.replace(/\/+$/, '') : input;
  const absolute = trimmed.startsWith('/');
  const segments = (absolute ? trimmed.slice(1) : trimmed).split('/');
  if (trimmed === '/' || segments.some((s) => s === '' || s === '.' || s === '..')) {
    throw invalid('bundlePath must name a directory below the home or below /, without empty, . or .. segments', 'bundlePath');
  }
  if (!absolute && RESERVED_HOME_SEGMENTS.has(segments[0] as string)) {
    throw invalid(`bundlePath may not start with ${segments[0]}: Holdfast writes that directory of the home itself`, 'bundlePath');
  }
  if (absolute && workspaceRoot !== null && overlaps(trimmed, workspaceRoot)) {
    throw invalid(
      `bundlePath ${trimmed} overlaps the workspace root ${workspaceRoot}: the bundle must lie outside the workspace`,
      'bundlePath',
    );
  }
  return trimmed;
}

/**
 * The absolute directory a bundle takes in a sandbox with this workspace root and home.
 * `INVALID_INPUT` when it would lie inside, at or above the workspace root (a workspace
 * checkpoint would capture it, or the install would replace the workspace), at or above the
 * home, or under a reserved directory of the home.
 */
export function bundleDirIn(bundlePath: string | null, sandbox: { workspaceRoot: string; agentHome: string }): string {
  const { workspaceRoot, agentHome } = sandbox;
  const dir = path.posix.resolve(agentHome, bundlePath ?? DEFAULT_BUNDLE_DIR);
  if (overlaps(dir, workspaceRoot)) {
    throw invalid(`bundle directory ${dir} overlaps the sandbox workspace ${workspaceRoot}: the bundle must lie outside it`, 'bundlePath');
  }
  if (posixWithin(agentHome, dir)) {
    throw invalid(`bundle directory ${dir} would replace the sandbox home ${agentHome}`, 'bundlePath');
  }
  const inHome = path.posix.relative(agentHome, dir);
  if (!posixEscapes(inHome) && RESERVED_HOME_SEGMENTS.has(inHome.split('/')[0] as string)) {
    throw invalid(`bundle directory ${dir} is inside a directory Holdfast writes in the home`, 'bundlePath');
  }
  return dir;
}

/** Whether `a` and `b` are the same directory or one contains the other. */
function overlaps(a: string, b: string): boolean {
  return posixWithin(a, b) || posixWithin(b, a);
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function invalid(message: string, field: string): InputError {
  return new InputError('INVALID_INPUT', message, { data: { field } });
}
