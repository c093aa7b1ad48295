import type { Socket } from 'node:net';
import type { S3rverContext, S3rverMiddleware } from 's3rver';

/** Which requests a fault applies to; every given field must match. */
export interface S3RequestFilter {
  /** HTTP method, e.g. `PUT`. */
  readonly method?: string;
  /** A query parameter the request must carry, e.g. `uploadId` for parts and completion. */
  readonly query?: string;
  /** Bucket name. */
  readonly bucket?: string;
}

/** One request as the server saw it, before any fault or S3 handling. */
export interface S3RequestRecord {
  readonly method: string;
  readonly bucket: string | undefined;
  readonly key: string | undefined;
  /** Names of the query parameters (`uploadId`, `partNumber`, `list-type`…). */
  readonly query: readonly string[];
}

type FaultAction =
  | { readonly kind: 'status'; readonly status: number; readonly code: string }
  | { readonly kind: 'reset' | 'stall' | 'drop' };

interface Fault {
  remaining: number;
  readonly filter: S3RequestFilter;
  readonly action: FaultAction;
}

/** S3 error codes a real server sends with these statuses. */
const DEFAULT_CODES: Readonly<Record<number, string>> = {
  400: 'BadRequest',
  403: 'AccessDenied',
  409: 'ConditionalRequestConflict',
  429: 'SlowDown',
  500: 'InternalError',
  503: 'SlowDown',
};

/**
 * Records every request and misbehaves on purpose for the next N matching ones: answers an
 * error status, resets the connection, never answers, or does the work and then loses the
 * answer. Faults are used up in the order they
 * were added; a request matches at most one.
 */
export class S3FaultInjector {
  private readonly faults: Fault[] = [];
  private readonly log: S3RequestRecord[] = [];
  private readonly stalled = new Set<Socket>();

  /** Every request seen so far, oldest first. */
  get requests(): readonly S3RequestRecord[] {
    return this.log;
  }

  /** How many recorded requests match `filter`. */
  count(filter: S3RequestFilter = {}): number {
    return this.log.filter((r) => matches(r, filter)).length;
  }

  /** The next `count` matching requests get `status` with an S3 error body (`code` defaults by status). */
  failNext(count: number, status: number, filter: S3RequestFilter = {}, code = DEFAULT_CODES[status] ?? 'InternalError'): void {
    this.faults.push({ remaining: count, filter, action: { kind: 'status', status, code } });
  }

  /** The next `count` matching requests have their connection destroyed before any answer. */
  resetNext(count: number, filter: S3RequestFilter = {}): void {
    this.faults.push({ remaining: count, filter, action: { kind: 'reset' } });
  }

  /** The next `count` matching requests are never answered (until the server closes). */
  stallNext(count: number, filter: S3RequestFilter = {}): void {
    this.faults.push({ remaining: count, filter, action: { kind: 'stall' } });
  }

  /** The next `count` matching requests are carried out, then their connection is destroyed before the answer. */
  dropResponseNext(count: number, filter: S3RequestFilter = {}): void {
    this.faults.push({ remaining: count, filter, action: { kind: 'drop' } });
  }

  /** Drops faults not used up yet and forgets recorded requests. */
  reset(): void {
    this.faults.length = 0;
    this.log.length = 0;
  }

  /** Destroys connections held by stalled requests, so the server can close. */
  releaseStalled(): void {
    for (const socket of this.stalled) socket.destroy();
    this.stalled.clear();
  }

  /** The Koa middleware; it must run before s3rver's own. */
  middleware(): S3rverMiddleware {
    return async (ctx, next) => {
      const record = describe(ctx);
      this.log.push(record);
      const fault = this.faults.find((f) => f.remaining > 0 && matches(record, f.filter));
      if (fault === undefined) return next();
      fault.remaining -= 1;
      await this.apply(ctx, fault.action, next);
    };
  }

  private async apply(ctx: S3rverContext, action: FaultAction, next: () => Promise<void>): Promise<void> {
    if (action.kind === 'status') {
      // Read the body first, as S3 does, so the client is not cut off mid-upload.
      for await (const _ of ctx.req) {
        // discard
      }
      ctx.status = action.status;
      ctx.type = 'application/xml';
      ctx.body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${action.code}</Code><Message>injected fault</Message></Error>`;
      return;
    }
    if (action.kind === 'drop') await next();
    ctx.respond = false;
    if (action.kind === 'stall') this.stalled.add(ctx.req.socket);
    else ctx.req.socket.destroy();
  }
}

function describe(ctx: S3rverContext): S3RequestRecord {
  const [bucket, ...rest] = ctx.path.slice(1).split('/');
  const key = rest.length === 0 || rest.join('/') === '' ? undefined : decodeURIComponent(rest.join('/'));
  return { method: ctx.method, bucket: bucket === '' ? undefined : bucket, key, query: Object.keys(ctx.query) };
}

function matches(record: S3RequestRecord, filter: S3RequestFilter): boolean {
  return (
    (filter.method === undefined || filter.method === record.method) &&
    (filter.query === undefined || record.query.includes(filter.query)) &&
    (filter.bucket === undefined || filter.bucket === record.bucket)
  );
}
