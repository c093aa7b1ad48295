/**
 * Every failure Holdfast reports on purpose is a {@link HoldfastError} with a stable `code`.
 * Callers and tests branch on `code`, never on message text; messages are for people and
 * say what to do next.
 */

/** The closed set of error codes. Adding one is an API change; renaming one is a break. */
export type ErrorCode =
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'CONFLICT'
  | 'STALE_LEASE'
  | 'WORKSPACE_CHANGED'
  | 'REPOSITORY_BUSY'
  | 'REPOSITORY_UNSUPPORTED'
  | 'INTEGRITY'
  | 'RESTORE_INCOMPLETE'
  | 'LIMIT_EXCEEDED'
  | 'INVALID_PATH'
  | 'INVALID_INPUT'
  | 'SECRET_EXCLUDED'
  | 'STORE_UNAVAILABLE'
  | 'STORE_FULL'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'METHOD_NOT_ALLOWED'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'RANGE_NOT_SATISFIABLE'
  | 'SETUP_FAILED'
  | 'TIMEOUT'
  | 'CANCELLED'
  | 'INTERRUPTED'
  | 'INTERNAL';

/** All codes, for exhaustiveness checks and for the HTTP mapping. */
export const ERROR_CODES: readonly ErrorCode[] = Object.freeze([
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'CONFLICT',
  'STALE_LEASE',
  'WORKSPACE_CHANGED',
  'REPOSITORY_BUSY',
  'REPOSITORY_UNSUPPORTED',
  'INTEGRITY',
  'RESTORE_INCOMPLETE',
  'LIMIT_EXCEEDED',
  'INVALID_PATH',
  'INVALID_INPUT',
  'SECRET_EXCLUDED',
  'STORE_UNAVAILABLE',
  'STORE_FULL',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'METHOD_NOT_ALLOWED',
  'UNSUPPORTED_MEDIA_TYPE',
  'RANGE_NOT_SATISFIABLE',
  'SETUP_FAILED',
  'TIMEOUT',
  'CANCELLED',
  'INTERRUPTED',
  'INTERNAL',
]);

/** Structured, JSON-safe detail attached to an error (ids, paths, limits). */
export type ErrorData = Readonly<Record<string, unknown>>;

/** Options accepted by every error constructor. */
export interface HoldfastErrorOptions {
  /** Machine-readable detail: which key, which limit, which variable. */
  readonly data?: ErrorData;
  /** The lower-level error this one explains. */
  readonly cause?: unknown;
}

/** Base class of every error Holdfast throws deliberately. */
export class HoldfastError extends Error {
  override readonly name: string = 'HoldfastError';
  readonly code: ErrorCode;
  readonly data: ErrorData;

  constructor(code: ErrorCode, message: string, options: HoldfastErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.data = options.data ?? {};
  }

  /** The shape used on the wire and in `--json` output: `{code, message, data}`. */
  toJSON(): { code: ErrorCode; message: string; data: ErrorData } {
    return { code: this.code, message: this.message, data: this.data };
  }
}

/** The codes of {@link InputError}. */
export const INPUT_CODES = ['INVALID_INPUT', 'INVALID_PATH', 'LIMIT_EXCEEDED', 'SECRET_EXCLUDED'] as const;
/** The codes of {@link ConflictError}. */
export const CONFLICT_CODES = ['CONFLICT', 'ALREADY_EXISTS', 'STALE_LEASE', 'WORKSPACE_CHANGED', 'REPOSITORY_BUSY'] as const;
/** The codes of {@link IntegrityError}. */
export const INTEGRITY_CODES = ['INTEGRITY', 'RESTORE_INCOMPLETE'] as const;

/** Bad arguments, configuration or paths (`INVALID_INPUT`, `INVALID_PATH`, `LIMIT_EXCEEDED`), or input that would store a secret (`SECRET_EXCLUDED`). */
export class InputError extends HoldfastError {
  override readonly name = 'InputError';
  constructor(code: (typeof INPUT_CODES)[number], message: string, options: HoldfastErrorOptions = {}) {
    super(code, message, options);
  }
}

/** A named thing does not exist (`NOT_FOUND`). */
export class NotFoundError extends HoldfastError {
  override readonly name = 'NotFoundError';
  constructor(message: string, options: HoldfastErrorOptions = {}) {
    super('NOT_FOUND', message, options);
  }
}

