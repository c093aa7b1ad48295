import { InputError } from '../errors.js';

/** A path segment reserved for Holdfast's own files inside a hydrated folder. */
export const RESERVED_SEGMENT = '.holdfast';
/** Characters of an owner id, an operation id or a content type at most. */
export const MAX_NAME_CHARS = 256;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
const CONTROL_RE = /[\u0000-\u001f\u007f]/;
/** A lone UTF-16 surrogate: such a string has no UTF-8 form, so it could not be stored as given. */
const LONE_SURROGATE_RE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const wellFormed = (s: string): boolean => !LONE_SURROGATE_RE.test(s);

/**
 * Checks a collection path and returns it unchanged: relative, `/`-separated, at most
 * `maxBytes` bytes of UTF-8, no empty / `.` / `..` / `.holdfast` segment, no backslash, no
 * control character, well-formed Unicode. Anything else is `INVALID_PATH`: paths are
 * rejected, never normalised, so what is stored is exactly what was asked for.
 */
export function validateFolderPath(path: unknown, maxBytes: number): string {
  const refuse = (why: string): never => {
    throw new InputError('INVALID_PATH', `invalid folder path ${JSON.stringify(path)}: ${why}`, {
      data: { path: typeof path === 'string' ? path : null, reason: why },
    });
  };
  if (typeof path !== 'string' || path === '') return refuse('empty');
  if (!wellFormed(path)) return refuse('not well-formed Unicode');
  if (Buffer.byteLength(path, 'utf8') > maxBytes) return refuse(`longer than ${maxBytes} bytes`);
  if (path.includes('\\')) return refuse('contains a backslash');
  if (CONTROL_RE.test(path)) return refuse('contains a control character');
  for (const segment of path.split('/')) {
    if (segment === '') return refuse(path.startsWith('/') ? 'absolute' : 'has an empty segment');
    if (segment === '.' || segment === '..') return refuse(`has a "${segment}" segment`);
    if (segment === RESERVED_SEGMENT) return refuse(`has the reserved "${RESERVED_SEGMENT}" segment`);
  }
  return path;
}

/** The ancestors of a valid path, outermost first (`a/b/c` -> `a`, `a/b`). */
export function parentPaths(path: string): string[] {
  const out: string[] = [];
  for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) out.push(path.slice(0, i));
  return out;
}

/**
 * Checks a short identifier-like text (owner id, operation id, content type): a string of
 * 1..{@link MAX_NAME_CHARS} characters without control characters, else `INVALID_INPUT`.
 */
export function validateName(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '' || value.length > MAX_NAME_CHARS || CONTROL_RE.test(value) || !wellFormed(value)) {
    throw new InputError('INVALID_INPUT', `${field} must be 1..${MAX_NAME_CHARS} characters without control characters`, {
      data: { field },
    });
  }
  return value;
}
