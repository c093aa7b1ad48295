import { setTimeout as sleep } from 'node:timers/promises';
import type { S3rverContext, S3rverMiddleware } from 's3rver';
import type { SeededRandom } from './rng.js';

/** What the S3 endpoint does wrong while a chaos window is open. */
export type S3ChaosKind = 's3-500' | 's3-503' | 's3-slow' | 's3-drop-upload';

/** Share of requests a window hits; the rest pass, so retries can get through. */
const HIT_RATIO = 0.35;
/** Delay of a slow answer. */
const SLOW_MS = 1_500;

/**
 * An s3rver middleware (put first) that, while a window is open, answers a share of the
 * requests with 500 InternalError or 503 SlowDown, delays them, or cuts a PUT's connection
 * after its first body bytes (a connection dropped mid-upload). Outside a window it passes.
 */
export class S3Chaos {
  private window: { kind: S3ChaosKind; until: number } | undefined;
  /** Requests hit, by kind. */
  readonly hits = new Map<S3ChaosKind, number>();

  constructor(private readonly random: SeededRandom) {}

  /** Opens a window of `kind` for `ms` (replacing any open one). */
  open(kind: S3ChaosKind, ms: number): void {
    this.window = { kind, until: Date.now() + ms };
  }

  /** Closes any open window at once. */
  close(): void {
    this.window = undefined;
  }

  middleware(): S3rverMiddleware {
    return async (ctx, next) => {
      const window = this.window;
      if (window === undefined || Date.now() > window.until || !this.random.chance(HIT_RATIO)) return next();
      if (window.kind === 's3-drop-upload' && ctx.method !== 'PUT') return next();
      this.hits.set(window.kind, (this.hits.get(window.kind) ?? 0) + 1);
      if (window.kind === 's3-slow') {
        await sleep(SLOW_MS);
        return next();
      }
      if (window.kind === 's3-drop-upload') return dropMidUpload(ctx);
      await drain(ctx);
      const [status, code] = window.kind === 's3-500' ? [500, 'InternalError'] : [503, 'SlowDown'];
      ctx.status = status;
      ctx.type = 'application/xml';
      ctx.body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>soak fault</Message></Error>`;
    };
  }
}

async function drain(ctx: S3rverContext): Promise<void> {
  for await (const _ of ctx.req) {
    // discard, as S3 reads the body before answering an error
  }
}

/** Reads the first body chunk (or none, for an empty body) and destroys the connection. */
async function dropMidUpload(ctx: S3rverContext): Promise<void> {
  ctx.respond = false;
  await new Promise<void>((resolve) => {
    const cut = (): void => {
      ctx.req.socket.destroy();
      resolve();
    };
    ctx.req.once('data', cut);
    ctx.req.once('end', cut);
    ctx.req.once('error', cut);
    ctx.req.once('close', cut);
  });
}
