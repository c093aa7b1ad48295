import path from 'node:path';
import { isSha256Hex } from '../../../core/hash.js';
import { InputError } from '../../../errors.js';
import { TOKEN_RE } from '../wire/protocol.js';

/**
 * Typed access to the fields of one request header (or one object inside it). Every getter
 * throws `INVALID_INPUT` naming the field, so a bad request is answered with an error frame
 * before the agent touches anything.
 */
export class Fields {
  constructor(
    private readonly source: Readonly<Record<string, unknown>>,
    /** Where the fields come from, for messages: `write`, `write ops[3]`. */
    private readonly where: string,
  ) {}

  /** Wraps a nested value that must be an object. */
  static of(value: unknown, where: string): Fields {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new InputError('INVALID_INPUT', `${where} must be an object`, { data: { field: where } });
    }
    return new Fields(value as Record<string, unknown>, where);
  }

  /** A present field, as is. */
  raw(name: string): unknown {
    return this.source[name];
  }

  string(name: string): string {
    const v = this.source[name];
    if (typeof v !== 'string') throw this.bad(name, 'a string');
    return v;
  }

  optionalString(name: string): string | undefined {
    return this.source[name] === undefined || this.source[name] === null ? undefined : this.string(name);
  }

  /** An id that is safe as part of a file name (staging ids, batch ids, cache keys). */
  token(name: string): string {
    const v = this.source[name];
    if (typeof v !== 'string' || !TOKEN_RE.test(v)) throw this.bad(name, 'a token of letters, digits, ".", "_" or "-" (at most 128)');
    return v;
  }

  optionalToken(name: string): string | undefined {
    return this.source[name] === undefined || this.source[name] === null ? undefined : this.token(name);
  }

  /** An absolute path, normalised; never the filesystem root. */
  absolutePath(name: string): string {
    const v = this.source[name];
    if (typeof v !== 'string' || !path.isAbsolute(v) || v.includes('\0') || path.resolve(v) === '/') {
      throw this.bad(name, 'an absolute path other than "/"');
    }
    return path.resolve(v);
  }

  optionalAbsolutePath(name: string): string | undefined {
    return this.source[name] === undefined || this.source[name] === null ? undefined : this.absolutePath(name);
  }

  /** A safe integer within `[min, max]`. */
  int(name: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
    const v = this.source[name];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) throw this.bad(name, `an integer from ${min} to ${max}`);
    return v;
  }

  /** A finite number (mtimes may carry fractions). */
  number(name: string): number {
    const v = this.source[name];
    if (typeof v !== 'number' || !Number.isFinite(v)) throw this.bad(name, 'a finite number');
    return v;
  }

  boolean(name: string, fallback: boolean): boolean {
    const v = this.source[name];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'boolean') throw this.bad(name, 'true or false');
    return v;
  }

  /** An array of at most `max` items; longer is `LIMIT_EXCEEDED`. */
  array(name: string, max: number): readonly unknown[] {
    const v = this.source[name];
    if (!Array.isArray(v)) throw this.bad(name, 'an array');
    if (v.length > max) {
      throw new InputError(
        'LIMIT_EXCEEDED',
        `${this.where}: ${name} has ${v.length} items, more than the limit of ${max}; split the request`,
        {
          data: { field: name, count: v.length, limit: max },
        },
      );
    }
    return v;
  }

  /** An array of strings, each passed through `check`. */
  strings(name: string, max: number, check: (value: string) => string = (s) => s): string[] {
    return this.array(name, max).map((item, i) => {
      if (typeof item !== 'string') throw this.bad(`${name}[${i}]`, 'a string');
      return check(item);
    });
  }

  /** A content id: a SHA-256 as 64 lowercase hex digits. */
  sha256(name: string): string {
    const v = this.source[name];
    if (!isSha256Hex(v)) throw this.bad(name, 'a SHA-256 id (64 lowercase hex digits)');
    return v;
  }

  /** An array of at most `max` content ids. */
  sha256s(name: string, max: number): string[] {
    return this.array(name, max).map((item, i) => {
      if (!isSha256Hex(item)) throw this.bad(`${name}[${i}]`, 'a SHA-256 id (64 lowercase hex digits)');
      return item;
    });
  }

  private bad(name: string, what: string): InputError {
    return new InputError('INVALID_INPUT', `${this.where}: ${name} must be ${what}`, { data: { field: name, where: this.where } });
  }
}
