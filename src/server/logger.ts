/**
 * Structured logging: one JSON object per line, so log shippers need no parser of their own.
 * A logger never throws: a field that cannot be serialised degrades the line, not the request.
 * A string that holds a credential (any rule of the secret scan, Holdfast's tokens included)
 * is written as the withheld marker, wherever it is on the line.
 */
import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import { withholdSecrets } from '../rules/withhold-secrets.js';
import type { AppEnv } from './app-env.js';
import type { Principal } from './auth.js';

/** Severity, lowest first. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** Extra key/value pairs on a log line; `Error` values anywhere in them are expanded. */
export type LogFields = Readonly<Record<string, unknown>>;

/** A structured logger. Methods are fire-and-forget and never throw. */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (the line's own fields win on a clash). */
  child(fields: LogFields): Logger;
}

/** Options of {@link createJsonLogger}. */
export interface JsonLoggerOptions {
  /** Receives each line without its newline; defaults to stdout. */
  readonly write?: (line: string) => void;
  /** Lines below this level are dropped; defaults to `info`. */
  readonly level?: LogLevel;
  /** Clock in epoch milliseconds; injectable for tests. */
  readonly now?: () => number;
}

const LEVEL_RANK: Readonly<Record<LogLevel, number>> = { debug: 10, info: 20, warn: 30, error: 40 };
/** Keys owned by the logger; fields cannot overwrite them. */
const RESERVED_KEYS: ReadonlySet<string> = new Set(['time', 'level', 'msg']);
/** How many `cause` links of an error are followed, so a cyclic chain cannot loop. */
const MAX_CAUSE_DEPTH = 3;

/** Creates a logger writing `{"time":"<ISO>","level":"info","msg":"…",...fields}` lines, credentials withheld. */
export function createJsonLogger(options: JsonLoggerOptions = {}): Logger {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const threshold = LEVEL_RANK[options.level ?? 'info'];
  const now = options.now ?? Date.now;

  const make = (bound: LogFields): Logger => {
    const emit = (level: LogLevel, msg: string, fields?: LogFields): void => {
      if (LEVEL_RANK[level] < threshold) return;
      const record: Record<string, unknown> = { time: new Date(now()).toISOString(), level, msg };
      for (const source of [bound, fields ?? {}]) {
        for (const [key, value] of Object.entries(source)) {
          if (!RESERVED_KEYS.has(key)) record[key] = value;
        }
      }
      write(stringifyRecord(record));
    };
    return {
      debug: (msg, fields) => emit('debug', msg, fields),
      info: (msg, fields) => emit('info', msg, fields),
      warn: (msg, fields) => emit('warn', msg, fields),
      error: (msg, fields) => emit('error', msg, fields),
      child: (fields) => make({ ...bound, ...fields }),
    };
  };
  return make({});
}

/** A logger that drops everything; the default for library users and tests. */
export const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silentLogger,
};

/** `{name, code?, message, stack?, data?, cause?}`: what an operator needs from an error. */
export function serializeError(error: Error, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = { name: error.name };
  const { code, data } = error as { code?: unknown; data?: unknown };
  if (typeof code === 'string' || typeof code === 'number') out.code = code;
  out.message = error.message;
  if (error.stack !== undefined) out.stack = error.stack;
  if (data !== null && typeof data === 'object' && Object.keys(data).length > 0) out.data = data;
  if (error.cause !== undefined && depth < MAX_CAUSE_DEPTH) {
    out.cause = error.cause instanceof Error ? serializeError(error.cause, depth + 1) : error.cause;
  }
  return out;
}

function stringifyRecord(record: Record<string, unknown>): string {
  try {
    // `this[key]` is the raw value: JSON.stringify has already applied `toJSON` to `value`,
    // which would turn a HoldfastError into `{code, message, data}` and lose its stack.
    return JSON.stringify(record, function (this: Record<string, unknown>, key: string, value: unknown) {
      const raw = this[key];
      if (raw instanceof Error) return serializeError(raw);
      // Credentials never enter a log (DESIGN section 14): a path, a message or a stack a client's input reached included.
      if (typeof value === 'string') return withholdSecrets(value).value;
      return typeof value === 'bigint' ? value.toString() : value;
    });
  } catch (error) {
    const { time, level, msg } = record;
    return JSON.stringify({ time, level, msg, logError: `fields not serialisable: ${String(error)}` });
  }
}

/** Paths polled by probes and scrapers; logged at debug so they do not drown real traffic. */
export const QUIET_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/livez', '/metrics']);
/** Header carrying the request id in and out. */
export const REQUEST_ID_HEADER = 'x-request-id';
/** A client-supplied id is echoed into logs and headers, so only short, plain ids are kept. */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Options of {@link requestLogger}. */
export interface RequestLoggerOptions {
  /** Paths logged at debug instead of info; defaults to {@link QUIET_PATHS}. */
  readonly quietPaths?: ReadonlySet<string>;
}

/**
 * Middleware logging one line per request once the response is ready: method, path (no
 * query string, which may hold secrets), route pattern, status, durationMs, requestId and,
 * when authenticated, the tenant. Sets `requestId` (from `x-request-id` or a new UUID) on
 * the context and on the response. Install it first so it sees every request.
 */
export function requestLogger(log: Logger, options: RequestLoggerOptions = {}): MiddlewareHandler<AppEnv> {
  const quietPaths = options.quietPaths ?? QUIET_PATHS;
  return async (c, next) => {
    const started = performance.now();
    const offered = c.req.header(REQUEST_ID_HEADER);
    const requestId = offered !== undefined && ACCEPTED_REQUEST_ID.test(offered) ? offered : randomUUID();
    c.set('requestId', requestId);
    await next();
    c.header(REQUEST_ID_HEADER, requestId);
    const principal: Principal | undefined = c.get('principal');
    const fields: Record<string, unknown> = {
      method: c.req.method,
      path: c.req.path,
      route: routePath(c),
      status: c.res.status,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
      requestId,
    };
    if (principal !== undefined) {
      fields.tenant = principal.tenantName;
      fields.tenantId = principal.tenantId;
    }
    const level: LogLevel = quietPaths.has(c.req.path) ? 'debug' : 'info';
    log[level]('request', fields);
  };
}
