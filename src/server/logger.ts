/**
 * Structured logging on pino: one JSON object per line, so log shippers need no parser of their
 * own. A logger never throws: a field that cannot be serialised degrades the line, not the
 * request. Every record passes through the secret rules before pino writes it: a string that
 * holds a credential (any rule of the secret scan, Holdfast's tokens included) is written as
 * the withheld marker, wherever it is on the line (a field, a nested field, the message, an
 * error's message, stack, data or cause).
 */
import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import { pino } from 'pino';
import { DEFAULT_LOG_LEVEL, type LogThreshold } from '../config.js';
import { withholdSecrets } from '../rules/withhold-secrets.js';
import type { AppEnv } from './app-env.js';
import type { Principal } from './auth.js';

/** Severity of a line, lowest first (pino's levels). */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';

/** Extra key/value pairs on a log line; `Error` values anywhere in them are expanded. */
export type LogFields = Readonly<Record<string, unknown>>;

/** A structured logger. Methods are fire-and-forget and never throw. */
export interface Logger {
  trace(msg: string, fields?: LogFields): void;
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  fatal(msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (the line's own fields win on a clash). */
  child(fields: LogFields): Logger;
}

/** Options of {@link createJsonLogger}. */
export interface JsonLoggerOptions {
  /** Receives each line without its newline; defaults to a synchronous write to stdout. */
  readonly write?: (line: string) => void;
  /** Lines below this level are dropped, `silent` drops all; defaults to {@link DEFAULT_LOG_LEVEL}. */
  readonly level?: LogThreshold;
  /** Clock in epoch milliseconds; injectable for tests. */
  readonly now?: () => number;
}

const LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'];
/** Keys owned by the logger; fields cannot overwrite them. */
const RESERVED_KEYS: ReadonlySet<string> = new Set(['time', 'level', 'msg']);
/** How many `cause` links of an error are followed, so a cyclic chain cannot loop. */
const MAX_CAUSE_DEPTH = 3;
/** Deepest nesting of a field written; deeper values are cut (the secret rules then see every string kept). */
const MAX_FIELD_DEPTH = 32;

/**
 * Creates a pino logger writing `{"level":"info","time":"<ISO>",...fields,"msg":"…"}` lines,
 * credentials withheld. The lines carry no pid or host name (one process per container).
 */
export function createJsonLogger(options: JsonLoggerOptions = {}): Logger {
  const now = options.now ?? Date.now;
  const { write } = options;
  const destination =
    write === undefined ? pino.destination({ dest: 1, sync: true }) : { write: (line: string) => write(line.replace(/\n$/, '')) };
  const root = pino(
    {
      level: options.level ?? DEFAULT_LOG_LEVEL,
      base: null,
      messageKey: 'msg',
      timestamp: () => `,"time":"${new Date(now()).toISOString()}"`,
      formatters: {
        level: (label) => ({ level: label }),
        // The one gate every record passes: errors expanded, credentials withheld, reserved keys kept.
        log: (fields) => sanitizeFields(fields),
        bindings: (bindings) => sanitizeFields(bindings),
      },
      // Errors are already plain objects here; pino's own `err` serializer would re-expand them.
      serializers: { err: (value: unknown) => value },
      hooks: {
        logMethod(args, method) {
          const [first, ...rest] = args;
          method.apply(this, [first, ...rest.map((arg) => (typeof arg === 'string' ? withheldText(arg) : arg))] as Parameters<
            typeof method
          >);
        },
      },
    },
    destination,
  );

  const make = (bound: LogFields): Logger => {
    const emit = (level: LogLevel, msg: string, fields?: LogFields): void => {
      try {
        if (!root.isLevelEnabled(level)) return;
        root[level]({ ...bound, ...fields }, msg);
      } catch (error) {
        try {
          root[level]({ logError: `fields not serialisable: ${String(error)}` }, msg);
        } catch {
          // A logger never throws: the line is lost, the request goes on.
        }
      }
    };
    const logger = Object.fromEntries(
      LEVELS.map((level) => [level, (msg: string, fields?: LogFields) => emit(level, msg, fields)]),
    ) as unknown as Omit<Logger, 'child'>;
    return { ...logger, child: (fields) => make({ ...bound, ...fields }) };
  };
  return make({});
}

const noop = (): void => {};

/** A logger that drops everything; the default for library users and tests. */
export const silentLogger: Logger = {
  trace: noop,
  debug: noop,
  info: noop,
  warn: noop,
  error: noop,
  fatal: noop,
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

/** `text`, or the withheld marker when it holds a credential. */
function withheldText(text: string): string {
  return withholdSecrets(text).value as string;
}

/**
 * A JSON-ready copy of a record's fields with the logger's reserved keys left out, errors
 * expanded ({@link serializeError}), `toJSON` applied, bigints as decimal strings, cycles
 * and too-deep values cut, and every string through the secret rules.
 */
function sanitizeFields(fields: Record<string, unknown>): Record<string, unknown> {
  const seen = new Set<object>();
  const walk = (value: unknown, depth: number): unknown => {
    if (typeof value === 'string') return withheldText(value);
    if (typeof value === 'bigint') return value.toString();
    if (value === null || typeof value !== 'object') return value;
    if (seen.has(value)) return '[circular]';
    if (depth >= MAX_FIELD_DEPTH) return '[too deep]';
    seen.add(value);
    try {
      if (value instanceof Error) return walk(serializeError(value), depth);
      const { toJSON } = value as { toJSON?: unknown };
      if (typeof toJSON === 'function') return walk(toJSON.call(value), depth);
      if (Array.isArray(value)) return value.map((item) => walk(item, depth + 1));
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value)) out[key] = walk(item, depth + 1);
      return out;
    } finally {
      seen.delete(value);
    }
  };
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (!RESERVED_KEYS.has(key)) out[key] = walk(value, 0);
  }
  return out;
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
 * the context and on the response, and `log` to a child logger carrying it for the handlers.
 * Install it first so it sees every request.
 */
export function requestLogger(log: Logger, options: RequestLoggerOptions = {}): MiddlewareHandler<AppEnv> {
  const quietPaths = options.quietPaths ?? QUIET_PATHS;
  return async (c, next) => {
    const started = performance.now();
    const offered = c.req.header(REQUEST_ID_HEADER);
    const requestId = offered !== undefined && ACCEPTED_REQUEST_ID.test(offered) ? offered : randomUUID();
    c.set('requestId', requestId);
    c.set('log', log.child({ requestId }));
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