/** Another writer got there first (`CONFLICT`, `ALREADY_EXISTS`, `STALE_LEASE`, `WORKSPACE_CHANGED`, `REPOSITORY_BUSY`). */
export class ConflictError extends HoldfastError {
  override readonly name = 'ConflictError';
  constructor(code: (typeof CONFLICT_CODES)[number], message: string, options: HoldfastErrorOptions = {}) {
    super(code, message, options);
  }
}

/** Stored bytes are missing or do not match their hash (`INTEGRITY`, `RESTORE_INCOMPLETE`). */
export class IntegrityError extends HoldfastError {
  override readonly name = 'IntegrityError';
  constructor(code: (typeof INTEGRITY_CODES)[number], message: string, options: HoldfastErrorOptions = {}) {
    super(code, message, options);
  }
}

/**
 * A backing store could not be reached or refused the request (`STORE_UNAVAILABLE`).
 * `data.transient` says whether retrying the same request may succeed.
 */
export class StoreError extends HoldfastError {
  override readonly name = 'StoreError';
  constructor(message: string, options: HoldfastErrorOptions & { transient?: boolean } = {}) {
    super('STORE_UNAVAILABLE', message, {
      ...options,
      data: { ...options.data, transient: options.transient ?? false },
    });
  }

  /** True when the same request may succeed if retried (timeouts, 5xx, resets). */
  get transient(): boolean {
    return this.data.transient === true;
  }
}

/**
 * A backing store has no space left for the write (`STORE_FULL`): nothing of the failed
 * write was kept, and the same request succeeds once space is freed. `data.store` names the
 * store (`metadata`), `data.target` where it is.
 */
export class StoreFullError extends HoldfastError {
  override readonly name = 'StoreFullError';
  constructor(message: string, options: HoldfastErrorOptions = {}) {
    super('STORE_FULL', message, options);
  }
}

/** An error of `code` built through its family (for codes that arrive as data: over a wire, from a record). */
export function errorFor(code: ErrorCode, message: string, options: HoldfastErrorOptions = {}): HoldfastError {
  if (isOneOf(INPUT_CODES, code)) return new InputError(code, message, options);
  if (isOneOf(CONFLICT_CODES, code)) return new ConflictError(code, message, options);
  if (isOneOf(INTEGRITY_CODES, code)) return new IntegrityError(code, message, options);
  if (code === 'NOT_FOUND') return new NotFoundError(message, options);
  if (code === 'STORE_FULL') return new StoreFullError(message, options);
  if (code === 'STORE_UNAVAILABLE') return new StoreError(message, { ...options, transient: options.data?.transient === true });
  return new HoldfastError(code, message, options);
}

function isOneOf<C extends ErrorCode>(codes: readonly C[], code: ErrorCode): code is C {
  return (codes as readonly ErrorCode[]).includes(code);
}

/**
 * The class each code is thrown through (`HoldfastError` for a code without a family), as
 * {@link errorFor} builds it. `instanceof` a family is therefore a contract: every
 * `NOT_FOUND` is a `NotFoundError`, every `CONFLICT` a `ConflictError`, and so on; a test over
 * `src/` checks that every literal throw agrees.
 */
export const ERROR_FAMILIES: Readonly<Record<ErrorCode, string>> = Object.freeze(
  Object.fromEntries(ERROR_CODES.map((code) => [code, errorFor(code, '').name])) as Record<ErrorCode, string>,
);

/** Type guard; with `code`, also checks the code. */
export function isHoldfastError(error: unknown, code?: ErrorCode): error is HoldfastError {
  return error instanceof HoldfastError && (code === undefined || error.code === code);
}

/** The wire and storage form of any thrown value: a HoldfastError's own, else `INTERNAL` with its description. */
export function errorToJson(error: unknown): { code: ErrorCode; message: string; data: ErrorData } {
  return isHoldfastError(error) ? error.toJSON() : { code: 'INTERNAL', message: describeError(error), data: {} };
}

/** A short description of any thrown value, for logs and wrapped messages. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' && !error.message.includes(code) ? `${code}: ${error.message}` : error.message;
  }
  return String(error);
}

/**
 * A field path as `data.field` names it: keys joined by dots, list indexes in brackets
 * (`setup[2]`, `limits.cpus`, `git.allowedHosts[0]`); `''` for the value itself.
 */
export function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out;
}
